"""MCP tool definitions as ordinary `AgentTool`s: validated, bounded, cancellable calls.

Each tool is a `define_tool` tool whose handler sends `tools/call` on the server's session
and waits for it with the run's signal and the tool's timeout; its input schema is the
server's, so arguments are validated before dispatch. One check per `tools()` selection
compares the live definitions with the pinned ones before a batch starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tubeless._frozen import thaw
from tubeless._quote import quote, quote_list
from tubeless.agent import AgentTool, ToolContext, ToolError, define_tool
from tubeless.agent.lowlevel import source_tool
from tubeless.errors import AgentDefinitionError, McpToolDriftError, RunCancelledError
from tubeless.mcp._lock import McpToolDefinition
from tubeless.mcp._session import (
    LOST,
    CallTimedOutError,
    McpSession,
    describe,
    is_connection_closed,
)

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

TOOL_ERROR = "MCP_TOOL_ERROR"
"""The recoverable outcome code of a call the server answered with `isError`."""
TIMED_OUT = "TUBELESS_AGENT_CALL_TIMED_OUT"
"""The recoverable outcome code of a call that passed its `timeout`."""
MESSAGE_LIMIT = 1024
"""At most this many characters of a server's error text reach the model."""
_ANY_OUTPUT: Mapping[str, Any] = {}
"""Output check: the SDK already validates `structuredContent` against the tool's schema."""

_OLD_DRAFTS = (
    "json-schema.org/draft-04/schema",
    "json-schema.org/draft-06/schema",
    "json-schema.org/draft-07/schema",
)
"""Dialects read as draft 2020-12 (see `_as_2020_12`)."""

SessionOf = Callable[[], McpSession]
"""Gives the open session of a server, or raises `McpServerClosedError`."""


def _text(result: Any) -> str:
    return "\n".join(
        block.text for block in result.content if getattr(block, "type", None) == "text"
    )


def _bounded(text: str) -> str:
    """At most `MESSAGE_LIMIT` characters of a server's text, control characters escaped."""
    short = text[:MESSAGE_LIMIT]
    # An escape is at most 10 characters (`\U0010ffff`), so the message stays within
    # `ToolError`'s 4096 even when every character needs one.
    clean = "".join(ch if ch.isprintable() or ch == "\n" else repr(ch)[1:-1] for ch in short)
    clean = clean[: 3 * MESSAGE_LIMIT]
    return clean if len(text) <= MESSAGE_LIMIT else f"{clean}… ({len(text)} characters)"


def call_tool(
    session: McpSession,
    definition: McpToolDefinition,
    arguments: Any,
    signal: threading.Event,
    timeout: float | None,
) -> Any:
    """Send one `tools/call` and return its value: `structuredContent` or the text.

    `timeout` is the time left to the call's deadline: the waiting request is bounded and,
    at the deadline, cancelled on the server and reported as `TUBELESS_AGENT_CALL_TIMED_OUT`.

    Raises:
        ToolError: `MCP_TOOL_ERROR` (`isError`, or the server refused the request),
            `TUBELESS_MCP_CONNECTION_LOST` (the server died or the connection dropped) or
            `TUBELESS_AGENT_CALL_TIMED_OUT`: recoverable outcomes the model sees.
        RunCancelledError: when the run's signal was set (the request is cancelled).
    """
    name = definition.name
    plain = thaw(arguments)

    def send(client: ClientSession) -> Any:
        return client.call_tool(name, plain)

    try:
        result = session.run(send, signal=signal, timeout=timeout)
    except CallTimedOutError:
        raise ToolError(
            TIMED_OUT,
            f"MCP tool {quote(name)} did not answer before its deadline and was cancelled; "
            "the call may still complete",
        ) from None
    except (ToolError, RunCancelledError):
        raise
    except Exception as error:
        if getattr(error, "code", None) == LOST or is_connection_closed(error):
            raise ToolError(
                LOST, f"MCP server connection lost during {quote(name)}: {describe(error)}"
            ) from error
        raise ToolError(TOOL_ERROR, f"MCP tool {quote(name)} failed: {describe(error)}") from None
    if result.is_error:
        raise ToolError(TOOL_ERROR, _bounded(_text(result)) or f"MCP tool {quote(name)} failed")
    if definition.output_schema is not None:
        return result.structured_content
    return _text(result)


def drift(pinned: Mapping[str, McpToolDefinition], live: list[McpToolDefinition]) -> list[str]:
    """What differs, one phrase per pinned tool whose live definition is not the same."""
    found = {tool.name: tool for tool in live}
    changes = []
    for name, tool in sorted(pinned.items()):
        other = found.get(name)
        if other is None:
            changes.append(f"{quote(name)} is gone")
            continue
        fields = [
            label
            for label, mine, theirs in (
                ("description", tool.description, other.description),
                ("inputSchema", tool.input_schema, other.input_schema),
                ("outputSchema", tool.output_schema, other.output_schema),
            )
            if mine != theirs
        ]
        if fields:
            changes.append(f"{quote(name)} changed its {' and '.join(fields)}")
    return changes


def check_drift(
    server_label: str, pinned: Mapping[str, McpToolDefinition], live: list[McpToolDefinition]
) -> None:
    """Raise `McpToolDriftError` when a pinned definition differs from the live one."""
    changes = drift(pinned, live)
    if changes:
        names = sorted(name for name in pinned if pinned[name] not in live)
        raise McpToolDriftError(
            f"MCP server {quote(server_label, 200)} tool definitions drifted from the pinned "
            f"ones: {'; '.join(changes[:8])}"
            + (f" (and {len(changes) - 8} more)" if len(changes) > 8 else "")
            + f"; review and lock again: {quote_list(names)}",
            tools=names,
        )


def _per_tool(value: object, names: list[str], label: str) -> dict[str, Any]:
    """`value` for every tool: one value for all, or a mapping of tool name to value."""
    if not isinstance(value, Mapping):
        return dict.fromkeys(names, value)
    unknown = sorted(str(key) for key in value if key not in names)
    if unknown:
        raise AgentDefinitionError(f"MCP tools {label} names an unknown tool {quote(unknown[0])}")
    return {name: value.get(name) for name in names}


def _as_2020_12(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without a draft-04/06/07 `$schema`, read as draft 2020-12.

    Many servers (zod-to-json-schema, for one) declare draft-07. The keywords tool inputs
    use mean the same in both; the one that does not (array-form `items`) fails the
    2020-12 meta-schema, so such a schema is refused rather than read differently.
    """
    dialect = schema.get("$schema")
    if isinstance(dialect, str) and dialect.rstrip("#").endswith(_OLD_DRAFTS):
        return {key: value for key, value in schema.items() if key != "$schema"}
    return schema


def build_tools(
    definitions: Mapping[str, McpToolDefinition],
    session_of: SessionOf,
    batch_check: Callable[[threading.Event, str], None],
    *,
    timeout: float | None,
    replay: object,
    needs_approval: object,
) -> dict[str, AgentTool]:
    """One `AgentTool` per definition, sharing one batch check.

    Raises:
        AgentDefinitionError: for a bad `timeout`, `replay` or `needs_approval`, or a
            definition `define_tool` refuses (a blank or too long description, a schema
            that does not compile).
    """
    names = sorted(definitions)
    replays = _per_tool(replay, names, "replay")
    approvals = _per_tool(needs_approval, names, "needs_approval")
    tools = {}
    for name in names:
        definition = definitions[name]
        try:
            tool = define_tool(
                description=definition.description or f"MCP tool {name}",
                input_schema=_as_2020_12(thaw(definition.input_schema)),
                output_schema=_ANY_OUTPUT,
                run=_handler(session_of, definition),
                timeout=timeout,
                replay=replays[name] or "unsafe",  # annotations never make a tool safe
                needs_approval=approvals[name] or False,
            )
        except AgentDefinitionError as error:
            raise AgentDefinitionError(f"MCP tool {quote(name)}: {error}") from error
        tools[name] = source_tool(
            tool, batch_check=batch_check, source_version=f"mcp:{definition.digest}"
        )
    return tools


def _handler(
    session_of: SessionOf, definition: McpToolDefinition
) -> Callable[[Any, ToolContext], Any]:
    def run(arguments: Any, context: ToolContext) -> Any:
        # The call's deadline (its `timeout`, or the run's `max_seconds`) bounds the wait.
        left = context.time_left()
        return call_tool(session_of(), definition, arguments, context.signal, left)

    return run

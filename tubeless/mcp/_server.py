"""`McpServer`: one MCP server as a tool source, open for the span of a `with` block."""

from __future__ import annotations

import os
import threading
import typing
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from tubeless._quote import quote, type_name
from tubeless.agent import AgentTool, DecisionContext
from tubeless.agent.lowlevel import check_seconds
from tubeless.errors import (
    AgentDefinitionError,
    McpConnectionError,
    McpServerClosedError,
    RunCancelledError,
)
from tubeless.mcp._lock import McpLock, McpToolDefinition
from tubeless.mcp._session import (
    CallTimedOutError,
    McpSession,
    Transport,
    describe,
    http_transport,
    list_all_tools,
    stdio_transport,
)
from tubeless.mcp._tools import build_tools, check_drift

Replay = Literal["safe", "unsafe"]
ApprovalRule = bool | Callable[[Any, DecisionContext], bool]
LIST_SECONDS = 30.0
"""How long the drift check's `tools/list` may take."""


@typing.final
class McpServer:
    """One MCP server: a context manager owning one session on one event-loop thread.

    Make one with `stdio_server(...)` or `http_server(...)`. `tools(pin=...)` works
    before the server is open (definitions come from the lock file), so an agent module
    loads, plans and draws without a server; calls need the server open:

    ```text
    server = stdio_server("python", ["weather_server.py"])
    agent = define_agent(..., tools=server.tools(pin="mcp.lock.json"))
    with server:
        run = agent.run({...})
    ```

    Leaving the `with` block ends the session, the loop thread and (stdio) the child
    process. A server opens once: using it after it closed is `TUBELESS_MCP_SERVER_CLOSED`.
    """

    __slots__ = ("_label", "_lock", "_session", "_state", "_transport", "_verified")

    def __init__(self, transport: Transport, label: str) -> None:
        """Use `stdio_server(...)` or `http_server(...)`."""
        self._transport = transport
        self._label = label
        self._session: McpSession | None = None
        self._state: Literal["new", "open", "closed"] = "new"
        self._lock = threading.Lock()
        self._verified: dict[int, tuple[str, int]] = {}

    @property
    def label(self) -> str:
        """What the server is, for messages and thread names (its command or URL)."""
        return self._label

    @property
    def closed(self) -> bool:
        """Whether the server was opened and has closed since (it cannot reopen)."""
        return self._state == "closed"

    def __repr__(self) -> str:
        return f"McpServer({quote(self._label, 200)}, {self._state})"

    def __enter__(self) -> McpServer:
        """Start the server (or connect to it) and initialize the session.

        Raises:
            McpServerClosedError: when the server was opened before.
            McpConnectionError: `TUBELESS_MCP_CONNECTION_FAILED` when it cannot be reached.
            MissingExtraError: when the `mcp` extra is not installed.
        """
        with self._lock:
            if self._state != "new":
                raise McpServerClosedError(
                    f"MCP server {quote(self._label, 200)} was already opened; "
                    "make a new one with stdio_server(...) or http_server(...)"
                )
            self._state = "open"
        session = McpSession(self._transport, self._label)
        try:
            session.open()
        except BaseException:
            self._state = "closed"
            raise
        self._session = session
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """End the session, the loop thread and (stdio) the child process."""
        self.close()

    def close(self) -> None:
        """End the session, the loop thread and (stdio) the child process (idempotent)."""
        with self._lock:
            session, self._session = self._session, None
            self._state = "closed"
        if session is not None:
            session.close()

    def _open_session(self) -> McpSession:
        session = self._session
        if session is None:
            state = "has closed" if self._state == "closed" else "is not open yet"
            raise McpServerClosedError(
                f"MCP server {quote(self._label, 200)} {state}: use it inside `with server:`"
            )
        return session

    def lock(self) -> McpLock:
        """The server's live tool definitions, as `tubeless mcp lock` writes them.

        Raises:
            McpServerClosedError: when the server is not open.
            McpConnectionError: when listing failed.
        """
        return McpLock(tools=tuple(self._list(None)))

    def _list(self, signal: threading.Event | None) -> list[McpToolDefinition]:
        session = self._open_session()
        try:
            listed: list[McpToolDefinition] = session.run(
                list_all_tools, signal=signal, timeout=LIST_SECONDS
            )
        except CallTimedOutError:
            raise McpConnectionError(
                f"MCP server {quote(self._label, 200)} did not list its tools in time"
            ) from None
        except (McpServerClosedError, McpConnectionError, RunCancelledError):
            raise
        except Exception as error:
            raise McpConnectionError(
                f"MCP server {quote(self._label, 200)} could not list its tools: {describe(error)}"
            ) from error
        return listed

    def tools(
        self,
        *,
        pin: str | os.PathLike[str] | McpLock | None = None,
        include: Iterable[str] | None = None,
        timeout: float | None = None,
        replay: Replay | Mapping[str, Replay] | None = None,
        needs_approval: ApprovalRule | Mapping[str, ApprovalRule] | None = None,
    ) -> dict[str, AgentTool]:
        """The server's tools as `{name: AgentTool}`, ready for `define_agent(tools=...)`.

        Args:
            pin: a lock file (or an `McpLock`): the definitions come from it, so no server
                is needed until a call, and they join the agent's definition identity.
                Without it the open server's definitions are listed now. Either way, the
                first batch of each agent run compares them with the live ones and fails
                the run with `TUBELESS_MCP_TOOL_DRIFT` on any difference (again after the
                server announces `notifications/tools/list_changed`).
            include: offer only these tool names (default: every tool).
            timeout: seconds a call may take (a number > 0), as `define_tool(timeout=)`:
                at the deadline (or at the run's `max_seconds`, if earlier) the request is
                cancelled on the server and the call's outcome is the recoverable
                `TUBELESS_AGENT_CALL_TIMED_OUT`.
            replay: `"safe"` or `"unsafe"` (default), for all tools or per tool name.
                Server annotations (`readOnlyHint`, `idempotentHint`) never make a tool
                safe to replay.
            needs_approval: as in `define_tool`, for all tools or per tool name.

        Raises:
            AgentDefinitionError: for an unknown name in `include` or a mapping, a bad
                `timeout`, or a definition `define_tool` refuses.
            McpLockError: when the lock file cannot be read or is invalid.
            McpServerClosedError: without `pin`, when the server is not open.
        """
        if timeout is not None:
            check_seconds(timeout, "MCP tools timeout")
        if pin is None:
            known = {tool.name: tool for tool in self._list(None)}
        else:
            lock = pin if isinstance(pin, McpLock) else McpLock.read(pin)
            known = lock.by_name()
        chosen = _choose(known, include)
        check = _DriftCheck(self, chosen)
        return build_tools(
            chosen,
            self._open_session,
            check,
            timeout=timeout,
            replay=replay,
            needs_approval=needs_approval,
        )

    def verify(
        self, pinned: Mapping[str, McpToolDefinition], signal: threading.Event, run_id: str
    ) -> None:
        """Compare `pinned` with the live definitions, once per agent run and tool list.

        Raises:
            McpToolDriftError: `TUBELESS_MCP_TOOL_DRIFT` when they differ.
            McpServerClosedError: when the server is not open.
        """
        session = self._open_session()
        seen = (run_id, session.tools_changed)
        if self._verified.get(id(pinned)) == seen:
            return
        try:
            live = self._list(signal)
        except McpConnectionError:
            # A dead connection reaches no tool: each call reports it as a recoverable
            # `TUBELESS_MCP_CONNECTION_LOST`.
            return
        check_drift(self._label, pinned, live)
        # Only the last run per selection is kept: the cache never grows with runs.
        self._verified[id(pinned)] = seen


class _DriftCheck:
    """The batch check of one `tools()` selection (shared by its tools)."""

    __slots__ = ("_pinned", "_server")

    def __init__(self, server: McpServer, pinned: Mapping[str, McpToolDefinition]) -> None:
        self._server = server
        self._pinned = pinned

    def __call__(self, signal: threading.Event, run_id: str) -> None:
        self._server.verify(self._pinned, signal, run_id)


def _choose(
    known: Mapping[str, McpToolDefinition], include: Iterable[str] | None
) -> dict[str, McpToolDefinition]:
    if include is None:
        return dict(known)
    if isinstance(include, str) or not isinstance(include, Iterable):
        raise AgentDefinitionError(
            f"MCP tools include must be a list of tool names, got {type_name(include)}"
        )
    names = list(include)
    missing = [name for name in names if name not in known]
    if missing:
        raise AgentDefinitionError(
            f"MCP tools include names a tool the server does not define: {quote(missing[0])}"
        )
    return {name: known[name] for name in names}


def stdio_server(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> McpServer:
    """An MCP server run as a child process speaking over stdin and stdout.

    Nothing starts until `with server:`. The child gets the SDK's safe default
    environment plus `env`; its stderr is this process's stderr.

    Raises:
        AgentDefinitionError: when `command` is not a non-empty string or `args` not strings.
    """
    if not isinstance(command, str) or not command:
        raise AgentDefinitionError("stdio_server command must be a non-empty string")
    if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
        raise AgentDefinitionError("stdio_server args must be a sequence of strings")
    label = " ".join([command, *args])
    folder = None if cwd is None else os.fspath(cwd)
    return McpServer(stdio_transport(command, tuple(args), env, folder), label)


def http_server(url: str, *, headers: Mapping[str, str] | None = None) -> McpServer:
    """An MCP server reached over streamable HTTP at `url` (`http://host:port/mcp`).

    Nothing connects until `with server:`. `headers` go with every request (an
    `Authorization` header, say); they never appear in messages.

    Raises:
        AgentDefinitionError: when `url` is not an http(s) URL.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise AgentDefinitionError(f"http_server url must be an http(s) URL, got {quote(url)}")
    # Messages and thread names show the URL without credentials, query or fragment.
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return McpServer(http_transport(url, headers), f"{parts.scheme}://{host}{parts.path}")

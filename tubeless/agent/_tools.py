"""`define_tool`: a handler with validated input and output, and its one-step pipeline."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import inspect
import re
import threading
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from tubeless._frozen import FrozenDict
from tubeless._quote import quote
from tubeless._types import (
    RemoteToolHandler,
    SchemaLike,
    ToolDryRun,
    ToolHandler,
    ToolOptions,
    check_keywords,
)
from tubeless.agent._agent_contexts import ToolContext
from tubeless.agent._approvals import NeedsApproval, check_needs_approval
from tubeless.agent._deadline import Retry, check_retry, check_timeout, finish_handler
from tubeless.agent._remote import check_remote_handler, run_remote
from tubeless.agent._state import own_descriptor
from tubeless.errors import AgentDefinitionError, SchemaDefinitionError
from tubeless.pipeline import Pipeline, StepContext, create_steps, define_pipeline
from tubeless.schema import Schema, as_schema

if TYPE_CHECKING:
    # Only for type checkers (annotations stay strings): `typing.Unpack` is 3.11+.
    from typing_extensions import Unpack

    from tubeless.agent._delegate import PipelineToolSpec

DESCRIPTION_LIMIT = 4096
TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,127}")
TOOL_NAME_RULE = "letters, digits, '_' and '-', starting with a letter, at most 128 characters"
"""`TOOL_NAME` in words, for messages."""


@dataclasses.dataclass(frozen=True, slots=True)
class _ToolSpec:
    description: str
    input_schema: Schema
    output_schema: Schema
    input_json_schema: FrozenDict
    run: Callable[[Any, Any], Any]
    preview: ToolHandler | None
    executor: concurrent.futures.Executor | None = None
    replay: str = "unsafe"
    needs_approval: NeedsApproval = False
    timeout: float | None = None
    retry: Retry | None = None
    batch_check: Callable[[threading.Event, str], None] | None = None
    source_version: str | None = None
    name: str | None = None
    """The name the tool carries (`@tubeless.tool`), for `define_agent(tools=[...])`."""


@typing.final
class AgentTool:
    """A frozen tool made by `define_tool` or `pipeline_tool`, the only ways to make one.

    Attributes:
        description: what the tool does (shown to models).
        input_json_schema: the frozen input descriptor (draft 2020-12, keys sorted).
        name: the name a tool made by `@tubeless.tool` carries, else `None`.
    """

    __slots__ = ("_spec",)
    _spec: _ToolSpec | PipelineToolSpec

    def __new__(cls, *args: object, **kwargs: object) -> AgentTool:
        raise AgentDefinitionError("AgentTool has no public constructor: use define_tool(...)")

    def __init_subclass__(cls, **kwargs: object) -> None:
        raise TypeError("AgentTool cannot be subclassed: use define_tool(...)")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("AgentTool is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("AgentTool is read-only")

    def __copy__(self) -> AgentTool:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> AgentTool:
        return self

    def __reduce__(self) -> str:
        # Handlers and compiled schemas do not survive pickling; define tools where used.
        raise TypeError("AgentTool cannot be pickled: call define_tool(...) where it is used")

    @property
    def description(self) -> str:
        """What the tool does (shown to models)."""
        return self._spec.description

    @property
    def input_json_schema(self) -> FrozenDict:
        """The frozen input descriptor (draft 2020-12, keys sorted)."""
        return self._spec.input_json_schema

    @property
    def name(self) -> str | None:
        """The name a tool made by `@tubeless.tool` carries (its function's), else `None`.

        `define_agent(tools=[...])` names each tool of a list by it; in a mapping the key
        names the tool.
        """
        return getattr(self._spec, "name", None)

    def __repr__(self) -> str:
        return f"AgentTool({self.description[:40]!r})"


def new_tool(spec: _ToolSpec | PipelineToolSpec) -> AgentTool:
    """A fresh tool for `spec` (for `define_tool` and `pipeline_tool`)."""
    tool = object.__new__(AgentTool)
    object.__setattr__(tool, "_spec", spec)
    return tool


def tool_spec(tool: object) -> _ToolSpec | PipelineToolSpec:
    """The private definition behind a tool made by `define_tool` or `pipeline_tool`.

    Raises:
        KeyError: when `tool` was not made by `define_tool`.
    """
    spec: _ToolSpec | PipelineToolSpec | None = (
        getattr(tool, "_spec", None) if isinstance(tool, AgentTool) else None
    )
    if spec is None:
        raise KeyError(tool)
    return spec


def source_tool(
    tool: AgentTool,
    *,
    batch_check: Callable[[threading.Event, str], None] | None = None,
    source_version: str | None = None,
) -> AgentTool:
    """A copy of a `define_tool` tool that a tool source (an MCP server) vouches for.

    `batch_check(signal, agent_run_id)` runs once per batch holding the tool, before any
    call of the batch starts; it raises to fail the run. `source_version` joins the tool
    pipeline's definition identity.

    Raises:
        AgentDefinitionError: when `tool` was not made by `define_tool`.
    """
    spec = tool_spec(tool) if isinstance(tool, AgentTool) else None
    if not isinstance(spec, _ToolSpec):
        raise AgentDefinitionError("A tool source needs a tool made by define_tool")
    return new_tool(
        dataclasses.replace(spec, batch_check=batch_check, source_version=source_version)
    )


def check_tool_name(name: str) -> None:
    """Refuse a name tools cannot have.

    Raises:
        AgentDefinitionError: saying the rule (`TOOL_NAME_RULE`).
    """
    if not TOOL_NAME.fullmatch(name):
        raise AgentDefinitionError(f"Invalid tool name: {quote(name)} (use {TOOL_NAME_RULE})")


def named_tool(tool: AgentTool, name: str) -> AgentTool:
    """`tool`, carrying `name` (checked against the tool-name rule).

    Raises:
        AgentDefinitionError: for a name tools cannot have, or a tool `pipeline_tool` made.
    """
    check_tool_name(name)
    spec = tool_spec(tool)
    if not isinstance(spec, _ToolSpec):
        raise AgentDefinitionError("Only a tool made by define_tool can carry a name")
    return new_tool(dataclasses.replace(spec, name=name))


def check_sync_handler(handler: object, label: str) -> None:
    """Refuse an `async def` function (or async generator) where a sync callable belongs.

    Tools run on threads and are called, never awaited: an async handler would return a
    coroutine nobody awaits ("coroutine was never awaited") instead of its value.

    Raises:
        AgentDefinitionError: naming `label` and saying what to do instead.
    """
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object's async __call__
    functions = (handler, call)
    if any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in functions):
        raise AgentDefinitionError(
            f"{label} is an async function: tools are called on threads, never awaited; "
            "define it with def (run blocking I/O in it directly)"
        )


def check_arity(handler: Callable[..., Any], label: str, parameters: str) -> None:
    """Refuse a handler that cannot be called with two positional arguments.

    A handler whose signature cannot be read (some builtins) is accepted as it is.

    Raises:
        AgentDefinitionError: naming `label` and the two arguments it must take.
    """
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, None)
    except TypeError as error:
        raise AgentDefinitionError(
            f"{label} must take two arguments, {parameters}: {quote(str(error), 200)}"
        ) from None


def tools_by_name(tools: Sequence[object]) -> dict[str, Any]:
    """A list of named tools (`@tubeless.tool`) as the mapping their names make.

    Raises:
        AgentDefinitionError: for an item that carries no name, or two with one name.
    """
    named: dict[str, Any] = {}
    for tool in tools:
        name = tool.name if isinstance(tool, AgentTool) else None
        if name is None:
            raise AgentDefinitionError(
                "Agent tools given as a list must carry names (made by @tubeless.tool); "
                "give a mapping of tool name to tool for the others"
            )
        if name in named:
            raise AgentDefinitionError(f"Agent tools list two tools named {quote(name)}")
        named[name] = tool
    return named


def _schema(value: object, label: str) -> Schema:
    """Compile a schema argument; the error names what is wrong (kind, or schema path)."""
    try:
        return as_schema(value, label=label)
    except SchemaDefinitionError as error:
        raise AgentDefinitionError(str(error)) from error


def input_descriptor(schema: Schema, explicit: object, label: str) -> FrozenDict:
    """The frozen input JSON Schema: `explicit` when given, else the schema's own."""
    if explicit is not None:
        from tubeless.schema import json_schema

        try:
            json_schema(explicit)  # type: ignore[arg-type]
        except (SchemaDefinitionError, TypeError) as error:
            raise AgentDefinitionError(
                f"{label} explicit JSON Schema descriptor: {error}"
            ) from error
        return own_descriptor(explicit, label)
    try:
        converted = schema.json_schema()
    except Exception as error:
        raise AgentDefinitionError(
            f"{label} requires a JSON Schema input descriptor or explicit fallback"
        ) from error
    if converted is None:
        raise AgentDefinitionError(
            f"{label} requires a JSON Schema input descriptor or explicit fallback"
        )
    return own_descriptor(converted, label)


def check_description(description: object) -> str:
    if not isinstance(description, str) or not description.strip():
        raise AgentDefinitionError("Tool description must be a non-blank string")
    if len(description) > DESCRIPTION_LIMIT:
        raise AgentDefinitionError(
            f"Tool description must be at most {DESCRIPTION_LIMIT} characters"
        )
    return description


@overload
def define_tool(
    *,
    description: str,
    input_schema: SchemaLike,
    output_schema: SchemaLike,
    run: ToolHandler,
    input_json_schema: Mapping[str, Any] | None = None,
    dry_run: ToolDryRun = None,
    executor: None = None,
    **options: Unpack[ToolOptions],
) -> AgentTool: ...


@overload
def define_tool(
    *,
    description: str,
    input_schema: SchemaLike,
    output_schema: SchemaLike,
    run: RemoteToolHandler,
    input_json_schema: Mapping[str, Any] | None = None,
    dry_run: ToolDryRun = None,
    executor: concurrent.futures.Executor,
    **options: Unpack[ToolOptions],
) -> AgentTool: ...


def define_tool(
    *,
    description: str,
    input_schema: SchemaLike,
    output_schema: SchemaLike,
    run: Callable[[Any, Any], Any],
    input_json_schema: Mapping[str, Any] | None = None,
    dry_run: ToolDryRun = None,
    executor: concurrent.futures.Executor | None = None,
    **options: Unpack[ToolOptions],
) -> AgentTool:
    """Define a tool an agent may call.

    Args:
        description: what the tool does, non-blank, at most 4096 characters.
        input_schema: validates (and may transform) the model's raw arguments.
        output_schema: validates (and may transform) what `run` returns.
        run: `run(validated_input, context)`, a plain (not `async`) callable taking two
            arguments (checked here); raise `ToolError(code, message)` for an expected
            domain failure the agent should see. `context` is a `ToolContext`: the
            run's `signal`, `log`, `sleep`, `report_progress`, `execution` ids, ...
        input_json_schema: explicit input descriptor, used instead of the schema's own.
        dry_run: `None`/`"skip"` (skip in dry runs) or a preview with `run`'s signature.
        executor: run the handler body there instead of on the call's thread: any
            `concurrent.futures.Executor` (a `ProcessPoolExecutor`, Dask's
            `Client.get_executor(pure=False)`, ...). `run` must pickle, and receives a
            `RemoteToolContext`; its validated input and its value must pickle too.
            Validation, limits, admission order, traces and a dry run's preview stay in
            this process. The executor stays the caller's: runs never shut it down.
        **options: the `ToolOptions`: `replay` (`"unsafe"` by default, or `"safe"`),
            `needs_approval`, `timeout` and `retry`.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`, checked in this order:
            description, output schema, handler and dry-run policy (callable, not async,
            taking two arguments), executor and whether the handler pickles, replay,
            needs_approval, timeout, retry, input descriptor.
        TypeError: for a keyword `define_tool` does not take.
    """
    check_keywords(options, ToolOptions, "define_tool")
    replay = options.get("replay", "unsafe")
    text = check_description(description)
    output = _schema(output_schema, "Tool output")
    if not callable(run) or not (dry_run is None or dry_run == "skip" or callable(dry_run)):
        raise AgentDefinitionError(
            "Tool requires a callable run handler and a dry-run policy of None, 'skip' or a "
            "callable preview"
        )
    check_sync_handler(run, "Tool run handler")
    check_arity(run, "Tool run handler", "(validated_input, context)")
    if callable(dry_run):
        check_sync_handler(dry_run, "Tool dry-run preview")
        check_arity(dry_run, "Tool dry-run preview", "(validated_input, context)")
    if executor is not None:
        check_remote_handler(run, executor, "Tool")
    if replay not in ("safe", "unsafe"):
        raise AgentDefinitionError(f"Tool replay must be 'safe' or 'unsafe', got {quote(replay)}")
    approval = check_needs_approval(options.get("needs_approval", False), "Tool")
    seconds = check_timeout(options.get("timeout"), "Tool")
    policy = check_retry(options.get("retry"), replay, "Tool")
    source = _schema(input_schema, "Tool input")
    descriptor = input_descriptor(source, input_json_schema, "Tool input")
    return new_tool(
        _ToolSpec(
            description=text,
            input_schema=source,
            output_schema=output,
            input_json_schema=descriptor,
            run=run,
            preview=dry_run if callable(dry_run) else None,
            executor=executor,
            replay=replay,
            needs_approval=approval,
            timeout=seconds,
            retry=policy,
        )
    )


def _tool_handler(handler: ToolHandler) -> Callable[[Mapping[str, Any], StepContext], Any]:
    def run_tool(inputs: Mapping[str, Any], context: StepContext) -> Any:
        options = context.options
        attributes = options["attributes"]
        if attributes is not None:
            context.report_attempt(options.get("attempt", 1), attributes)
        attempt = options.get("deadline")
        if attempt is None:
            return handler(options["input"], ToolContext(context, options.get("execution")))
        try:
            return handler(
                options["input"], ToolContext(context, options["execution"], attempt.deadline)
            )
        finally:
            finish_handler(attempt, context, attributes)

    return run_tool


def _remote_tool_handler(
    handler: RemoteToolHandler, executor: concurrent.futures.Executor
) -> Callable[[Mapping[str, Any], StepContext], Any]:
    def run_tool(inputs: Mapping[str, Any], context: StepContext) -> Any:
        options = context.options
        attributes = options["attributes"]
        if attributes is not None:
            context.report_attempt(options.get("attempt", 1), attributes)
        attempt = options.get("deadline")
        if attempt is None:
            return run_remote(executor, handler, options["input"], context)
        try:
            return run_remote(executor, handler, options["input"], context, attempt.deadline)
        finally:
            finish_handler(attempt, context, attributes)

    return run_tool


def tool_pipeline(agent_id: str, name: str, spec: _ToolSpec) -> Pipeline:
    """Compile `<agent id>/tool/<name>`: one step `tool`, which is also the finalizer."""
    executor = spec.executor
    step = create_steps().step(
        "tool",
        run=_tool_handler(spec.run)
        if executor is None
        else _remote_tool_handler(spec.run, executor),
        output_schema=spec.output_schema,
        dry_run=_tool_handler(spec.preview) if spec.preview else "skip",
    )
    return define_pipeline(
        id=f"{agent_id}/tool/{name}",
        steps=[step],
        finalize=step,
        implementation_version=spec.source_version,
    )

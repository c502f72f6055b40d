"""Named types for what users pass to tubeless, as httpx's `_types.py` names its own.

Public signatures use these names, and the packages re-export them: `SchemaLike` and
`SchemaProtocol` from `tubeless.schema`; `ControlsLike`, `ContextLike`, `HooksLike` and
`Hook` from `tubeless.pipeline`, with `StepOptions`, the keyword arguments every step
factory shares; the tool and agent callbacks from `tubeless.agent`, with `ToolOptions` and
`FunctionToolOptions`, the keyword arguments the tool factories share. Trace
sinks and hook sets are protocols of their own (`tubeless.trace.TraceSink`,
`tubeless.pipeline.PipelineHooks`). The classes named here are imported for type checkers
only, so this module loads nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Union

if TYPE_CHECKING:
    import concurrent.futures

    from tubeless.agent import DecisionContext, RemoteToolContext, Retry, ToolContext
    from tubeless.pipeline import ExecutionContext, PipelineHooks, RunContext, RunControls, Step
    from tubeless.schema import Schema

__all__ = [
    "ContextLike",
    "ControlsLike",
    "DecideCallback",
    "FunctionToolOptions",
    "Hook",
    "HooksLike",
    "InitialStateCallback",
    "PydanticModelLike",
    "ReduceCallback",
    "RemoteToolHandler",
    "SchemaLike",
    "SchemaProtocol",
    "StepOptions",
    "ToolDryRun",
    "ToolHandler",
    "ToolOptions",
    "TypeAdapterLike",
    "check_keywords",
]


class SchemaProtocol(Protocol):
    """A hand-written schema: `validate(value)` returns the value, possibly transformed.

    It raises `tubeless.SchemaIssues` when the value does not match; any other exception
    means the validator itself failed. It may also have `json_schema()` returning the
    draft 2020-12 JSON Schema of its input side (or `None`), and a `vendor` string.
    """

    def validate(self, value: Any, /) -> Any:
        """Return `value`, possibly transformed, or raise `SchemaIssues`."""


class PydanticModelLike(Protocol):
    """A pydantic v2 model class (passed as the class, not an instance)."""

    def model_validate(self, obj: Any, /) -> Any:
        """Validate `obj` into a model instance."""

    def model_json_schema(self, *, mode: Literal["validation"] = ...) -> dict[str, Any]:
        """Return the model's JSON Schema."""


class TypeAdapterLike(Protocol):
    """A pydantic v2 `TypeAdapter`."""

    def validate_python(self, obj: Any, /) -> Any:
        """Validate `obj`."""

    def json_schema(self, *, mode: Literal["validation"] = ...) -> dict[str, Any]:
        """Return the adapted type's JSON Schema."""


SchemaLike = Union["Schema", Mapping[str, Any], PydanticModelLike, TypeAdapterLike, SchemaProtocol]
"""Anything accepted as a schema: a compiled `Schema`, a JSON Schema dict (draft 2020-12),
a pydantic model class or `TypeAdapter`, or an object with `validate(value)`."""

ControlsLike = Union["RunControls", Mapping[str, Any]]
"""Run controls: a `RunControls` or a dict with its field names (`dry_run`, `step_ids`,
`targets`, `continue_on_error`, `max_concurrency`)."""

ContextLike = Union["RunContext", Mapping[str, Any]]
"""Run context: a `RunContext` or a dict with its field names (`signal`, `run_id`,
`parent_run_id`, `correlation_id`, `tracing`, `hooks`, `log`, `now`, `sleep`, `cwd`)."""

Hook = Callable[[dict[str, Any]], None]
"""One hook: called with a run's trace record (a `TraceRecord`: a read-only wire-form dict)."""

HooksLike = Union[
    "PipelineHooks",
    Mapping[str, Hook],
    Sequence[Union["PipelineHooks", Mapping[str, Hook]]],
]
"""Hooks: a `PipelineHooks` object, a mapping of hook name to callable, or a list of them."""

ToolHandler = Callable[[Any, "ToolContext"], Any]
"""`run(validated_input, context)` of a tool; its value goes to the output schema."""

RemoteToolHandler = Callable[[Any, "RemoteToolContext"], Any]
"""`run(validated_input, context)` of a tool on another executor (`define_tool(executor=)`)."""

ToolDryRun = Literal["skip"] | ToolHandler | None
"""A tool's dry-run policy: `None`/`"skip"` skips it in dry runs, a callable previews it."""

InitialStateCallback = Callable[[Any], Any]
"""`initial_state(validated_options)`: the agent's first state (plain data)."""

DecideCallback = Callable[[Any, "DecisionContext"], Any]
"""`decide(state, context)` (and an agent's `dry_run`): an untrusted decision, checked."""

ReduceCallback = Callable[[Any, tuple[Mapping[str, Any], ...]], Any]
"""`reduce(state, outcomes)`: the next state from the outcomes, in decision order."""


class StepOptions(TypedDict, total=False):
    """The keyword arguments every step factory takes besides its own (all optional).

    `StepFactory.step`, `from_pipeline`, `for_each_pipeline` and `iterate_pipeline` accept
    them as `**options`; an unknown key raises `TypeError` as any unexpected keyword would.
    """

    name: str | None
    """Display label only."""
    description: str | None
    """What the step does, in words."""
    depends_on: Sequence[Step] | None
    """Required inputs: their outputs are passed in and must be available."""
    optional_depends_on: Sequence[Step] | None
    """Inputs used only when published."""
    skip_after_failure_of: Sequence[Step] | None
    """Failure gates: no data, but the step is skipped when one failed or was cancelled."""
    skip: Callable[[Mapping[str, Any], ExecutionContext], Any] | None
    """Policy predicate `skip(inputs, context)`: falsy runs; a non-blank string or
    `{"reason", "value"?}` skips."""


class ToolOptions(TypedDict, total=False):
    """How an agent runs a tool's calls: keyword arguments every tool factory takes.

    `define_tool`, `tool_from_function`, `tubeless.tool` and `pipeline_tool` accept them as
    `**options`; an unknown key raises `TypeError` as any unexpected keyword would.
    """

    replay: Literal["safe", "unsafe"]
    """`"unsafe"` (default) or `"safe"`: whether a durable agent resuming after a crash may
    run the handler again when the call was running. An unsafe call becomes the
    recoverable outcome `TUBELESS_AGENT_CALL_INTERRUPTED` instead."""
    needs_approval: bool | Callable[[Any, DecisionContext], bool]
    """`True`, or `predicate(validated_input, decision_context) -> bool` (pure: it runs
    once, while the batch is prepared): a call that needs approval waits for a person. Its
    batch dispatches nothing, the run ends `failed` with `TUBELESS_AGENT_APPROVAL_REQUIRED`
    and `run.pending_approvals` lists the waiting calls; resume with the same key and
    `context={"approvals": {call_id: tubeless.approve() | tubeless.reject(message) |
    tubeless.edit(new_input)}}`. Needs a durable agent (`define_agent(durability=...)`);
    default `False`."""
    timeout: float | None
    """Seconds (a number above 0) each attempt may take. Then the call's outcome is the
    recoverable `TUBELESS_AGENT_CALL_TIMED_OUT` ("the call may still complete"). The
    handler sees `context.deadline` and `context.time_left()`, and `context.sleep()`
    raises that `ToolError` at the deadline; a handler that ignores it keeps its permit
    until it returns, its value is discarded (its step traced with `agent.late`), and the
    run waits for it before it returns."""
    retry: Retry | None
    """A `tubeless.Retry`: run a call again when its handler raises a `ToolError` with one
    of its codes or its attempt times out (only with `replay="safe"`)."""


class FunctionToolOptions(ToolOptions, total=False):
    """The keyword arguments of `tubeless.tool(...)`: `ToolOptions` and two more."""

    description: str | None
    """What the tool does; defaults to the docstring's first paragraph."""
    executor: concurrent.futures.Executor | None
    """Run the function there instead of on the call's thread (as `define_tool`'s)."""


def check_keywords(options: Mapping[str, object], typed: Any, function: str) -> None:
    """Reject a key of `options` outside the typed dict `typed` as Python rejects a keyword.

    Raises:
        TypeError: `<function>() got an unexpected keyword argument '<key>'`.
    """
    allowed = typed.__optional_keys__ | typed.__required_keys__
    for key in options:
        if key not in allowed:
            raise TypeError(f"{function}() got an unexpected keyword argument {key!r}")

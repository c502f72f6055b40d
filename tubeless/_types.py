"""Named types for what users pass to tubeless, as httpx's `_types.py` names its own.

Public signatures use these names, and the packages re-export them: `SchemaLike` and
`SchemaProtocol` from `tubeless.schema`; `ControlsLike`, `ContextLike`, `HooksLike` and
`Hook` from `tubeless.pipeline`; the tool and agent callbacks from `tubeless.agent`. Trace
sinks and hook sets are protocols of their own (`tubeless.trace.TraceSink`,
`tubeless.pipeline.PipelineHooks`). The classes named here are imported for type checkers
only, so this module loads nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union

if TYPE_CHECKING:
    from tubeless.agent import DecisionContext, RemoteToolContext, ToolContext
    from tubeless.pipeline import PipelineHooks, RunContext, RunControls
    from tubeless.schema import Schema

__all__ = [
    "ContextLike",
    "ControlsLike",
    "DecideCallback",
    "Hook",
    "HooksLike",
    "InitialStateCallback",
    "PydanticModelLike",
    "ReduceCallback",
    "RemoteToolHandler",
    "SchemaLike",
    "SchemaProtocol",
    "ToolDryRun",
    "ToolHandler",
    "TypeAdapterLike",
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

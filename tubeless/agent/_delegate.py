"""Delegation: what a pipeline tool is, how its child joins the agent tree, how it ends.

A pipeline tool call hands its child run the calling agent's budget through a short-lived
entry keyed by (the turn run id, the call id): exactly the `parentRunId` and `itemKey` the
child's root run gets. A run started by hand inside a handler is a root run with no item
key, so it never finds an entry and stays outside the tree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tubeless._frozen import FrozenDict
from tubeless.agent._budget import Budget
from tubeless.errors import AgentError, ChildPipelineError, PipelineExecutionError, ToolError
from tubeless.pipeline import ExecutionContext, Pipeline, PipelinePlan, PipelineRun
from tubeless.pipeline.lowlevel import item_key_of
from tubeless.schema import Schema, validate_boundary

if TYPE_CHECKING:
    from tubeless.agent._journal import CallSlot, ExecutionIds

TOOL_ERRORS_CODE = "TUBELESS_TOOL_ERRORS"
TOOL_ERRORS_ENTRY_LIMIT = 32
TOOL_ERRORS_MESSAGE_LIMIT = 4096

AGENT_DEFINITIONS: set[str] = set()
"""Definition ids of every pipeline `define_agent` made (their failures are never recoverable)."""
DURABLE_AGENTS: set[str] = set()
"""Definition ids of the durable agents among them (they join a durable parent's journal)."""
APPROVAL_AGENTS: set[str] = set()
"""Definition ids of the agents whose calls (at any depth) may wait for approval."""


@dataclasses.dataclass(frozen=True, slots=True)
class PipelineToolSpec:
    """The private definition behind a handle made by `pipeline_tool`."""

    description: str
    pipeline: Pipeline
    input_schema: Schema | None
    map_options: Callable[[Any], Any] | None
    input_json_schema: FrozenDict
    replay: str
    subagent: bool
    durable: bool = False
    """Whether the child is a durable agent (it then resumes inside the parent's journal)."""
    needs_approval: Any = False
    """The tool's own `needs_approval` (a bool or a predicate)."""
    child_approvals: bool = False
    """Whether calls inside the child agent (at any depth) may wait for approval."""
    timeout: float | None = None
    """Seconds each attempt of an ordinary pipeline's run may take (`None`: no bound)."""
    retry: Any = None
    """The tool's `Retry`, or `None`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Delegation:
    """What a subagent inherits from the call that started it."""

    budget: Budget
    """The calling agent's budget; the subagent's budget hangs below it."""
    attributes: Mapping[str, object] | None
    """The call's first-attempt attributes, when the run is observed."""
    slot: CallSlot | None = None
    """The call's place in a durable parent's journal."""
    ids: ExecutionIds | None = None
    """The call's stable ids: the subagent's execution id and agent path come from them."""


_LOCK = threading.Lock()
_PENDING: dict[tuple[str, str], Delegation] = {}


@contextlib.contextmanager
def delegating(turn_run_id: str, call_id: str, delegation: Delegation) -> Iterator[None]:
    """Offer `delegation` to the child run of call `call_id` while the block runs it."""
    key = (turn_run_id, call_id)
    with _LOCK:
        _PENDING[key] = delegation
    try:
        yield
    finally:
        with _LOCK:
            _PENDING.pop(key, None)


def delegation_of(context: ExecutionContext) -> Delegation | None:
    """The delegation offered to the run behind `context`, if a pipeline tool started it."""
    parent, item_key = context.parent_run_id, item_key_of(context)
    if parent is None or item_key is None:
        return None
    with _LOCK:
        return _PENDING.get((parent, item_key))


def is_subagent(pipeline: Pipeline) -> bool:
    """Whether `pipeline` was made by `define_agent`."""
    return pipeline.definition.identity.definition_id in AGENT_DEFINITIONS


def prepare_child_options(spec: PipelineToolSpec, name: str, raw: Any) -> Any:
    """Validate the arguments, map them, and validate the child's options: each once.

    Raises:
        SchemaValidationError: when the arguments or the mapped options do not match.
    """
    arguments = raw
    if spec.input_schema is not None:
        arguments = validate_boundary(spec.input_schema, raw, f"Agent tool {name} input")
    options = spec.map_options(arguments) if spec.map_options is not None else arguments
    child = spec.pipeline
    if child.options_schema is None:
        return options
    return validate_boundary(
        child.options_schema, options, f"Agent tool {name} pipeline {child.id} options"
    )


def check_child_plan(name: str, plan: PipelinePlan) -> None:
    """Reject a child whose plan is not ok, before any call of the batch starts."""
    if not plan.ok:
        first = plan.errors[0].message if plan.errors else "invalid plan"
        raise AgentError(
            f"Agent tool {name} has an invalid plan: {first[:200]}",
            code="TUBELESS_AGENT_INVALID_DECISION",
        )


def tool_errors(run: PipelineRun) -> list[ToolError] | None:
    """Every handler `ToolError` behind a failed run, or `None` if anything else failed.

    Nested child runs (from `from_pipeline`, `iterate_pipeline` and fan-out steps) are
    searched too. A run of an agent is never recoverable: its handlers' `ToolError`s are already
    outcomes inside it, so its failure is a limit, a validation, a `decide`/`reduce`
    error or cancellation.
    """
    if run.status != "failed" or not run.errors or is_agent_run(run):
        return None
    found: list[ToolError] = []
    for error, exception in zip(run.errors, run.exceptions, strict=True):
        if error.code == "TUBELESS_STEP_FAILED" and isinstance(exception, ToolError):
            found.append(exception)
            continue
        nested = _child_tool_errors(exception) if error.code == "TUBELESS_CHILD_FAILED" else None
        if nested is None:
            return None
        found.extend(nested)
    return found


def _child_tool_errors(exception: BaseException | None) -> list[ToolError] | None:
    """The `ToolError`s behind a failed child step: one child run, or a fan-out's items."""
    if isinstance(exception, PipelineExecutionError):
        return tool_errors(exception.result)
    if not isinstance(exception, ChildPipelineError) or not exception.item_errors:
        return None
    found: list[ToolError] = []
    for item in exception.item_errors:
        nested = _child_tool_errors(item)
        if nested is None:
            return None
        found.extend(nested)
    return found


def is_agent_run(run: PipelineRun) -> bool:
    """Whether `run` is a run of an agent's own pipeline."""
    identity = run.definition_identity
    return identity is not None and identity.definition_id in AGENT_DEFINITIONS


def failure_outcome(errors: list[ToolError]) -> FrozenDict:
    """The `{code, message}` of a child whose only failures are these `ToolError`s."""
    if len(errors) == 1:
        return FrozenDict(code=errors[0].code, message=errors[0].message)
    entries = [f"{error.code}: {error.message}" for error in errors[:TOOL_ERRORS_ENTRY_LIMIT]]
    message = "; ".join(entries)[:TOOL_ERRORS_MESSAGE_LIMIT]
    return FrozenDict(code=TOOL_ERRORS_CODE, message=message)

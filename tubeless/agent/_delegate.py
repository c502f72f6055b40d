"""Delegation: what a pipeline tool is, how its child joins the agent tree, how it ends.

A subagent call hands its child run the calling agent's budget as a run extension
(`DELEGATION`) of that child run alone. A run started by hand inside a handler is a root
run without it, so it stays outside the tree. What a pipeline made by `define_agent` is
(durable, with calls that may wait for approval) is carried by its agent step
(`AgentFacts`), never by a process-wide registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tubeless._frozen import FrozenDict
from tubeless.agent._budget import Budget
from tubeless.errors import AgentError, ChildPipelineError, PipelineExecutionError, ToolError
from tubeless.pipeline import Pipeline, PipelinePlan, PipelineRun
from tubeless.pipeline.lowlevel import RunExtension
from tubeless.schema import Schema, validate_boundary

if TYPE_CHECKING:
    from tubeless.agent._journal import CallSlot, ExecutionIds

TOOL_ERRORS_CODE = "TUBELESS_TOOL_ERRORS"
TOOL_ERRORS_ENTRY_LIMIT = 32
TOOL_ERRORS_MESSAGE_LIMIT = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class AgentFacts:
    """What a pipeline made by `define_agent` is; its agent step carries them."""

    definition_id: str
    """The agent pipeline's definition id."""
    durable: bool
    """Whether it is durable (it then joins a durable parent's journal)."""
    approvals: bool
    """Whether its calls (at any depth) may wait for approval."""


def agent_facts(pipeline: Pipeline) -> AgentFacts | None:
    """The facts of `pipeline` when `define_agent` made it, else `None`."""
    steps = pipeline.execution_order
    if len(steps) != 1:
        return None
    facts = getattr(steps[0].run, "agent_facts", None)
    return facts if isinstance(facts, AgentFacts) else None


def agent_definitions(pipeline: Pipeline) -> frozenset[str]:
    """Definition ids of the agents a run of `pipeline` may be or start as a nested child
    (`pipeline` itself, or a pipeline nested in its steps, not looking inside agents)."""
    found: set[str] = set()
    seen: set[int] = set()
    stack = [pipeline]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        facts = agent_facts(current)
        if facts is not None:
            found.add(facts.definition_id)
            continue
        stack.extend(s.nested.pipeline for s in current.execution_order if s.nested is not None)
    return frozenset(found)


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
    agents: frozenset[str] = frozenset()
    """Definition ids of the agents among the child's runs (their failures are never a
    tool's own `ToolError`)."""


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


DELEGATION: RunExtension[Delegation] = RunExtension("delegation")
"""The delegation a subagent call hands its child run (that run alone: never inherited)."""


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


def tool_errors(run: PipelineRun, agents: frozenset[str]) -> list[ToolError] | None:
    """Every handler `ToolError` behind a failed run, or `None` if anything else failed.

    Nested child runs (from `from_pipeline`, `iterate_pipeline` and fan-out steps) are
    searched too. A run of an agent (`agents`: their definition ids) is never recoverable:
    its handlers' `ToolError`s are already outcomes inside it, so its failure is a limit,
    a validation, a `decide`/`reduce` error or cancellation.
    """
    identity = run.definition_identity
    if run.status != "failed" or not run.errors:
        return None
    if identity is not None and identity.definition_id in agents:
        return None
    found: list[ToolError] = []
    for error, exception in zip(run.errors, run.exceptions, strict=True):
        if error.code == "TUBELESS_STEP_FAILED" and isinstance(exception, ToolError):
            found.append(exception)
            continue
        child = error.code == "TUBELESS_CHILD_FAILED"
        nested = _child_tool_errors(exception, agents) if child else None
        if nested is None:
            return None
        found.extend(nested)
    return found


def _child_tool_errors(
    exception: BaseException | None, agents: frozenset[str]
) -> list[ToolError] | None:
    """The `ToolError`s behind a failed child step: one child run, or a fan-out's items."""
    if isinstance(exception, PipelineExecutionError):
        return tool_errors(exception.result, agents)
    if not isinstance(exception, ChildPipelineError) or not exception.item_errors:
        return None
    found: list[ToolError] = []
    for item in exception.item_errors:
        nested = _child_tool_errors(item, agents)
        if nested is None:
            return None
        found.extend(nested)
    return found


def failure_outcome(errors: list[ToolError]) -> FrozenDict:
    """The `{code, message}` of a child whose only failures are these `ToolError`s."""
    if len(errors) == 1:
        return FrozenDict(code=errors[0].code, message=errors[0].message)
    entries = [f"{error.code}: {error.message}" for error in errors[:TOOL_ERRORS_ENTRY_LIMIT]]
    message = "; ".join(entries)[:TOOL_ERRORS_MESSAGE_LIMIT]
    return FrozenDict(code=TOOL_ERRORS_CODE, message=message)

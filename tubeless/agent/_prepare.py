"""Checking a decision's calls and result before anything of it is admitted.

Names and plain data are checked for every call first, then each input is validated in
decision order (each validator once per call) and its tool planned. Without repairs the
first problem raises, as always; with them every call is checked and the problems raise
together as `DecisionRejected`, for `decide` to fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tubeless._frozen import slot_init
from tubeless._quote import quote
from tubeless.agent._budget import Budget
from tubeless.agent._decisions import AgentCall, ContinueDecision
from tubeless.agent._delegate import PipelineToolSpec, check_child_plan, prepare_child_options
from tubeless.agent._repairs import (
    ARGUMENTS_CODE,
    DECISION_CODE,
    RESULT_CODE,
    DecisionRejected,
    Problem,
    refused_input,
    schema_issues,
)
from tubeless.agent._state import plain_data_problem
from tubeless.errors import AgentError, SchemaValidationError
from tubeless.pipeline import Pipeline, PipelinePlan, RunControls, StepContext
from tubeless.pipeline.lowlevel import raise_if_cancelled
from tubeless.schema import Schema, validate_boundary

if TYPE_CHECKING:
    from tubeless.agent._tools import _ToolSpec

_DRY = RunControls(dry_run=True)
_WET = RunControls()


@slot_init
@dataclasses.dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call whose tool is resolved and whose input is validated (transformed once)."""

    id: str
    tool: str
    input: Any
    """The validated input; for a pipeline tool, the child's validated options."""
    plan: PipelinePlan
    """The plan of the pipeline the call runs."""
    child_plan: PipelinePlan | None = None
    """For an ordinary pipeline tool, the plan of the child below `<id>/tool/<name>`."""


def prepare_result(schema: Schema, raw: Any, repairs: bool) -> Any:
    """The validated finish result.

    Raises:
        DecisionRejected: with `repairs`, for a result the model can fix.
        AgentError: `TUBELESS_AGENT_INVALID_RESULT` otherwise (the schema's refusal its
            cause).
    """
    problem = plain_data_problem(raw)
    if problem is not None:
        error = AgentError(
            f"Agent finish result must be plain JSON data: {problem}", code=RESULT_CODE
        )
        if not repairs:
            raise error
        raise DecisionRejected(error, [Problem(error, "/result")])
    try:
        return validate_boundary(schema, raw, "Agent finish result")
    except SchemaValidationError as refusal:
        error = refused_input(refusal, RESULT_CODE)
    if not repairs or not schema_issues(error):
        raise error  # a schema that raised is the application's doing, not the model's
    raise DecisionRejected(error, [Problem(error, "/result", None, schema_issues(error))])


class BatchPreparer:
    """Resolve, check and validate the calls of one decision."""

    def __init__(
        self,
        tools: Mapping[str, _ToolSpec | PipelineToolSpec],
        pipelines: Mapping[str, Pipeline],
        context: StepContext,
        repairs: bool,
    ) -> None:
        self._tools = tools
        self._pipelines = pipelines
        self._signal = context.signal
        self._repairs = repairs
        self._problems: list[Problem] = []
        self._plans: dict[str, PipelinePlan] = {}  # a tool's plan, made once per batch
        self._controls = _DRY if context.dry_run else _WET

    def prepare(self, decision: ContinueDecision, budget: Budget) -> tuple[PreparedCall, ...]:
        """The prepared calls, in decision order.

        Raises:
            DecisionRejected: with repairs, every problem the model can fix.
            AgentError: without them, the first such problem.
            AgentLimitError: `max_depth` for a delegation too deep (never repaired).
        """
        tools = self._tools
        delegates = False
        for position, call in enumerate(decision.calls):
            spec = tools.get(call.tool)
            if spec is None:
                unknown = AgentError(f"Unknown agent tool: {quote(call.tool)}", code=DECISION_CODE)
                self._refuse(unknown, f"/calls/{position}/tool", call)
                continue
            delegates = delegates or isinstance(spec, PipelineToolSpec)
            problem = plain_data_problem(call.input)
            if problem is not None:
                label = f"Agent call {quote(call.id)} input"
                plain = AgentError(
                    f"{label} must be plain JSON data: {problem}", code=ARGUMENTS_CODE
                )
                self._refuse(plain, f"/calls/{position}/input", call)
        if delegates and not self._problems:
            budget.check_delegation()
        prepared = self._prepare_calls(decision, {id(problem.call) for problem in self._problems})
        if self._problems:
            raise DecisionRejected(self._problems[0].error, self._problems)
        return prepared

    def _prepare_calls(
        self, decision: ContinueDecision, refused: set[int]
    ) -> tuple[PreparedCall, ...]:
        """Validate each call not `refused` yet, in order, refusing those whose input fails."""
        prepared = []
        checked = False  # whether the call before just checked the signal, after validating
        for position, call in enumerate(decision.calls):
            if refused and id(call) in refused:
                continue
            if not checked:
                raise_if_cancelled(self._signal)
            checked = False
            try:
                prepared.append(self._prepare_call(call))
                checked = True
            except SchemaValidationError as refusal:
                error = refused_input(refusal, ARGUMENTS_CODE)
                if not schema_issues(error):
                    raise error from refusal  # a schema that raised: not the model's doing
                self._refuse(error, f"/calls/{position}/input", call)
        return tuple(prepared)

    def _refuse(self, error: AgentError, path: str, call: AgentCall) -> None:
        if not self._repairs:
            raise error
        self._problems.append(Problem(error, path, call, schema_issues(error)))

    def _plan(self, name: str) -> PipelinePlan:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = self._pipelines[name].plan(self._controls)
        return plan

    def _prepare_call(self, call: AgentCall) -> PreparedCall:
        spec = self._tools[call.tool]
        if isinstance(spec, PipelineToolSpec):
            return self._prepare_delegation(call, spec)
        value = validate_boundary(spec.input_schema, call.input, f"Agent tool {call.tool} input")
        raise_if_cancelled(self._signal)
        plan = self._plan(call.tool)
        if not plan.ok:
            raise AgentError(
                f"Agent tool {call.tool} has an invalid plan",
                code="TUBELESS_AGENT_INVALID_DECISION",
            )
        return PreparedCall(call.id, call.tool, value, plan)

    def _prepare_delegation(self, call: AgentCall, spec: PipelineToolSpec) -> PreparedCall:
        options = prepare_child_options(spec, call.tool, call.input)
        raise_if_cancelled(self._signal)
        child_plan = spec.pipeline.plan(self._controls)
        check_child_plan(call.tool, child_plan)
        if spec.subagent:
            return PreparedCall(call.id, call.tool, options, child_plan)
        plan = self._pipelines[call.tool].plan(self._controls)
        check_child_plan(call.tool, plan)
        return PreparedCall(call.id, call.tool, options, plan, child_plan)

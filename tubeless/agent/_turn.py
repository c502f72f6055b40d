"""One agent turn: the `decide -> calls -> reduce` steps of `<id>/turn`."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from tubeless._frozen import FrozenDict, thaw
from tubeless._quote import quote
from tubeless.agent._agent_contexts import DecisionContext
from tubeless.agent._approvals import (
    INVALID_EDIT_CODE,
    MISSING_CODE,
    needs_approval,
    rejected_outcome,
    waiting,
)
from tubeless.agent._budget import Budget
from tubeless.agent._cassette import Tape
from tubeless.agent._decisions import (
    AgentCall,
    ContinueDecision,
    FinishDecision,
    parse_decision,
)
from tubeless.agent._delegate import PipelineToolSpec, check_child_plan, prepare_child_options
from tubeless.agent._journal import AgentJournal, Durability
from tubeless.agent._limits import AgentLimits
from tubeless.agent._state import own_state, plain_data_problem
from tubeless.agent._tools import _ToolSpec
from tubeless.agent._usage_ledger import UsageLedger
from tubeless.errors import AgentError, AgentLimitError, ApprovalRequiredError
from tubeless.pipeline import Pipeline, PipelinePlan, RunControls, StepContext
from tubeless.pipeline.lowlevel import LazyPool, observed, raise_if_cancelled
from tubeless.schema import Schema, validate_boundary

_DRY = RunControls(dry_run=True)
_WET = RunControls()


@dataclasses.dataclass(frozen=True, slots=True)
class AgentRuntime:
    """Everything an invocation needs from the definition (immutable, shared)."""

    agent_id: str
    limits: AgentLimits
    tools: Mapping[str, _ToolSpec | PipelineToolSpec]
    tool_pipelines: Mapping[str, Pipeline]
    capabilities: tuple[FrozenDict, ...]
    result_schema: Schema
    result_json_schema: FrozenDict
    initial_state: Callable[[Any], Any]
    decide: Callable[[Any, DecisionContext], Any]
    reduce: Callable[[Any, tuple[FrozenDict, ...]], Any] | None
    dry_run: Callable[[Any, DecisionContext], Any] | None
    durability: Durability | None = None
    replay_pipeline: Pipeline | None = None
    """Records a reused, replayed or interrupted call in traces (run only when observed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Execution:
    """Per-invocation counters carried from turn to turn."""

    state: Any
    turn: int
    state_version: int
    calls: int

    def to_dict(self) -> dict[str, Any]:
        """The journal form `{state, turn, stateVersion, calls}`."""
        return {
            "state": self.state,
            "turn": self.turn,
            "stateVersion": self.state_version,
            "calls": self.calls,
        }


class Invocation:
    """Resources of one agent invocation: its budget and the tool pool of every batch."""

    __slots__ = (
        "_lock",
        "_pool",
        "_thread_pool",
        "agent_path",
        "agent_run_id",
        "budget",
        "execution_id",
        "journal",
        "options",
        "tape",
    )

    def __init__(
        self,
        agent_run_id: str,
        options: Any,
        budget: Budget,
        *,
        journal: AgentJournal | None = None,
        execution_id: str,
        agent_path: str,
        tape: Tape | None = None,
        thread_pool: concurrent.futures.ThreadPoolExecutor | None = None,
    ) -> None:
        self.agent_run_id = agent_run_id
        self.options = options
        self.budget = budget
        self.journal = journal
        """The agent's node in the durable journal (`None` when not durable)."""
        self.execution_id = execution_id
        self.agent_path = agent_path
        self.tape = tape
        """The agent's view of the run's cassette (`None` without one, or in a dry run)."""
        self._pool: LazyPool | None = None
        self._thread_pool = thread_pool
        """The application's thread pool given in the run's context, or `None`."""
        self._lock = threading.Lock()

    def pool(self, workers: int) -> LazyPool:
        """The invocation's pool for its batches: the one on the application's thread pool
        when the run borrows one, else the invocation's own, made on first use."""
        with self._lock:
            if self._pool is None:
                if self._thread_pool is not None:  # `close()` leaves such a pool alone
                    self._pool = LazyPool.on(self._thread_pool)
                else:
                    self._pool = LazyPool(workers, name="tubeless-tool")
            return self._pool

    def close(self) -> None:
        """Shut the pool down, waiting for its threads."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


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


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedFinish:
    """A validated finish: the transformed result."""

    result: Any


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedBatch:
    """An admitted batch of prepared calls."""

    calls: tuple[PreparedCall, ...]


def turn_options(options: Mapping[str, Any]) -> tuple[Execution, Invocation]:
    """Unpack a turn run's options."""
    return options["execution"], options["invocation"]


class DecideStep:
    """Step `decide`: ask for a decision, check it, and prepare the batch."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        runtime = self._runtime
        execution, invocation = turn_options(context.options)
        signal = context.signal
        raise_if_cancelled(signal)
        journal = invocation.journal
        saved = journal.saved_turn(execution.turn) if journal is not None else None
        if saved is not None and saved["phase"] == "decided":
            # Decided before the restart: the saved batch, admitted and prepared once.
            assert journal is not None
            prepared = self._restore(saved)
            return PreparedBatch(self._approved(saved, prepared, invocation, journal, context))
        if saved is None:
            invocation.budget.admit_decision()
            if journal is not None:
                journal.reserve(execution.turn, execution.to_dict())
        callback = runtime.dry_run if context.dry_run and runtime.dry_run else runtime.decide
        ledger = UsageLedger(invocation.budget, journal)
        view = DecisionContext(
            context,
            options=invocation.options,
            turn=execution.turn,
            state_version=execution.state_version,
            capabilities=runtime.capabilities,
            result_json_schema=runtime.result_json_schema,
            ledger=ledger,
        )
        decision = self._ask(callback, execution, view, ledger, invocation, context)
        batch = decision.calls if isinstance(decision, ContinueDecision) else ()
        if observed(context):
            attributes = {
                "agent.runId": invocation.agent_run_id,
                "agent.turn": execution.turn,
                "agent.stateVersion": execution.state_version,
                "agent.callsAdmitted": execution.calls,
                "agent.decision": "continue" if batch else "finish",
                "agent.callCount": len(batch),
            }
            if ledger.used:
                attributes.update(ledger.attributes())
            context.report_attempt(1, attributes)
        if not isinstance(decision, ContinueDecision):
            _require_plain(decision.result, "Agent finish result")
            result = validate_boundary(
                runtime.result_schema, decision.result, "Agent finish result"
            )
            raise_if_cancelled(signal)
            _record(invocation, execution.turn, {"kind": "finish", "result": decision.result})
            if journal is not None:
                journal.finished(result)
            return PreparedFinish(result)
        self._admit(execution, invocation, len(batch))
        prepared = self._prepare(decision, context, invocation.budget)
        calls = [{"id": c.id, "tool": c.tool, "input": c.input} for c in decision.calls]
        _record(invocation, execution.turn, {"kind": "continue", "calls": calls})
        if journal is not None:
            waits = self._waiting(prepared, view, invocation.agent_run_id)
            # The calls step starts this many at once (see `run_lazily`); none when a call
            # of the batch waits for approval.
            starting = 0 if waits else min(self._runtime.limits.max_concurrency, len(prepared))
            journal.decided(
                [{"id": c.id, "tool": c.tool, "input": c.input} for c in prepared],
                starting,
                waits,
            )
            if waits:
                raise ApprovalRequiredError(journal.pending_approvals())
        return PreparedBatch(prepared)

    def _ask(
        self,
        callback: Callable[[Any, DecisionContext], Any],
        execution: Execution,
        view: DecisionContext,
        ledger: UsageLedger,
        invocation: Invocation,
        context: StepContext,
    ) -> ContinueDecision | FinishDecision:
        """Run the callback and parse its decision; a settlement over a limit fails it.

        A decision that fails after usage was charged still records that usage on the
        attempt, so traces and `history` count what was spent.
        """
        signal = view.signal
        try:
            raw = _raw_decision(callback, execution, invocation, view)
            breach = ledger.close()
            if breach is not None:
                raise breach
            decision = parse_decision(raw)
            raise_if_cancelled(signal)
            return decision
        except BaseException:
            ledger.close()
            if ledger.used and observed(context):
                context.report_attempt(
                    1,
                    {
                        "agent.runId": invocation.agent_run_id,
                        "agent.turn": execution.turn,
                        **ledger.attributes(),
                    },
                )
            raise

    def _waiting(
        self, prepared: tuple[PreparedCall, ...], view: DecisionContext, run_id: str
    ) -> dict[int, str]:
        """The calls of a batch that need approval (index -> the agent's run id)."""
        tools = self._runtime.tools
        return {
            index: run_id
            for index, call in enumerate(prepared)
            if needs_approval(tools[call.tool].needs_approval, call.tool, call.input, view)
        }

    def _approved(
        self,
        saved: Mapping[str, Any],
        prepared: tuple[PreparedCall, ...],
        invocation: Invocation,
        journal: AgentJournal,
        context: StepContext,
    ) -> tuple[PreparedCall, ...]:
        """Apply the run's approval decisions to a saved batch whose calls wait for them.

        Every decision is checked (an edit validated) before one write records them all;
        without decisions the batch still waits and nothing starts.
        """
        entries = saved["calls"]
        indices = [index for index, entry in enumerate(entries) if waiting(entry)]
        if not indices:
            return prepared
        decisions = journal.journal.approvals
        if not decisions:
            journal.still_waiting(invocation.agent_run_id)
            raise ApprovalRequiredError(journal.pending_approvals())
        calls = list(prepared)
        chosen: dict[int, tuple[str, Any, Any]] = {}
        for index in indices:
            entry = entries[index]
            decision = decisions.get(entry["id"])
            if decision is None:
                raise AgentError(
                    f"No decision for waiting call {quote(entry['id'])}", code=MISSING_CODE
                )
            if decision.kind == "reject":
                assert decision.message is not None
                chosen[index] = ("reject", None, rejected_outcome(entry, decision.message))
            elif decision.kind == "edit":
                value = self._edited(calls[index], decision.input, context)
                calls[index] = dataclasses.replace(calls[index], input=value)
                chosen[index] = ("edit", value, None)
            else:
                chosen[index] = ("approve", None, None)
        raise_if_cancelled(context.signal)
        journal.decide_approvals(chosen)
        return tuple(calls)

    def _edited(self, call: PreparedCall, new_input: Any, context: StepContext) -> Any:
        """Validate an edited input like any argument of the call's tool."""
        spec = self._runtime.tools[call.tool]
        label = f"Edited input of call {quote(call.id)} ({call.tool})"
        try:
            _require_plain(new_input, label)
            if isinstance(spec, PipelineToolSpec):
                return prepare_child_options(spec, call.tool, new_input)
            return validate_boundary(spec.input_schema, new_input, f"Agent tool {call.tool} input")
        except Exception as error:
            raise AgentError(
                f"{label} was rejected, nothing was dispatched: {str(error)[:2000]}",
                code=INVALID_EDIT_CODE,
            ) from error

    def _restore(self, saved: Mapping[str, Any]) -> tuple[PreparedCall, ...]:
        """The prepared calls of a saved batch: saved inputs, plans made again (pure)."""
        runtime = self._runtime
        prepared = []
        for entry in saved["calls"]:
            spec = runtime.tools[entry["tool"]]
            pipe = runtime.tool_pipelines[entry["tool"]]
            if isinstance(spec, PipelineToolSpec):
                child_plan = spec.pipeline.plan(_WET)
                plan = child_plan if spec.subagent else pipe.plan(_WET)
                child = None if spec.subagent else child_plan
                prepared.append(
                    PreparedCall(entry["id"], entry["tool"], thaw(entry["input"]), plan, child)
                )
            else:
                prepared.append(
                    PreparedCall(entry["id"], entry["tool"], thaw(entry["input"]), pipe.plan(_WET))
                )
        return tuple(prepared)

    def _admit(self, execution: Execution, invocation: Invocation, size: int) -> None:
        limits = self._runtime.limits
        if execution.turn >= limits.max_turns:
            raise AgentLimitError(
                "max_turns",
                bound=limits.max_turns,
                consumed=execution.turn,
                requested=1,
                scope=invocation.agent_run_id,
            )
        invocation.budget.admit_calls(size)

    def _prepare(
        self, decision: ContinueDecision, context: StepContext, budget: Budget
    ) -> tuple[PreparedCall, ...]:
        runtime = self._runtime
        tools = runtime.tools
        delegates = False
        for call in decision.calls:
            spec = tools.get(call.tool)
            if spec is None:
                raise AgentError(
                    f"Unknown agent tool: {quote(call.tool)}",
                    code="TUBELESS_AGENT_INVALID_DECISION",
                )
            delegates = delegates or isinstance(spec, PipelineToolSpec)
            problem = plain_data_problem(call.input)
            if problem is not None:
                _refuse_plain(problem, f"Agent call {quote(call.id)} input")
        if delegates:
            budget.check_delegation()
        prepared = []
        controls = _DRY if context.dry_run else _WET
        plans: dict[str, PipelinePlan] = {}  # a tool's plan, made once per batch
        signal = context.signal
        for call in decision.calls:
            raise_if_cancelled(signal)
            spec = tools[call.tool]
            if isinstance(spec, PipelineToolSpec):
                prepared.append(self._prepare_delegation(call, spec, context))
                continue
            value = validate_boundary(
                spec.input_schema, call.input, f"Agent tool {call.tool} input"
            )
            raise_if_cancelled(signal)
            plan = plans.get(call.tool)
            if plan is None:
                plan = plans[call.tool] = runtime.tool_pipelines[call.tool].plan(controls)
            if not plan.ok:
                raise AgentError(
                    f"Agent tool {call.tool} has an invalid plan",
                    code="TUBELESS_AGENT_INVALID_DECISION",
                )
            prepared.append(PreparedCall(call.id, call.tool, value, plan))
        return tuple(prepared)

    def _prepare_delegation(
        self, call: AgentCall, spec: PipelineToolSpec, context: StepContext
    ) -> PreparedCall:
        options = prepare_child_options(spec, call.tool, call.input)
        raise_if_cancelled(context.signal)
        controls = _DRY if context.dry_run else _WET
        child_plan = spec.pipeline.plan(controls)
        check_child_plan(call.tool, child_plan)
        if spec.subagent:
            return PreparedCall(call.id, call.tool, options, child_plan)
        plan = self._runtime.tool_pipelines[call.tool].plan(controls)
        check_child_plan(call.tool, plan)
        return PreparedCall(call.id, call.tool, options, plan, child_plan)


def _raw_decision(
    callback: Callable[[Any, DecisionContext], Any],
    execution: Execution,
    invocation: Invocation,
    view: DecisionContext,
) -> Any:
    """The turn's raw decision: from the cassette when replaying, else from `callback`."""
    tape = invocation.tape
    if tape is not None and tape.replaying:
        return tape.decision(execution.turn)
    signal = view.signal
    with invocation.budget.permit(signal):
        raise_if_cancelled(signal)
        return callback(execution.state, view)


def _record(invocation: Invocation, turn: int, decision: Mapping[str, Any]) -> None:
    """Keep a validated decision on the cassette, when one records the run."""
    if invocation.tape is not None:
        invocation.tape.record_decision(turn, decision)


def _require_plain(value: Any, label: str) -> None:
    """Refuse model data that is not plain JSON data, before any schema sees it."""
    problem = plain_data_problem(value)
    if problem is not None:
        _refuse_plain(problem, label)


def _refuse_plain(problem: str, label: str) -> NoReturn:
    raise AgentError(
        f"{label} must be plain JSON data: {problem}", code="TUBELESS_AGENT_INVALID_DECISION"
    )


class ReduceStep:
    """Step `reduce`: commit the next state once per successful batch, or finish."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        decision = inputs["decide"]
        if isinstance(decision, PreparedFinish):
            return {"kind": "finish", "result": decision.result}
        execution, invocation = turn_options(context.options)
        outcomes: tuple[FrozenDict, ...] = inputs["calls"]
        raise_if_cancelled(context.signal)
        state = execution.state
        if self._runtime.reduce is not None:
            state = own_state(self._runtime.reduce(state, outcomes))
        raise_if_cancelled(context.signal)
        admitted = execution.calls + len(outcomes)
        if observed(context):
            context.report_attempt(
                1,
                {
                    "agent.runId": invocation.agent_run_id,
                    "agent.turn": execution.turn,
                    "agent.stateVersion": execution.state_version + 1,
                    "agent.callsAdmitted": admitted,
                },
            )
        following = Execution(state, execution.turn + 1, execution.state_version + 1, admitted)
        if invocation.journal is not None:
            invocation.journal.commit_state(following.to_dict())
        return {"kind": "next", "state": following}

"""One agent turn: the `decide -> calls -> reduce` steps of `<id>/turn`."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from tubeless._frozen import FrozenDict, freeze_json, thaw
from tubeless._quote import quote
from tubeless.agent._agent_contexts import DecisionContext
from tubeless.agent._approvals import (
    INVALID_EDIT_CODE,
    MISSING_CODE,
    needs_approval,
    rejected_outcome,
)
from tubeless.agent._budget import Budget
from tubeless.agent._cassette import Tape
from tubeless.agent._deadline import AttemptThreads
from tubeless.agent._decisions import ContinueDecision, parse_decision
from tubeless.agent._delegate import PipelineToolSpec, prepare_child_options
from tubeless.agent._durability import Durability
from tubeless.agent._journal import AgentJournal
from tubeless.agent._journal_document import ApprovalChoice, SavedTurn
from tubeless.agent._limits import AgentLimits
from tubeless.agent._prepare import BatchPreparer, PreparedCall, prepare_result
from tubeless.agent._repairs import (
    DecisionRejected,
    charge_repair,
    rejection_attributes,
    rejection_of,
    shape_rejection,
)
from tubeless.agent._state import own_state, plain_data_problem
from tubeless.agent._tools import _ToolSpec
from tubeless.agent._usage_ledger import UsageLedger
from tubeless.errors import AgentError, AgentLimitError, ApprovalRequiredError
from tubeless.pipeline import Pipeline, RunControls, StepContext
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
        "_threads",
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
        self._threads: AttemptThreads | None = None
        self._thread_pool = thread_pool
        """The application's thread pool given in the run's context, or `None`."""
        self._lock = threading.Lock()

    def pool(self, workers: int) -> LazyPool:
        """The invocation's pool for its batches: the one on the application's thread pool
        when the run borrows one, else the invocation's own, made on first use."""
        pool = self._pool
        if pool is not None:  # set once, read per batch: no lock needed to see it
            return pool
        with self._lock:
            if self._pool is None:
                if self._thread_pool is not None:  # `close()` leaves such a pool alone
                    self._pool = LazyPool.on(self._thread_pool)
                else:
                    self._pool = LazyPool(workers, name="tubeless-tool")
            return self._pool

    def attempt_threads(self) -> AttemptThreads:
        """The threads that run calls with a deadline, made on first use."""
        threads = self._threads
        if threads is not None:  # set once, read per call: no lock needed to see it
            return threads
        with self._lock:
            if self._threads is None:
                self._threads = AttemptThreads()
            return self._threads

    def close(self) -> None:
        """Shut the pools down, waiting for their threads (late handlers included)."""
        with self._lock:
            pool, self._pool = self._pool, None
            threads, self._threads = self._threads, None
        if pool is not None:
            pool.close()
        if threads is not None:
            threads.close()


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
        invocation.budget.check_time()
        journal = invocation.journal
        saved = journal.saved_turn(execution.turn) if journal is not None else None
        if saved is not None and saved.phase == "decided":
            # Decided before the restart: the saved batch, admitted and prepared once.
            assert journal is not None
            prepared = self._restore(saved)
            return PreparedBatch(self._approved(saved, prepared, invocation, journal, context))
        if saved is None:
            invocation.budget.admit_decision()
            if journal is not None:
                journal.reserve(execution.turn, execution.to_dict())
        callback = runtime.dry_run if context.dry_run and runtime.dry_run else runtime.decide
        # A resume after a repair sends the saved rejection again, charging nothing more.
        rejection = freeze_json(saved.rejection) if saved and saved.rejection is not None else None
        while True:
            if rejection is not None:
                invocation.budget.check_time()
            ledger = UsageLedger(invocation.budget, journal)
            view = DecisionContext(
                context,
                options=invocation.options,
                turn=execution.turn,
                state_version=execution.state_version,
                capabilities=runtime.capabilities,
                result_json_schema=runtime.result_json_schema,
                ledger=ledger,
                rejection=rejection,
            )
            attempt = 1 if rejection is None else rejection["attempt"] + 1
            raw = self._ask(callback, execution, view, ledger, attempt, context)
            try:
                return self._accept(raw, view, ledger, attempt, context)
            except DecisionRejected as rejected:
                rejection = self._repair(rejected, ledger, attempt, context)

    def _accept(
        self,
        raw: Any,
        view: DecisionContext,
        ledger: UsageLedger,
        attempt: int,
        context: StepContext,
    ) -> PreparedBatch | PreparedFinish:
        """Check a decision and prepare it; a repairable problem raises `DecisionRejected`."""
        runtime = self._runtime
        execution, invocation = turn_options(context.options)
        signal = context.signal
        journal = invocation.journal
        repairs = runtime.limits.max_repairs > 0
        try:
            decision = parse_decision(raw)
        except AgentError as error:
            if not repairs:
                _report_spent(ledger, attempt, context)
                raise
            raise shape_rejection(raw, error) from None
        raise_if_cancelled(signal)
        batch = decision.calls if isinstance(decision, ContinueDecision) else ()
        if observed(context):
            attributes: dict[str, object] = {
                "agent.runId": invocation.agent_run_id,
                "agent.turn": execution.turn,
                "agent.stateVersion": execution.state_version,
                "agent.callsAdmitted": execution.calls,
                "agent.decision": "continue" if batch else "finish",
                "agent.callCount": len(batch),
            }
            if ledger.used:
                attributes.update(ledger.attributes())
            if attempt > 1:
                attributes["agent.repair"] = attempt - 1
            context.report_attempt(attempt, attributes)
        if not isinstance(decision, ContinueDecision):
            result = prepare_result(runtime.result_schema, decision.result, repairs)
            raise_if_cancelled(signal)
            _record(invocation, execution.turn, {"kind": "finish", "result": decision.result})
            if journal is not None:
                journal.finished(result)
            return PreparedFinish(result)
        self._check_room(execution, invocation, len(batch))
        preparer = BatchPreparer(runtime.tools, runtime.tool_pipelines, context, repairs)
        prepared = preparer.prepare(decision, invocation.budget)
        invocation.budget.admit_calls(len(batch))
        _record_batch(invocation, execution.turn, decision)
        if journal is not None:
            waits = self._waiting(prepared, view, invocation.agent_run_id)
            # The calls step starts this many at once (see `run_lazily`); none when a call
            # of the batch waits for approval.
            starting = 0 if waits else min(self._runtime.limits.max_concurrency, len(prepared))
            journal.decided(prepared, starting, waits)
            if waits:
                raise ApprovalRequiredError(journal.pending_approvals())
        return PreparedBatch(prepared)

    def _ask(
        self,
        callback: Callable[[Any, DecisionContext], Any],
        execution: Execution,
        view: DecisionContext,
        ledger: UsageLedger,
        attempt: int,
        context: StepContext,
    ) -> Any:
        """Ask for a raw decision; a settlement over a usage limit fails it.

        A decision that fails after usage was charged still records that usage on the
        attempt, so traces and `history` count what was spent.
        """
        _, invocation = turn_options(context.options)
        try:
            raw = _raw_decision(callback, execution, invocation, view)
            breach = ledger.close()
            if breach is not None:
                raise breach
            return raw
        except BaseException:
            ledger.close()
            _report_spent(ledger, attempt, context)
            raise

    def _repair(
        self, rejected: DecisionRejected, ledger: UsageLedger, attempt: int, context: StepContext
    ) -> FrozenDict:
        """Charge a repair and journal it; the rejection the next `decide` sees.

        Raises:
            RunCancelledError: a cancelled run is never repaired.
            AgentLimitError: out of repairs (or decisions), caused by the first problem.
        """
        execution, invocation = turn_options(context.options)
        raise_if_cancelled(context.signal)
        rejection = rejection_of(rejected, attempt, self._runtime.tools)
        if observed(context):
            attributes = {
                "agent.runId": invocation.agent_run_id,
                "agent.turn": execution.turn,
                **rejection_attributes(rejection),
            }
            if ledger.used:
                attributes.update(ledger.attributes())
            if attempt > 1:
                attributes["agent.repair"] = attempt - 1
            context.report_attempt(attempt, attributes)
        charge_repair(invocation.budget, rejected)
        if invocation.journal is not None:
            invocation.journal.repaired(rejection)
        return rejection

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
        saved: SavedTurn,
        prepared: tuple[PreparedCall, ...],
        invocation: Invocation,
        journal: AgentJournal,
        context: StepContext,
    ) -> tuple[PreparedCall, ...]:
        """Apply the run's approval decisions to a saved batch whose calls wait for them.

        Every decision is checked (an edit validated) before one write records them all;
        without decisions the batch still waits and nothing starts.
        """
        entries = saved.calls
        indices = [index for index, entry in enumerate(entries) if entry.waiting]
        if not indices:
            return prepared
        decisions = journal.journal.approvals
        if not decisions:
            journal.still_waiting(invocation.agent_run_id)
            raise ApprovalRequiredError(journal.pending_approvals())
        calls = list(prepared)
        chosen: dict[int, ApprovalChoice] = {}
        for index in indices:
            entry = entries[index]
            decision = decisions.get(entry.id)
            if decision is None:
                raise AgentError(
                    f"No decision for waiting call {quote(entry.id)}", code=MISSING_CODE
                )
            if decision.kind == "reject":
                assert decision.message is not None
                outcome = rejected_outcome(entry, decision.message)
                chosen[index] = ApprovalChoice(kind="reject", outcome=outcome)
            elif decision.kind == "edit":
                value = self._edited(calls[index], decision.input, journal)
                calls[index] = dataclasses.replace(calls[index], input=value)
                chosen[index] = ApprovalChoice(kind="edit", input=value)
            else:
                chosen[index] = ApprovalChoice(kind="approve")
        raise_if_cancelled(context.signal)
        journal.decide_approvals(chosen, {index: decisions[entries[index].id] for index in chosen})
        return tuple(calls)

    def _edited(self, call: PreparedCall, new_input: Any, journal: AgentJournal) -> Any:
        """The edited input, as checked when the journal opened (or checked now)."""
        checked = journal.journal.edits
        key = (journal.agent_path, call.id)
        if key in checked:
            return checked[key]
        return validated_edit(self._runtime.tools[call.tool], call.tool, call.id, new_input)

    def _restore(self, saved: SavedTurn) -> tuple[PreparedCall, ...]:
        """The prepared calls of a saved batch: saved inputs, plans made again (pure)."""
        runtime = self._runtime
        prepared = []
        for entry in saved.calls:
            spec = runtime.tools[entry.tool]
            pipe = runtime.tool_pipelines[entry.tool]
            if isinstance(spec, PipelineToolSpec):
                child_plan = spec.pipeline.plan(_WET)
                plan = child_plan if spec.subagent else pipe.plan(_WET)
                child = None if spec.subagent else child_plan
                prepared.append(PreparedCall(entry.id, entry.tool, thaw(entry.input), plan, child))
            else:
                prepared.append(
                    PreparedCall(entry.id, entry.tool, thaw(entry.input), pipe.plan(_WET))
                )
        return tuple(prepared)

    def _check_room(self, execution: Execution, invocation: Invocation, size: int) -> None:
        """Check `max_turns` and that the batch fits `max_calls`, charging nothing yet."""
        limits = self._runtime.limits
        if execution.turn >= limits.max_turns:
            raise AgentLimitError(
                "max_turns",
                bound=limits.max_turns,
                consumed=execution.turn,
                requested=1,
                scope=invocation.agent_run_id,
            )
        invocation.budget.check_calls(size)


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


def _report_spent(ledger: UsageLedger, attempt: int, context: StepContext) -> None:
    """Record on a failed decision's attempt what its `decide` charged, so traces count it."""
    if ledger.used and observed(context):
        execution, invocation = turn_options(context.options)
        context.report_attempt(
            attempt,
            {
                "agent.runId": invocation.agent_run_id,
                "agent.turn": execution.turn,
                **ledger.attributes(),
            },
        )


def _record(invocation: Invocation, turn: int, decision: Mapping[str, Any]) -> None:
    """Keep a validated decision on the cassette, when one records the run."""
    if invocation.tape is not None:
        invocation.tape.record_decision(turn, decision)


def _record_batch(invocation: Invocation, turn: int, decision: ContinueDecision) -> None:
    """Keep a validated batch on the cassette; its call dicts are built only for one."""
    if invocation.tape is not None:
        calls = [{"id": c.id, "tool": c.tool, "input": c.input} for c in decision.calls]
        invocation.tape.record_decision(turn, {"kind": "continue", "calls": calls})


def validated_edit(
    spec: _ToolSpec | PipelineToolSpec, tool: str, call_id: str, new_input: Any
) -> Any:
    """Validate an edited input like any argument of the call's tool.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_INVALID_EDIT`, saying nothing was dispatched.
    """
    label = f"Edited input of call {quote(call_id)} ({tool})"
    try:
        _require_plain(new_input, label)
        if isinstance(spec, PipelineToolSpec):
            return prepare_child_options(spec, tool, new_input)
        return validate_boundary(spec.input_schema, new_input, f"Agent tool {tool} input")
    except Exception as error:
        raise AgentError(
            f"{label} was rejected, nothing was dispatched: {str(error)[:2000]}",
            code=INVALID_EDIT_CODE,
        ) from error


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
            state = own_state(self._runtime.reduce(state, outcomes), previous=state)
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

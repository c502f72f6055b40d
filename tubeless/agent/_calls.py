"""Step `calls`: dispatch an admitted batch to tool runs, bounded by `max_concurrency`."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless.agent._deadline import TIMED_OUT_CODE, Attempt, CallTiming, run_attempts
from tubeless.agent._delegate import (
    DELEGATION,
    Delegation,
    PipelineToolSpec,
    failure_outcome,
    tool_errors,
)
from tubeless.agent._journal import (
    CallSlot,
    ExecutionIds,
    interrupted_outcome,
    root_cause,
    saved_outcome,
)
from tubeless.agent._prepare import PreparedCall
from tubeless.agent._tools import _ToolSpec
from tubeless.agent._turn import (
    AgentRuntime,
    Execution,
    Invocation,
    PreparedBatch,
    turn_options,
)
from tubeless.errors import RunCancelledError, ToolError
from tubeless.pipeline import Pipeline, PipelineRun, RunControls, StepContext
from tubeless.pipeline.lowlevel import (
    DETAIL_GROUP_LIMIT,
    CheckedAttributes,
    ChildValue,
    WireRows,
    cancellation_message,
    child_failure,
    clean_text,
    is_cancellation,
    observed,
    raise_if_cancelled,
    run_child_pipeline,
    run_child_value,
    run_lazily,
    visible_groups,
)

_DRY = RunControls(dry_run=True)
_WET = RunControls()


def _handler_tool_error(result: PipelineRun) -> list[ToolError] | None:
    """The handler's `ToolError`, when that alone failed the tool run."""
    if result.status != "failed" or len(result.errors) != 1:
        return None
    error, exception = result.errors[0], result.first_exception()
    if error.step_id != "tool" or error.code != "TUBELESS_STEP_FAILED":
        return None
    return [exception] if isinstance(exception, ToolError) else None


class _CallsProgress:
    """Call groups of one batch: at most 32 visible, active and failed first.

    Rows are built in wire form (`WireRows`) while call ids (checked once) and labels
    (checked as they are set) need no bounding; statuses are the batch's own.
    """

    def __init__(
        self, calls: tuple[PreparedCall, ...], context: StepContext, *, ids_clean: bool
    ) -> None:
        self._ids = [call.id for call in calls]
        self._status = dict.fromkeys(self._ids, "pending")
        self._labels: dict[str, str] = {}
        self._context = context
        self._wire = ids_clean
        self._lock = threading.Lock()

    def set(self, call_id: str, status: str, label: str | None = None) -> None:
        with self._lock:
            self._status[call_id] = status
            if label is not None:
                self._labels[call_id] = label
                # A label is outside text: one that needs bounding sends every later
                # snapshot of the batch through `detail_row`.
                self._wire = self._wire and clean_text(label)
            # A failure goes out at once, while siblings still run.
            urgent = status in ("failed", "cancelled")
            self._context.offer_progress(self._snapshot, urgent=urgent)

    def _snapshot(self) -> tuple[int, int, str, list[dict[str, Any]]]:
        shown = visible_groups(self._ids, self._status, DETAIL_GROUP_LIMIT)
        rows: list[dict[str, Any]] = WireRows() if self._wire else []
        labels = self._labels
        for call_id in shown:
            # Keys in `detail_row`'s order, so the row reads the same either way.
            row: dict[str, Any] = {"id": call_id, "name": call_id}
            if call_id in labels:
                row["label"] = labels[call_id]
            row["status"] = self._status[call_id]
            rows.append(row)
        hidden = len(self._ids) - len(shown)
        if hidden:
            rows.append({"id": "+more", "name": f"+{hidden} more"})
        settled = running = 0
        for status in self._status.values():
            if status == "running":
                running += 1
            elif status != "pending":
                settled += 1
        message = f"{settled}/{len(self._ids)} calls · {running} running"
        return settled, len(self._ids), message, rows


class _Batch:
    """The state of one dispatched batch: outcomes in decision order, first fatal failure."""

    def __init__(
        self,
        runtime: AgentRuntime,
        batch: PreparedBatch,
        context: StepContext,
        turn: tuple[Execution, Invocation],
        watched: bool,
    ) -> None:
        self._runtime = runtime
        self._calls = batch.calls
        self._context = context
        self._signal = context.signal
        execution, invocation = turn
        self._invocation: Invocation = invocation
        self._turn = execution.turn
        self._attributes: dict[str, str | bool | int | float] | None = (
            {
                "agent.runId": invocation.agent_run_id,
                "agent.turn": execution.turn,
                "agent.parentAttemptId": context.attempt_id,
            }
            if watched
            else None
        )
        # Every call id non-empty and kept as it is (checked once per batch), and tool
        # names are `TOOL_NAME`s: progress rows go out in wire form, and with a clean run
        # and attempt id each call's attempt attributes as `CheckedAttributes`.
        ids_clean = watched and all(call.id and clean_text(call.id) for call in self._calls)
        self._checked_attributes = (
            ids_clean
            and clean_text(invocation.agent_run_id)
            and clean_text(context.attempt_id)
            and type(execution.turn) is int
        )
        self._controls = _DRY if context.dry_run else _WET
        # Without a cassette or a journal a call is only dispatched (see `_played`).
        self._settled = invocation.tape is not None or invocation.journal is not None
        self.outcomes: list[FrozenDict | None] = [None] * len(self._calls)
        self.failure: BaseException | None = None
        self.begun: set[int] = set()
        self._lock = threading.Lock()
        # One permit context for every call of the batch (it holds no state of its own).
        self._permit = invocation.budget.permit(self._signal)
        self._progress = (
            _CallsProgress(self._calls, context, ids_clean=ids_clean) if watched else None
        )

    def keep_going(self) -> bool:
        return self.failure is None and not self._signal.is_set()

    def run_call(self, index: int) -> None:
        call = self._calls[index]
        progress = self._progress
        if progress:
            progress.set(call.id, "running")
        try:
            outcome = self._played(index, call) if self._settled else self._dispatch(call, None)
        except Exception as error:
            with self._lock:
                self.failure = self.failure or error
            if progress:
                cancelled = is_cancellation(error, self._signal)
                progress.set(call.id, "cancelled" if cancelled else "failed", _fatal_label(error))
            return
        self.outcomes[index] = outcome
        if progress:
            failure = outcome["error"] if not outcome["ok"] else None
            # The tool's own code first, as `history` shows it: `UNKNOWN_CITY: no city`.
            label = None if failure is None else f"{failure['code']}: {failure['message']}"
            progress.set(call.id, "completed" if outcome["ok"] else "failed", label)

    def _played(self, index: int, call: PreparedCall) -> FrozenDict:
        """Run a call (see `_journaled`) and record or check its outcome on the cassette;
        with `tools="replay"`, take the recorded outcome instead (a subagent still runs,
        its own decisions replayed)."""
        tape = self._invocation.tape
        if tape is None:
            return self._journaled(index, call)
        spec = self._runtime.tools[call.tool]
        if not (isinstance(spec, PipelineToolSpec) and spec.subagent):
            replayed = tape.replayed_outcome(self._turn, call.id, call.tool)
            if replayed is not None:
                self._record(call, replayed, "agent.replayed")
                return replayed
        outcome = self._journaled(index, call)
        tape.settle(self._turn, index, outcome)
        return outcome

    def _journaled(self, index: int, call: PreparedCall) -> FrozenDict:
        """Dispatch a call, or settle it from the journal by the restart table."""
        journal = self._invocation.journal
        if journal is None:
            return self._dispatch(call, None)
        self.begun.add(index)
        entry = journal.entry(index)
        spec = self._runtime.tools[call.tool]
        if entry.status == "completed":
            outcome = saved_outcome(entry)
            if spec.replay == "safe" and _timed_out(outcome):
                # A timed-out call resumes like an interrupted one: safe, so it runs again.
                slot = CallSlot(journal, index)
                journal.start(index)
                outcome = self._dispatch(call, slot)
                journal.complete(index, outcome, slot)
                return outcome
            rejected = entry.approval is not None and entry.approval.decision == "reject"
            self._record(call, outcome, "agent.rejected" if rejected else "agent.replayed")
            return outcome
        resumes = isinstance(spec, PipelineToolSpec) and spec.subagent and spec.durable
        if journal.stale(index) and spec.replay != "safe" and not resumes:
            # Running when the process died, and not safe to repeat: the model decides.
            outcome = interrupted_outcome(entry)
            journal.complete(index, outcome, None)
            self._record(call, outcome, "agent.interrupted")
            return outcome
        slot = CallSlot(journal, index)
        journal.launch(index)
        outcome = self._dispatch(call, slot)
        journal.complete(index, outcome, slot)
        return outcome

    def _record(self, call: PreparedCall, outcome: FrozenDict, flag: str) -> None:
        """Give a reused or interrupted call its run in traces (first-attempt attributes)."""
        pipeline = self._runtime.replay_pipeline
        if self._attributes is None or pipeline is None:
            return
        attributes = {
            **self._attributes,
            "agent.callId": call.id,
            "agent.tool": call.tool,
            flag: True,
        }
        run_child_pipeline(
            self._context,
            pipeline,
            {"outcome": outcome, "attributes": attributes},
            controls=self._controls,
            item_key=call.id,
            options_checked=True,
        )

    def _ids(self, call: PreparedCall) -> ExecutionIds:
        invocation = self._invocation
        return ExecutionIds(invocation.execution_id, invocation.agent_path, self._turn, call.id)

    def _dispatch(self, call: PreparedCall, slot: CallSlot | None) -> FrozenDict:
        attributes = self._attributes
        if attributes is not None:
            attributes = (
                CheckedAttributes(attributes) if self._checked_attributes else dict(attributes)
            )
            attributes["agent.callId"] = call.id
            attributes["agent.tool"] = call.tool
        runtime = self._runtime
        pipeline = runtime.tool_pipelines[call.tool]
        spec = runtime.tools[call.tool]
        budget = self._invocation.budget
        if isinstance(spec, PipelineToolSpec):
            if spec.subagent:
                return self._delegate(call, spec, pipeline, slot, attributes)
            # An ordinary pipeline runs handlers only: one job for its whole run.
            options = {"input": call.input, "attributes": attributes, "plan": call.child_plan}
        else:
            options = {"input": call.input, "attributes": attributes, "execution": self._ids(call)}
        if spec.timeout is not None or spec.retry is not None or budget.deadline is not None:
            return self._bounded(call, spec, pipeline, options)
        with self._permit:
            ran = run_child_value(
                self._context,
                pipeline,
                options,
                controls=self._controls,
                plan=call.plan,
                item_key=call.id,
            )
        return self._outcome(call, spec, pipeline, ran)

    def _delegate(
        self,
        call: PreparedCall,
        spec: PipelineToolSpec,
        pipeline: Pipeline,
        slot: CallSlot | None,
        attributes: dict[str, Any] | None,
    ) -> FrozenDict:
        """Run a subagent call: its own jobs take permits; waiting for it holds none."""
        delegation = Delegation(self._invocation.budget, attributes, slot, self._ids(call))
        ran = run_child_pipeline(
            self._context,
            pipeline,
            call.input,
            controls=self._controls,
            plan=call.plan,
            item_key=call.id,
            options_checked=True,
            extensions={DELEGATION: delegation},
        )
        return self._outcome(call, spec, pipeline, ran)

    def _bounded(
        self,
        call: PreparedCall,
        spec: _ToolSpec | PipelineToolSpec,
        pipeline: Pipeline,
        options: dict[str, Any],
    ) -> FrozenDict:
        """Run a call with a deadline or retries: each attempt one run of its tool pipeline."""
        invocation = self._invocation
        timing = CallTiming(
            call.id,
            call.tool,
            spec.timeout,
            spec.retry,
            invocation.budget,
            self._signal,
            invocation.attempt_threads(),
        )

        def work(number: int, attempt: Attempt | None) -> FrozenDict:
            ran = run_child_value(
                self._context,
                pipeline,
                {**options, "attempt": number, "deadline": attempt},
                controls=self._controls,
                plan=call.plan,
                item_key=call.id,
            )
            return self._outcome(call, spec, pipeline, ran)

        return run_attempts(timing, work)

    def _outcome(
        self,
        call: PreparedCall,
        spec: _ToolSpec | PipelineToolSpec,
        pipeline: Pipeline,
        ran: PipelineRun | ChildValue,
    ) -> FrozenDict:
        """A tool run's outcome; raises for a failure that is not the tool's own."""
        if isinstance(ran, ChildValue) or (ran.status == "completed" and ran.finalized):
            return FrozenDict(id=call.id, tool=call.tool, ok=True, value=ran.value)
        errors = (
            tool_errors(ran, spec.agents)
            if isinstance(spec, PipelineToolSpec)
            else _handler_tool_error(ran)
        )
        if not errors:
            raise child_failure(pipeline, call.plan, ran, item_key=call.id)
        if self._signal.is_set():
            # Cancellation wins over an expected failure: there is no observation to reduce.
            raise RunCancelledError(cancellation_message(self._signal)) from errors[0]
        return FrozenDict(id=call.id, tool=call.tool, ok=False, error=failure_outcome(errors))


class CallsStep:
    """Step `calls`: run every admitted call as a child run and collect outcomes."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        # Whether any tool checks its source before a batch (an MCP server): most do not,
        # and their batches skip the look at every call's tool.
        self._checked = any(
            getattr(spec, "batch_check", None) is not None for spec in runtime.tools.values()
        )

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> tuple[FrozenDict, ...]:
        decision = inputs["decide"]
        if not isinstance(decision, PreparedBatch):
            return ()
        turn = execution, invocation = turn_options(context.options)
        raise_if_cancelled(context.signal)
        invocation.budget.check_time()
        if self._checked and not context.dry_run:
            _check_batch(self._runtime, decision, context.signal, invocation.agent_run_id)
        watched = observed(context)
        if watched:
            context.report_attempt(
                1,
                {
                    "agent.runId": invocation.agent_run_id,
                    "agent.turn": execution.turn,
                    "agent.callsAdmitted": execution.calls + len(decision.calls),
                    "agent.callCount": len(decision.calls),
                },
            )
        batch = _Batch(self._runtime, decision, context, turn, watched)
        workers = self._runtime.limits.max_concurrency
        pool = invocation.pool(workers - 1) if workers > 1 and len(decision.calls) > 1 else None
        try:
            run_lazily(len(decision.calls), workers, batch.run_call, batch.keep_going, pool=pool)
        finally:
            if invocation.journal is not None:
                unstarted = set(range(len(decision.calls))) - batch.begun
                invocation.journal.never_started(sorted(unstarted))
        if batch.failure is not None:
            raise batch.failure
        raise_if_cancelled(context.signal)
        return tuple([outcome for outcome in batch.outcomes if outcome is not None])


def _timed_out(outcome: FrozenDict) -> bool:
    return not outcome["ok"] and outcome["error"]["code"] == TIMED_OUT_CODE


def _check_batch(
    runtime: AgentRuntime, batch: PreparedBatch, signal: threading.Event, run_id: str
) -> None:
    """Run each tool source's check once, before any call of the batch starts.

    An MCP server compares its live tool definitions with the pinned ones here, so a
    drifted tool fails the run before any call of the batch is dispatched.
    """
    checks: list[Any] = []
    for call in batch.calls:
        check = getattr(runtime.tools[call.tool], "batch_check", None)
        if check is not None and all(check is not seen for seen in checks):
            checks.append(check)
            check(signal, run_id)


def _fatal_label(error: BaseException) -> str:
    """A fatal call's progress label: its root cause once (`ZeroDivisionError: ...`)."""
    root = root_cause(error)
    name = getattr(root, "code", None) or type(root).__name__
    return f"{name}: {root}"

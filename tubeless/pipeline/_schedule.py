"""The DAG scheduler: runs planned steps in dependency order on a bounded thread pool.

The calling thread coordinates: it decides dispositions, starts ready steps in plan order,
and records every outcome. Workers only run a step's predicate, handler and output
validation. With `max_concurrency == 1` steps run inline on the calling thread.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from tubeless.errors import Diagnostic, RunCancelledError
from tubeless.pipeline._classify import step_error, to_diagnostic
from tubeless.pipeline._handler_context import (
    ExecutionContext,
    RunScope,
    StepContext,
    cancellation_message,
)
from tubeless.pipeline._plan import Disposition, PlanStep, decide_disposition
from tubeless.pipeline._run_result import StepReport, StepStatus
from tubeless.pipeline._steps import SkipDecision, Step, normalize_skip_decision
from tubeless.schema import validate_boundary
from tubeless.trace import TRACE_MESSAGE_LIMIT
from tubeless.trace.lowlevel import bounded_error, bounded_text

_UNPUBLISHED: Any = object()


@dataclasses.dataclass(slots=True)
class _Attempt:
    id: str
    started_at_ms: int


@dataclasses.dataclass(slots=True)
class StepOutcome:
    """What a worker hands back to the coordinator for one step."""

    index: int
    report: StepReport | None = None
    output: Any = _UNPUBLISHED
    exception: BaseException | None = None
    cancelled_before_start: bool = False


def runs_alone(
    order: Sequence[Step], plan_steps: Sequence[PlanStep], max_concurrency: int, dry_run: bool
) -> bool:
    """Whether a plan is one selected step, run inline, that the ladder runs (not skipped)."""
    if max_concurrency != 1 or len(order) != 1 or not plan_steps[0].selected:
        return False
    return not (dry_run and order[0].dry_run == "skip")


class StepScheduler:
    """Runs the steps of one planned run and collects reports, outputs and errors."""

    def __init__(
        self,
        scope: RunScope,
        pipeline_id: str,
        order: Sequence[Step],
        prerequisites: Sequence[tuple[str, ...]],
        plan_steps: Sequence[PlanStep],
        *,
        max_concurrency: int,
        continue_on_error: bool,
    ) -> None:
        self._scope = scope
        self._pipeline_id = pipeline_id
        self._order = order
        self._prerequisites = prerequisites
        self._plan = plan_steps
        self._max = max_concurrency
        self._continue = continue_on_error
        self.reports: dict[str, StepReport] = {}
        self.outputs: dict[str, Any] = {}
        self.errors: dict[int, tuple[Diagnostic, BaseException | None]] = {}
        self._stopped = False
        self._failed_step: str | None = None
        self._cancel_error: Diagnostic | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    # -- coordination -------------------------------------------------------------------

    def run(self) -> None:
        """Run every planned step to a terminal report; no worker outlives this call."""
        pending = list(range(len(self._order)))
        if self._max == 1:
            self._run_inline(pending)
            self._finish_remaining(pending)
            return
        active: dict[Future[StepOutcome], int] = {}
        try:
            while True:
                if not self._stopped:
                    self._dispatch(pending, active)
                if not active:
                    break
                done, _ = concurrent.futures.wait(
                    active, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in sorted(done, key=active.__getitem__):
                    del active[future]
                    self._apply(future.result(), pending)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
        self._finish_remaining(pending)

    def _run_inline(self, pending: list[int]) -> None:
        """`run`'s dispatch at a concurrency of 1: every step in plan order, on this thread.

        Execution order is topological and each step settles before the next is looked
        at, so the next pending step is always ready. Until a step fails, a step the plan
        does not skip runs: the plan's ladder assumed every earlier step completed, and a
        step skipped by its own policy still meets its dependents.
        """
        signal = self._scope.signal
        while pending and not self._stopped:
            index = pending[0]
            if signal.is_set():
                self._cancel_from(index, pending)
                return
            del pending[0]
            if self.errors or self._plan[index].skip_reason is not None:
                disposition = decide_disposition(
                    self._order[index],
                    self._plan[index].selected,
                    self._scope.dry_run,
                    self._outcome_of,
                )
                if disposition.skip_reason is not None:
                    self._record_skip(index, disposition)
                    continue
            self._apply(self.run_step(index), pending)

    def run_alone(self) -> None:
        """Run a plan of one selected step that runs inline (`run` with the ladder decided).

        For a child run such as a tool call: no dispatch loop, the same reports and records.
        """
        if self._scope.signal.is_set():
            self.run()  # cancelled before the step starts: the loop words it
            return
        self._apply(self.run_step(0), [])

    def runs_alone(self) -> bool:
        """Whether `run_alone` applies: one selected step, inline, that the ladder runs."""
        return runs_alone(self._order, self._plan, self._max, self._scope.dry_run)

    def fail_alone(self, error: Exception, attempt_id: str, started_at_ms: int) -> None:
        """Settle the lone step of a plan (see `runs_alone`) whose attempt, begun by the
        caller, failed with `error`: the report and records of `run_alone` failing."""
        self._apply(self._failed(0, error, _Attempt(attempt_id, started_at_ms)), [])

    def _ready(self, index: int) -> bool:
        reports = self.reports
        return all(dep in reports for dep in self._prerequisites[index])

    def _outcome_of(self, step_id: str) -> tuple[str | None, str | None]:
        report = self.reports.get(step_id)
        return (None, None) if report is None else (report.status, report.reason)

    def _dispatch(self, pending: list[int], active: dict[Future[StepOutcome], int]) -> None:
        progressed = True
        while progressed and not self._stopped:
            progressed = False
            for index in list(pending):
                if len(active) >= self._max:
                    return
                if not self._ready(index):
                    continue
                if self._scope.signal.is_set():
                    self._cancel_from(index, pending)
                    return
                pending.remove(index)
                progressed = True
                disposition = decide_disposition(
                    self._order[index],
                    self._plan[index].selected,
                    self._scope.dry_run,
                    self._outcome_of,
                )
                if disposition.skip_reason is not None:
                    self._record_skip(index, disposition)
                    continue
                self._launch(index, active)

    def _launch(self, index: int, active: dict[Future[StepOutcome], int]) -> None:
        """Start step `index` on a worker."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max, thread_name_prefix="tubeless-step"
            )
        step = self._order[index]
        # Without a predicate to run first, the attempt begins here rather than on the
        # worker, so steps start (and number their attempts) in dispatch order.
        attempt = self._begin(step) if step.skip is None else None
        active[self._pool.submit(self.run_step, index, attempt)] = index

    def _apply(self, outcome: StepOutcome, pending: list[int]) -> None:
        if outcome.cancelled_before_start:
            self._cancel_from(outcome.index, pending, include=True)
            return
        report = outcome.report
        assert report is not None
        self.reports[report.id] = report
        if outcome.output is not _UNPUBLISHED:
            self.outputs[report.id] = outcome.output
        if report.error is None:
            return
        self.errors[outcome.index] = (report.error, outcome.exception)
        if not self._continue and not self._stopped:
            self._stopped = True
            self._failed_step = report.id
            if report.status == "cancelled":
                self._cancel_error = report.error

    # -- terminal reports of steps that never start ----------------------------------

    def _settle_unstarted(self, step: Step, status: StepStatus, **fields: Any) -> None:
        """Record and emit the terminal report of a step that never started."""
        report = StepReport(
            id=step.id,
            status=status,
            finished_at_ms=self._scope.now(),
            name=step.name,
            description=step.description,
            **fields,
        )
        self.reports[step.id] = report
        self._emit_terminal(report)

    def _record_skip(self, index: int, disposition: Disposition) -> None:
        self._settle_unstarted(
            self._order[index],
            "skipped",
            reason=disposition.skip_reason,
            dependency_id=disposition.dependency_id,
        )

    def _cancel_from(self, index: int, pending: list[int], *, include: bool = False) -> None:
        step_id = self._order[index].id
        error = to_diagnostic(
            RunCancelledError(cancellation_message(self._scope.signal)),
            code="TUBELESS_RUN_CANCELLED",
            kind="cancellation",
            phase="execution",
            step_id=step_id,
        )
        self.errors[index] = (error, None)
        self._cancel_error = error
        self._stopped = True
        if include and index not in pending:
            pending.insert(0, index)

    def _finish_remaining(self, pending: list[int]) -> None:
        for index in sorted(pending):
            step = self._order[index]
            planned = self._plan[index]
            if planned.skip_reason is not None:
                self._record_skip(
                    index, Disposition(planned.skip_reason, self._plan_dependency(planned))
                )
            elif self._cancel_error is not None:
                self._record_cancelled(step)
            else:
                self._record_fail_fast(step)
        pending.clear()

    def _plan_dependency(self, planned: PlanStep) -> str | None:
        if planned.skip_reason != "unmet-dependency":
            return None
        skipped = {step.id for step in self._plan if step.skip_reason}
        return next((dep for dep in planned.dependencies if dep in skipped), None)

    def _record_cancelled(self, step: Step) -> None:
        assert self._cancel_error is not None
        error = dataclasses.replace(self._cancel_error, step_id=step.id)
        self._settle_unstarted(step, "cancelled", error=error)

    def _record_fail_fast(self, step: Step) -> None:
        self._settle_unstarted(
            step,
            "skipped",
            reason="fail-fast",
            message=f"Not run because fail-fast stopped after {self._failed_step} failed.",
            dependency_id=self._failed_step,
        )

    # -- one step (runs on a worker, or inline) -----------------------------------------

    def _inputs(self, step: Step) -> dict[str, Any]:
        inputs = {dep.id: self.outputs.get(dep.id) for dep in step.depends_on}
        for dep in step.optional_depends_on:
            if dep.id in self.outputs:
                inputs[dep.id] = self.outputs[dep.id]
        return inputs

    def run_step(self, index: int, attempt: _Attempt | None = None) -> StepOutcome:
        """Run one step: skip predicate, handler (or preview) and output validation.

        `attempt` is given when the coordinator already began it (a step without a skip
        predicate); otherwise it begins here, after the predicate decided to run.
        """
        step = self._order[index]
        inputs = self._inputs(step)
        if attempt is None and step.skip is not None:
            try:
                decision = normalize_skip_decision(
                    step.skip(inputs, ExecutionContext(self._scope, step.id))
                )
            except Exception as error:
                return self._failed(index, error, self._begin(step))
            if self._scope.signal.is_set():
                return StepOutcome(index, cancelled_before_start=True)
            if decision is not None:
                return self._publish(index, decision.value, None, decision)
        attempt = attempt or self._begin(step)
        context = StepContext(self._scope, step.id, attempt.id)
        handler = step.run
        if self._scope.dry_run and callable(step.dry_run):
            handler = step.dry_run
        try:
            value = handler(inputs, context)
        except Exception as error:
            # Held-back progress goes out before the failure record, never after it.
            context.close()
            return self._failed(index, error, attempt)
        context.close()
        return self._publish(index, value, attempt, None)

    def _begin(self, step: Step) -> _Attempt:
        attempt = _Attempt(self._scope.next_attempt_id(), self._scope.now())
        observer = self._scope.observer
        if observer is not None:
            observer.emit(
                "step.running",
                {},
                payload_checked=True,
                at=attempt.started_at_ms,
                stepId=step.id,
                attemptId=attempt.id,
            )
        return attempt

    def _publish(
        self, index: int, value: Any, attempt: _Attempt | None, skip: SkipDecision | None
    ) -> StepOutcome:
        step = self._order[index]
        if step.output_schema is not None:
            if attempt is None:
                attempt = self._begin(step)
            boundary = f"Pipeline {self._pipeline_id} step {step.id} output"
            try:
                value = validate_boundary(step.output_schema, value, boundary)
            except Exception as error:
                return self._failed(index, error, attempt)
        report = StepReport(
            id=step.id,
            status="completed" if skip is None else "skipped",
            finished_at_ms=self._scope.now(),
            name=step.name,
            description=step.description,
            attempt_id=None if attempt is None else attempt.id,
            started_at_ms=None if attempt is None else attempt.started_at_ms,
            reason=None if skip is None else "policy",
            message=None if skip is None else skip.reason,
        )
        self._emit_terminal(report)
        return StepOutcome(index, report, value)

    def _failed(self, index: int, error: Exception, attempt: _Attempt) -> StepOutcome:
        step = self._order[index]
        record = step_error(error, self._scope.signal, step.id)
        report = StepReport(
            id=step.id,
            status="cancelled" if record.kind == "cancellation" else "failed",
            finished_at_ms=self._scope.now(),
            name=step.name,
            description=step.description,
            attempt_id=attempt.id,
            started_at_ms=attempt.started_at_ms,
            error=record,
        )
        self._emit_terminal(report)
        return StepOutcome(index, report, exception=error)

    def _emit_terminal(self, report: StepReport) -> None:
        observer = self._scope.observer
        if observer is None:
            return
        name, payload, fields = terminal_record(report)
        # A completion's payload is the constant status; other kinds carry outside text.
        observer.emit(
            name,
            payload,
            payload_checked=report.status == "completed",
            at=report.finished_at_ms,
            **fields,
        )


_RECORD_NAMES = {
    "completed": "step.complete",
    "skipped": "step.skipped",
    "failed": "step.failed",
    "cancelled": "step.cancelled",
}


def terminal_record(report: StepReport) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Return `(name, payload, fields)` of the terminal trace record for `report`."""
    payload: dict[str, Any] = {"status": report.status}
    fields: dict[str, Any] = {"stepId": report.id}
    if report.attempt_id is not None:
        fields["attemptId"] = report.attempt_id
    if report.started_at_ms is not None:
        fields["durationMs"] = report.finished_at_ms - report.started_at_ms
    if report.status == "skipped":
        payload["reason"] = report.reason
        if report.dependency_id is not None:
            payload["dependencyId"] = report.dependency_id
        if report.message is not None:
            payload["message"] = bounded_text(report.message, TRACE_MESSAGE_LIMIT)
    if report.error is not None:
        fields["error"] = trace_error(report.error)
    return _RECORD_NAMES[report.status], payload, fields


def trace_error(error: Diagnostic) -> dict[str, Any]:
    """The error's wire form bounded to the trace limits (see `bounded_error`).

    The step id is left out: a trace record names its step at the top level, and the trace
    schema refuses `stepId` inside `error`.
    """
    out = error.to_dict()
    out.pop("stepId", None)
    return bounded_error(out)

"""The DAG scheduler: runs planned steps in dependency order on a bounded thread pool.

The calling thread coordinates: it decides dispositions, starts ready steps in plan order,
and records every outcome. Each step runs through the one `run_step` (`_run_step`): on a
worker, or inline on the calling thread when `max_concurrency == 1`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from tubeless.errors import Diagnostic, RunCancelledError
from tubeless.pipeline._classify import to_diagnostic
from tubeless.pipeline._handler_context import RunScope, cancellation_message
from tubeless.pipeline._plan import RUN, Disposition, PlanStep, decide_disposition
from tubeless.pipeline._run_result import StepReport, StepStatus
from tubeless.pipeline._run_step import (
    UNPUBLISHED,
    Attempt,
    StepOutcome,
    begin_attempt,
    run_step,
    settle_unstarted,
)
from tubeless.pipeline._steps import Step


class StepScheduler:
    """Runs the steps of one planned run and collects reports, outputs and errors."""

    def __init__(
        self,
        scope: RunScope,
        order: Sequence[Step],
        prerequisites: Sequence[tuple[str, ...]],
        plan_steps: Sequence[PlanStep],
        *,
        max_concurrency: int,
        continue_on_error: bool,
    ) -> None:
        self._scope = scope
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
        """Run every planned step to a terminal report; no worker outlives this call.

        At a concurrency of 1 each step runs inline as it is dispatched and settles before
        the next is looked at, so nothing is ever active and one pass dispatches them all.
        """
        pending = list(range(len(self._order)))
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

    def _ready(self, index: int) -> bool:
        reports = self.reports
        for dep in self._prerequisites[index]:  # noqa: SIM110 (cheaper than a generator)
            if dep not in reports:
                return False
        return True

    def _outcome_of(self, step_id: str) -> tuple[str | None, str | None]:
        report = self.reports.get(step_id)
        return (None, None) if report is None else (report.status, report.reason)

    def _disposition(self, index: int) -> Disposition:
        """Whether step `index`, now ready, runs or is skipped (and why).

        Until a step fails, a step the plan does not skip runs: the plan's ladder assumed
        every earlier step completed, and a step skipped by its own policy still meets its
        dependents.
        """
        planned = self._plan[index]
        if not self.errors and planned.skip_reason is None:
            return RUN
        return decide_disposition(
            self._order[index], planned.selected, self._scope.dry_run, self._outcome_of
        )

    def _dispatch(self, pending: list[int], active: dict[Future[StepOutcome], int]) -> None:
        progressed = True
        while progressed and not self._stopped:
            progressed = False
            for index in list(pending):
                if self._stopped or len(active) >= self._max:
                    return
                if not self._ready(index):
                    continue
                if self._scope.services.signal.is_set():
                    self._cancel_from(index, pending)
                    return
                pending.remove(index)
                progressed = True
                disposition = self._disposition(index)
                if disposition.skip_reason is not None:
                    self._record_skip(index, disposition)
                    continue
                self._launch(index, pending, active)

    def _launch(
        self, index: int, pending: list[int], active: dict[Future[StepOutcome], int]
    ) -> None:
        """Start step `index`: inline at a concurrency of 1, otherwise on a worker."""
        if self._max == 1:
            self._apply(self._run_at(index), pending)
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max, thread_name_prefix="tubeless-step"
            )
        step = self._order[index]
        # Without a predicate to run first, the attempt begins here rather than on the
        # worker, so steps start (and number their attempts) in dispatch order.
        attempt = begin_attempt(self._scope, step) if step.skip is None else None
        active[self._pool.submit(self._run_at, index, attempt)] = index

    def _run_at(self, index: int, attempt: Attempt | None = None) -> StepOutcome:
        """Run step `index` with its inputs (see `run_step`)."""
        step = self._order[index]
        inputs: dict[str, Any] = {}
        outputs = self.outputs
        for dep in step.depends_on:  # a loop, not a comprehension: no call of its own
            inputs[dep.id] = outputs.get(dep.id)
        for dep in step.optional_depends_on:
            if dep.id in outputs:
                inputs[dep.id] = outputs[dep.id]
        return run_step(self._scope, index, step, inputs, attempt)

    def _apply(self, outcome: StepOutcome, pending: list[int]) -> None:
        if outcome.cancelled_before_start:
            self._cancel_from(outcome.index, pending, include=True)
            return
        report = outcome.report
        assert report is not None
        self.reports[report.id] = report
        if outcome.output is not UNPUBLISHED:
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
        self.reports[step.id] = settle_unstarted(self._scope, step, status, **fields)

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
            RunCancelledError(cancellation_message(self._scope.services.signal)),
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

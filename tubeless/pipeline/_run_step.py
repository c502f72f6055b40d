"""The one way a step runs: skip predicate, attempt, handler or dry run, output validation,
failure, and the step's trace records; and the terminal report of a step that never starts.

`run_step` is how the scheduler's loop (`_schedule`) runs every step of a run, and how a
run's one-step path (`_execute`) runs the lone step of a child run such as a tool call;
`begin_attempt` and `settle_unstarted` are their other two ways to touch a step. Neither
caller decides anything about a step itself: both call here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tubeless.errors import Diagnostic
from tubeless.pipeline._classify import step_error
from tubeless.pipeline._handler_context import ExecutionContext, RunScope, StepContext
from tubeless.pipeline._run_result import StepReport, StepStatus
from tubeless.pipeline._steps import SkipDecision, Step, normalize_skip_decision
from tubeless.schema import validate_boundary
from tubeless.trace import TRACE_MESSAGE_LIMIT
from tubeless.trace.lowlevel import SharedPayload, bounded_error, bounded_text

UNPUBLISHED: Any = object()
"""`StepOutcome.output` of a step that published no output (it failed or never started)."""


@dataclasses.dataclass(slots=True)
class Attempt:
    """One attempt of a step: its id and when it began."""

    id: str
    """`<run id>:attempt:<sequence>`, unique in the run."""
    started_at_ms: int
    """When the attempt began, on the run's clock."""


@dataclasses.dataclass(slots=True)
class StepOutcome:
    """What running one step hands back (from a worker, or inline) to its caller."""

    index: int
    """The step's position in the run's execution order."""
    report: StepReport | None = None
    """The step's terminal report; `None` when it never started, or when its caller asked
    for its value alone (see `run_step`)."""
    output: Any = UNPUBLISHED
    """The step's validated output, or `UNPUBLISHED`."""
    exception: BaseException | None = None
    """The exception behind a failed or cancelled step."""
    cancelled_before_start: bool = False
    """The run was cancelled while the step's skip predicate ran: the step did not start."""
    attempt: Attempt | None = None
    """The attempt of a step that completed observed with no report asked for (see
    `run_step`): with `finished_at_ms`, what `completed_report` needs to make it later."""
    finished_at_ms: int = 0
    """When that step completed, as its record says."""


def run_step(
    scope: RunScope,
    index: int,
    step: Step,
    inputs: dict[str, Any],
    attempt: Attempt | None = None,
    *,
    report: bool = True,
) -> StepOutcome:
    """Run `step` (at `index` in execution order) in the run of `scope`: skip predicate,
    handler (or dry-run handler) and output validation, with the step's records.

    `attempt` is given when the caller already began it (a step without a skip predicate);
    otherwise it begins here, after the predicate decided to run. Without `report`, a step
    that completes hands back its output with no report (`StepOutcome.report` is `None`)
    when unobserved in a run not cancelled, or when observed (its record is sent, and
    `completed_report` makes the report if its caller needs it after all): the caller wants
    the value alone and would throw the report away. Safe to call from several worker
    threads at once.
    """
    if attempt is None and step.skip is not None:
        try:
            decision = normalize_skip_decision(step.skip(inputs, ExecutionContext(scope, step.id)))
        except Exception as error:
            return _failed(scope, index, step, error, begin_attempt(scope, step))
        if scope.services.signal.is_set():
            return StepOutcome(index, cancelled_before_start=True)
        if decision is not None:
            return _publish(scope, index, step, decision.value, None, decision)
    attempt = attempt or begin_attempt(scope, step)
    context = StepContext(scope, step.id, attempt.id)
    handler = step.dry_run if scope.dry_run and callable(step.dry_run) else step.run
    try:
        value = handler(inputs, context)
    except Exception as error:
        # Held-back progress goes out before the failure record, never after it.
        context.close()
        return _failed(scope, index, step, error, attempt)
    context.close()
    return _publish(scope, index, step, value, attempt, None, report=report)


def begin_attempt(scope: RunScope, step: Step) -> Attempt:
    """Begin an attempt of `step` now: its id, its start, its `step.running` record."""
    attempt = Attempt(scope.next_attempt_id(), scope.services.now())
    observer = scope.observer
    if observer is not None:
        observer.emit(
            "step.running",
            EMPTY_PAYLOAD,
            payload_checked=True,
            at=attempt.started_at_ms,
            step_id=step.id,
            attempt_id=attempt.id,
        )
    return attempt


def settle_unstarted(scope: RunScope, step: Step, status: StepStatus, **fields: Any) -> StepReport:
    """Make and emit the terminal report of a step that never started (`fields` are the
    report's `reason`, `dependency_id`, `message` or `error`)."""
    report = StepReport(
        id=step.id,
        status=status,
        finished_at_ms=scope.services.now(),
        name=step.name,
        description=step.description,
        **fields,
    )
    _emit_terminal(scope, report)
    return report


def _publish(
    scope: RunScope,
    index: int,
    step: Step,
    value: Any,
    attempt: Attempt | None,
    skip: SkipDecision | None,
    *,
    report: bool = True,
) -> StepOutcome:
    if step.output_schema is not None:
        if attempt is None:
            attempt = begin_attempt(scope, step)
        boundary = f"Pipeline {scope.pipeline_id} step {step.id} output"
        try:
            value = validate_boundary(step.output_schema, value, boundary)
        except Exception as error:
            return _failed(scope, index, step, error, attempt)
    observer = scope.observer
    if not report and skip is None:
        assert attempt is not None
        if observer is None:
            if not scope.services.signal.is_set():
                return StepOutcome(index, None, value)
        else:
            finished_at = scope.services.now()
            name, payload, fields = terminal_record_of(
                "completed", step.id, attempt.id, attempt.started_at_ms, finished_at
            )
            observer.emit(name, payload, payload_checked=True, at=finished_at, **fields)
            return StepOutcome(index, None, value, attempt=attempt, finished_at_ms=finished_at)
    finished = StepReport(
        id=step.id,
        status="completed" if skip is None else "skipped",
        finished_at_ms=scope.services.now(),
        name=step.name,
        description=step.description,
        attempt_id=None if attempt is None else attempt.id,
        started_at_ms=None if attempt is None else attempt.started_at_ms,
        reason=None if skip is None else "policy",
        message=None if skip is None else skip.reason,
    )
    _emit_terminal(scope, finished)
    return StepOutcome(index, finished, value)


def completed_report(step: Step, outcome: StepOutcome) -> StepReport:
    """The report of `step`, which completed as `outcome` says with no report made then."""
    attempt = outcome.attempt
    assert attempt is not None
    return StepReport(
        id=step.id,
        status="completed",
        finished_at_ms=outcome.finished_at_ms,
        name=step.name,
        description=step.description,
        attempt_id=attempt.id,
        started_at_ms=attempt.started_at_ms,
    )


def _failed(
    scope: RunScope, index: int, step: Step, error: Exception, attempt: Attempt
) -> StepOutcome:
    record = step_error(error, scope.services.signal, step.id)
    report = StepReport(
        id=step.id,
        status="cancelled" if record.kind == "cancellation" else "failed",
        finished_at_ms=scope.services.now(),
        name=step.name,
        description=step.description,
        attempt_id=attempt.id,
        started_at_ms=attempt.started_at_ms,
        error=record,
    )
    _emit_terminal(scope, report)
    return StepOutcome(index, report, exception=error)


def _emit_terminal(scope: RunScope, report: StepReport) -> None:
    observer = scope.observer
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


EMPTY_PAYLOAD = SharedPayload()
"""The payload of a record that has none of its own (`step.running`, finalization): one
object, its JSON made once, shared by every such record."""
_STATUS_PAYLOADS = {
    status: SharedPayload(status=status) for status in ("completed", "failed", "cancelled")
}
"""A terminal record's payload, the status alone, shared by every record of its status."""

_RECORD_NAMES = {
    "completed": "step.complete",
    "skipped": "step.skipped",
    "failed": "step.failed",
    "cancelled": "step.cancelled",
}


def terminal_record(report: StepReport) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Return `(name, payload, fields)` of the terminal trace record for `report`: `fields`
    are `RunObserver.emit`'s keywords (`step_id`, `attempt_id`, `duration_ms`, `error`)."""
    return terminal_record_of(
        report.status,
        report.id,
        report.attempt_id,
        report.started_at_ms,
        report.finished_at_ms,
        report.reason,
        report.dependency_id,
        report.message,
        report.error,
    )


def terminal_record_of(
    status: StepStatus,
    step_id: str,
    attempt_id: str | None,
    started_at_ms: int | None,
    finished_at_ms: int,
    reason: str | None = None,
    dependency_id: str | None = None,
    message: str | None = None,
    error: Diagnostic | None = None,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """`terminal_record` of a report with these fields, for a step whose report is not made.

    The payload of a completed, failed or cancelled step is shared: read-only.
    """
    fields: dict[str, Any] = {"step_id": step_id}
    if attempt_id is not None:
        fields["attempt_id"] = attempt_id
    if started_at_ms is not None:
        fields["duration_ms"] = finished_at_ms - started_at_ms
    payload: dict[str, Any]
    if status == "skipped":
        payload = {"status": status, "reason": reason}
        if dependency_id is not None:
            payload["dependencyId"] = dependency_id
        if message is not None:
            payload["message"] = bounded_text(message, TRACE_MESSAGE_LIMIT)
    else:
        payload = _STATUS_PAYLOADS[status]
    if error is not None:
        fields["error"] = trace_error(error)
    return _RECORD_NAMES[status], payload, fields


def trace_error(error: Diagnostic) -> dict[str, Any]:
    """The error's wire form bounded to the trace limits (see `bounded_error`).

    The step id is left out: a trace record names its step at the top level, and the trace
    schema refuses `stepId` inside `error`.
    """
    out = error.to_dict()
    out.pop("stepId", None)
    return bounded_error(out)

"""Run reports: `PipelineRun` and one `StepReport` per planned step."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless._frozen import slot_init
from tubeless._usage import NO_USAGE, Usage
from tubeless.errors import Diagnostic, PendingApproval, pending_approvals_of

if TYPE_CHECKING:
    from tubeless.pipeline._identity import DefinitionIdentity

RUN_MODEL_VERSION = 2
RunStatus = Literal["completed", "failed", "cancelled"]
StepStatus = Literal["completed", "failed", "cancelled", "skipped"]


def run_status(errors: Sequence[Diagnostic]) -> RunStatus:
    """Derive a status from errors: none -> completed, only cancellations -> cancelled."""
    if not errors:
        return "completed"
    if all(error.kind == "cancellation" for error in errors):
        return "cancelled"
    return "failed"


class ChildValue:
    """A completed child run's finalized value, without its report (internal).

    What a child run started for its value alone (`run_child_value`) returns when nothing
    observes it and its lone step ran to a result: the report would be built only to be
    thrown away.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


@slot_init
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StepReport:
    """The terminal report of one planned step."""

    id: str
    """The step id."""
    status: StepStatus
    """`completed`, `failed`, `cancelled` or `skipped`."""
    finished_at_ms: int
    """When the step settled (epoch ms)."""
    name: str | None = None
    """Display label."""
    description: str | None = None
    """Description."""
    attempt_id: str | None = None
    """`<run id>:attempt:<base36>` when an attempt began."""
    started_at_ms: int | None = None
    """When the attempt began."""
    error: Diagnostic | None = None
    """Why it failed or was cancelled."""
    reason: str | None = None
    """Why it was skipped: `filtered`, `dry-run`, `policy`, ..."""
    message: str | None = None
    """Skip message (policy reason or fail-fast explanation)."""
    dependency_id: str | None = None
    """The prerequisite behind a dependency skip."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form (absent fields left out)."""
        out: dict[str, Any] = {"id": self.id, "status": self.status}
        for key, value in (
            ("name", self.name),
            ("description", self.description),
            ("attemptId", self.attempt_id),
            ("startedAtMs", self.started_at_ms),
        ):
            if value is not None:
                out[key] = value
        out["finishedAtMs"] = self.finished_at_ms
        if self.error is not None:
            out["error"] = self.error.to_dict()
        for key, value in (
            ("reason", self.reason),
            ("message", self.message),
            ("dependencyId", self.dependency_id),
        ):
            if value is not None:
                out[key] = value
        return out


_MISSING_OUTPUTS = "TUBELESS_REQUIRED_OUTPUTS_MISSING"


def _published(report: StepReport) -> bool:
    return report.status == "completed" or (
        report.status == "skipped" and report.reason == "policy"
    )


def _unpublished_by_failure(report: StepReport, reports: Mapping[str, StepReport]) -> bool:
    """Whether a step left no output because of a failure (following unmet dependencies)."""
    seen: set[str] = set()
    current: StepReport | None = report
    while current is not None and current.id not in seen:
        seen.add(current.id)
        if current.status in ("failed", "cancelled"):
            return True
        if current.status != "skipped":
            return False
        if current.reason in ("failed-dependency", "fail-fast"):
            return True
        if current.reason != "unmet-dependency" or current.dependency_id is None:
            return False
        current = reports.get(current.dependency_id)
    return False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineRun:
    """What a run did: status, errors, one report per planned step and the value.

    Logs, progress, step outputs and options are deliberately not kept here.
    """

    version: int
    """Run model version (2)."""
    pipeline_id: str
    """The pipeline's id."""
    run_id: str
    """This run's id."""
    correlation_id: str | None
    """Correlation id, inherited by child runs."""
    parent_run_id: str | None
    """The parent run, for child runs."""
    definition_identity: DefinitionIdentity | None
    """Identity of the definition that ran."""
    dry_run: bool
    """Whether it was a dry run."""
    status: RunStatus
    """`completed`, `failed` or `cancelled`, derived from `errors`."""
    started_at_ms: int
    """Start time (epoch ms)."""
    finished_at_ms: int
    """End time (epoch ms)."""
    errors: tuple[Diagnostic, ...]
    """Run-level errors, then step errors in plan order, then finalization errors."""
    steps: tuple[StepReport, ...]
    """One terminal report per planned step, in plan order."""
    finalized: bool
    """Whether finalization produced a value (independent of status)."""
    value: Any = None
    """The result, when `finalized`."""
    exceptions: tuple[BaseException | None, ...] = dataclasses.field(
        default=(), repr=False, compare=False
    )
    """The exception behind each error, where there was one (parallel to `errors`)."""
    usage: Usage = NO_USAGE
    """Tokens and cost the run's tree consumed (an agent's usage budgets meter them, on
    failed and cancelled runs too); zero for a run that meters none."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form; `value` is present exactly when the run finalized."""
        out: dict[str, Any] = {
            "version": self.version,
            "pipelineId": self.pipeline_id,
            "runId": self.run_id,
        }
        if self.correlation_id is not None:
            out["correlationId"] = self.correlation_id
        if self.parent_run_id is not None:
            out["parentRunId"] = self.parent_run_id
        if self.definition_identity is not None:
            out["definitionIdentity"] = self.definition_identity.to_dict()
        out.update(
            dryRun=self.dry_run,
            status=self.status,
            startedAtMs=self.started_at_ms,
            finishedAtMs=self.finished_at_ms,
            errors=[error.to_dict() for error in self.errors],
            steps=[step.to_dict() for step in self.steps],
            finalized=self.finalized,
        )
        if self.finalized:
            out["value"] = self.value
        if self.usage:
            out["usage"] = self.usage.to_dict()
        return out

    def causal_errors(self) -> tuple[Diagnostic, ...]:
        """The errors worth showing a person.

        A finalization failure for missing required outputs is left out when other errors
        are present and every step that published nothing failed, was cancelled, or was
        skipped because of a failure: those errors already explain it.
        """
        causal = tuple(e for e in self.errors if e.source_code != _MISSING_OUTPUTS)
        if not causal or not self.steps:
            return self.errors
        reports = {report.id: report for report in self.steps}
        derived = all(
            _published(report) or _unpublished_by_failure(report, reports) for report in self.steps
        )
        return causal if derived else self.errors

    @property
    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The tool calls a durable agent stopped for, waiting for a person's decision.

        Non-empty exactly when the run failed with `TUBELESS_AGENT_APPROVAL_REQUIRED`
        (also when the agent is a subagent, or runs below another pipeline's step).
        Resume with the same execution key and `context={"approvals": {...}}`.
        """
        for exception in self.exceptions:
            pending = pending_approvals_of(exception)
            if pending:
                return pending
        return ()

    @property
    def waiting(self) -> bool:
        """Whether the run stopped to wait for approval of tool calls, not because it broke.

        `status` stays `failed` (the wire form keeps it); `pending_approvals`
        lists the calls, and `run_or_raise` raises `PipelineWaitingError`.
        """
        return self.status == "failed" and bool(self.pending_approvals)

    def first_exception(self) -> BaseException | None:
        """The exception behind the first error that has one."""
        return next((error for error in self.exceptions if error is not None), None)

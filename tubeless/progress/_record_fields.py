"""Reading the fields a reporter needs out of trace v3 records (wire-form dicts)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tubeless.errors import ApprovalRequiredError, shown_status
from tubeless.progress._terminal import format_duration, format_number, sanitize_terminal_text
from tubeless.trace import StepFold

__all__ = [
    "RunFacts",
    "elapsed_ms",
    "error_message",
    "field_number",
    "field_text",
    "has_visible_progress",
    "is_iteration",
    "payload",
    "run_facts",
    "setback_rows",
    "skip_detail",
    "summary_line",
    "waits_for_approval",
]

APPROVAL_REQUIRED = ApprovalRequiredError.CODE
CHILD_FAILED = "TUBELESS_CHILD_FAILED"
CAUSE_DEPTH_LIMIT = 8
"""Cause links followed to a child failure's root (a trace record keeps at most 8)."""


def payload(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record's `payload`, or an empty mapping when it is missing or malformed."""
    value = record.get("payload")
    return value if isinstance(value, Mapping) else {}


def field_text(mapping: Mapping[str, Any], key: str) -> str | None:
    """`mapping[key]` when it is a string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) else None


def field_number(mapping: Mapping[str, Any], key: str) -> float | None:
    """`mapping[key]` when it is a finite number (booleans are not numbers), else None."""
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def error_message(record: Mapping[str, Any]) -> str:
    """The sanitised message of the record's `error`.

    A child pipeline's failure (`TUBELESS_CHILD_FAILED`) repeats its cause's message inside
    its own, once per level of nesting: it shows its root cause instead, `Name: message`.
    """
    error = record.get("error")
    if not isinstance(error, Mapping):
        return "unknown error"
    if error.get("code") == CHILD_FAILED:
        root = error
        for _ in range(CAUSE_DEPTH_LIMIT):
            cause = root.get("cause")
            if not isinstance(cause, Mapping):
                break
            root = cause
        if root is not error and field_text(root, "message") is not None:
            name = field_text(root, "name")
            text = field_text(root, "message") or ""
            return sanitize_terminal_text(f"{name}: {text}" if name else text)
    message = field_text(error, "message")
    return "unknown error" if message is None else sanitize_terminal_text(message)


def waits_for_approval(record: Mapping[str, Any]) -> bool:
    """Whether the record's `error` is a durable agent stopping for approval (not a failure
    to fix: the run waits for a person's decision)."""
    error = record.get("error")
    return isinstance(error, Mapping) and error.get("sourceCode") == APPROVAL_REQUIRED


def skip_detail(record: Mapping[str, Any], *, prefer_dependency: bool) -> str:
    """Why a step was skipped, sanitised.

    Args:
        record: a `step.skipped` record.
        prefer_dependency: print `<reason>: <dependencyId>` when a dependency is named
            (the plain lines), instead of the message (the interactive frame).
    """
    data = payload(record)
    reason = field_text(data, "reason") or "skipped"
    dependency = field_text(data, "dependencyId")
    message = field_text(data, "message")
    if prefer_dependency and dependency:
        return sanitize_terminal_text(f"{reason}: {dependency}")
    return sanitize_terminal_text(message if message is not None else reason)


def has_visible_progress(progress: Mapping[str, Any]) -> bool:
    """Whether a progress snapshot says anything: a message, details, a total or work done."""
    message = field_text(progress, "message")
    details = progress.get("details")
    total = field_number(progress, "total")
    completed = field_number(progress, "completed")
    return (
        bool(message and message.strip())
        or bool(isinstance(details, list) and details)
        or (total is not None and total > 0)
        or (completed is not None and completed > 0)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class RunFacts:
    """What `pipeline.started` says about a run, ready to print."""

    pipeline_id: str
    """The sanitised pipeline id."""
    step_count: str
    """The number of planned steps."""
    dry_run: str
    """`true` or `false`."""
    started_ms: float | None
    """The record's `timestampMs`."""


def run_facts(record: Mapping[str, Any]) -> RunFacts:
    """Read a `pipeline.started` record."""
    data = payload(record)
    count = field_number(data, "stepCount")
    return RunFacts(
        pipeline_id=sanitize_terminal_text(field_text(record, "pipelineId") or "?"),
        step_count=format_number(count) if count is not None else "?",
        dry_run="true" if data.get("dryRun") is True else "false",
        started_ms=field_number(record, "timestampMs"),
    )


def elapsed_ms(record: Mapping[str, Any], started_ms: float | None) -> float:
    """The record's `durationMs`, else the time since `started_ms` by the record's clock."""
    duration = field_number(record, "durationMs")
    if duration is not None:
        return duration
    finished = field_number(record, "timestampMs")
    if finished is None or started_ms is None:
        return 0.0
    return finished - started_ms


def summary_line(
    record: Mapping[str, Any], started_ms: float | None, failed_calls: int = 0
) -> tuple[str, bool]:
    """The closing line for a `pipeline.completed` record, and whether the run completed.

    `failed_calls` (failed tool calls and items shown in the steps' progress) is added
    as `, failed calls=<n>` when there were any: a run can complete although calls failed.
    """
    data = payload(record)
    status = field_text(data, "status") or "unknown"
    error = record.get("error")
    shown = shown_status(status, error if isinstance(error, Mapping) else None)
    steps = field_number(data, "stepCount")
    errors = field_number(data, "errorCount")
    pipeline_id = sanitize_terminal_text(field_text(record, "pipelineId") or "?")
    line = (
        f"Pipeline {pipeline_id}: done in {format_duration(elapsed_ms(record, started_ms))}"
        f" (status={sanitize_terminal_text(shown)},"
        f" steps={format_number(steps) if steps is not None else '?'},"
        f" errors={format_number(errors) if errors is not None else '?'}"
        f"{f', failed calls={failed_calls}' if failed_calls else ''})"
    )
    return line, status == "completed"


def is_iteration(step: StepFold) -> bool:
    """Whether the step repeats a child run (`iterate`, an agent's turns).

    Its progress counts iterations against a limit, not towards an estimate, so it is
    shown as its message (`turn 3 (limit 6)`), never as a percentage.
    """
    nested = step.nested_pipeline
    return isinstance(nested, Mapping) and nested.get("mode") == "iterate"


def setback_rows(progress: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The failed and cancelled detail rows of a progress snapshot that have no child rows.

    A group row (a turn, a batch of calls) fails because of a row inside it, which says why.
    """
    details = progress.get("details")
    rows = [row for row in details if isinstance(row, Mapping)] if isinstance(details, list) else []
    ids = [field_text(row, "id") or "" for row in rows]
    return [
        row
        for row, row_id in zip(rows, ids, strict=True)
        if field_text(row, "status") in ("failed", "cancelled")
        and not any(other.startswith(f"{row_id}/") for other in ids)
    ]

"""Views of a run from its trace records: the one fold, stored runs, and their text.

No I/O, no clock. `RunFold` folds one run's records as they arrive (the live reporters
draw from it); `project_runs` folds a record stream (from `read_ndjson` or
`SqliteTraceStore.event_rows`) into one frozen `StoredRun` per run; `format_run_list`
and `format_run_detail` render those for a terminal.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

from tubeless.errors import shown_status
from tubeless.trace._step_fold import StepFold, StoredAttempt, StoredStep

__all__ = [
    "RunFold",
    "StepFold",
    "StoredAttempt",
    "StoredLog",
    "StoredRun",
    "StoredStep",
    "format_run_detail",
    "format_run_list",
    "project_runs",
]

RUN_MODEL_VERSION = 2
"""The version of the stored-run shape."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredLog:
    """One `pipeline.log` record of a run."""

    id: int
    """The record's id: its store row id, or its position in the stream."""
    level: str
    """`log`, `warn` or `error`."""
    message: str
    """The logged text."""
    timestamp_ms: float
    """When it was logged."""
    step_id: str | None = None
    """The step that logged it, if any."""
    attempt_id: str | None = None
    """The step attempt that logged it, if any."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{id, level, message, stepId?, attemptId?, timestampMs}`."""
        out: dict[str, Any] = {"id": self.id, "level": self.level, "message": self.message}
        if self.step_id:
            out["stepId"] = self.step_id
        if self.attempt_id:
            out["attemptId"] = self.attempt_id
        out["timestampMs"] = self.timestamp_ms
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """One recorded run as `history` shows it (`StoredPipelineRun` in the TypeScript tubeless)."""

    run_id: str
    """The run's id."""
    pipeline_id: str
    """The pipeline it ran."""
    status: str
    """`running` until `pipeline.completed`, then `completed`, `failed` or `cancelled`."""
    dry_run: bool
    """Whether it was a dry run."""
    started_at_ms: float
    """When `pipeline.started` was recorded (else the run's first record)."""
    event_count: int
    """How many records the run has."""
    log_count: int
    """How many `pipeline.log` records the run has."""
    logs: tuple[StoredLog, ...]
    """The run's log lines, in order."""
    steps: tuple[StoredStep, ...]
    """The run's steps, in order of first appearance."""
    finished_at_ms: float | None = None
    """When `pipeline.completed` was recorded."""
    duration_ms: float | None = None
    """The run's duration, from `pipeline.completed`."""
    error: Mapping[str, Any] | None = None
    """The run's first error (trace wire form), from `pipeline.completed`."""
    correlation_id: str | None = None
    """The correlation id the run carried."""
    parent_run_id: str | None = None
    """The parent run, for a child run."""
    item_key: str | None = None
    """The fan-out or iteration key, for a child run."""
    iteration: Mapping[str, Any] | None = None
    """The iterate relation `{runId, stepId, attemptId, index}`, for an iteration run."""
    definition_identity: Mapping[str, Any] | None = None
    """The definition identity from `pipeline.started`."""
    version: int = RUN_MODEL_VERSION
    """The version of this shape (2)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the camelCase JSON form, leaving out absent fields."""
        out: dict[str, Any] = {
            "version": self.version,
            "runId": self.run_id,
            "pipelineId": self.pipeline_id,
            "status": self.status,
            "dryRun": self.dry_run,
            "startedAtMs": self.started_at_ms,
        }
        optional = (
            ("finishedAtMs", self.finished_at_ms),
            ("durationMs", self.duration_ms),
        )
        out.update((key, value) for key, value in optional if value is not None)
        out["eventCount"] = self.event_count
        out["logCount"] = self.log_count
        out["logs"] = [log.to_dict() for log in self.logs]
        related = (
            ("error", self.error),
            ("correlationId", self.correlation_id),
            ("parentRunId", self.parent_run_id),
            ("itemKey", self.item_key),
            ("iteration", self.iteration),
            ("definitionIdentity", self.definition_identity),
        )
        out.update((key, copy.deepcopy(value)) for key, value in related if value is not None)
        out["steps"] = [step.to_dict() for step in self.steps]
        return out


class RunFold:
    """One run's records folded in as they arrive: the one fold behind every view of a run.

    The live reporters fold each record as the run emits it and draw from the fold;
    `project_runs` folds a recorded stream and `freeze()`s each fold into the `StoredRun`
    that `history` shows. Records must belong to one run; `pipeline.log` records are kept
    as `StoredLog`s.

    Args:
        first: the run's first record (it gives the run's id, pipeline and relations).
    """

    def __init__(self, first: Mapping[str, Any]) -> None:
        self._first = first
        self._started: Mapping[str, Any] | None = None
        self._completed: Mapping[str, Any] | None = None
        self._finalize: Mapping[str, Any] | None = None
        self._event_count = 0
        self._logs: list[StoredLog] = []
        self._steps: dict[str, StepFold] = {}

    @property
    def started(self) -> Mapping[str, Any] | None:
        """The run's `pipeline.started` record."""
        return self._started

    @property
    def completed(self) -> Mapping[str, Any] | None:
        """The run's `pipeline.completed` record, once it arrived."""
        return self._completed

    @property
    def finalize(self) -> Mapping[str, Any] | None:
        """The latest `pipeline.finalize.*` record (started, completed or failed)."""
        return self._finalize

    @property
    def steps(self) -> Mapping[str, StepFold]:
        """The run's steps, in order of first appearance (plan order for planned steps)."""
        return MappingProxyType(self._steps)

    def add(self, record: Mapping[str, Any], *, event_id: int | None = None) -> None:
        """Fold one record of this run in.

        Args:
            record: a trace record of this run.
            event_id: the record's id for `StoredLog.id` (default: its position in the run).
        """
        position = self._event_count if event_id is None else event_id
        self._event_count += 1
        name = record["name"]
        if name == "pipeline.started" and self._started is None:
            self._started = record
        elif name == "pipeline.completed":
            self._completed = record
        elif name.startswith("pipeline.finalize."):
            self._finalize = record
        elif name == "pipeline.log":
            self._logs.append(_log(position, record))
        elif name.startswith("step.") and record.get("stepId"):
            step = self._steps.get(record["stepId"])
            if step is None:
                step = self._steps[record["stepId"]] = StepFold(record["stepId"])
            step.add(record)

    def freeze(self) -> StoredRun:
        """Return the run as `history` shows it."""
        first, started, completed = self._first, self._started, self._completed
        return StoredRun(
            run_id=first["runId"],
            pipeline_id=first["pipelineId"],
            status=completed["payload"]["status"] if completed else "running",
            dry_run=started["payload"]["dryRun"] if started else False,
            started_at_ms=(started or first)["timestampMs"],
            finished_at_ms=completed["timestampMs"] if completed else None,
            duration_ms=completed.get("durationMs") if completed else None,
            event_count=self._event_count,
            log_count=len(self._logs),
            logs=tuple(self._logs),
            error=copy.deepcopy(completed.get("error")) if completed else None,
            correlation_id=first.get("correlationId"),
            parent_run_id=first.get("parentRunId") or None,
            item_key=first.get("itemKey"),
            iteration=copy.deepcopy(first.get("iteration")),
            definition_identity=copy.deepcopy(
                started["payload"].get("definitionIdentity") if started else None
            ),
            steps=tuple(step.freeze() for step in self._steps.values()),
        )


def _log(event_id: int, record: Mapping[str, Any]) -> StoredLog:
    return StoredLog(
        id=event_id,
        level=record["payload"]["level"],
        message=record["payload"].get("message", ""),
        timestamp_ms=record["timestampMs"],
        step_id=record.get("stepId") or None,
        attempt_id=record.get("attemptId") or None,
    )


def project_runs(
    records: Sequence[Mapping[str, Any]], ids: Iterable[int] | None = None
) -> list[StoredRun]:
    """Fold records into one `StoredRun` per run, in order of each run's first record.

    Args:
        records: valid trace records in write order (one stream may mix many runs).
        ids: each record's id (store row ids from `SqliteTraceStore.event_rows`); by
            default a record's position, from 0. A record whose id is not greater than
            the last one accepted is ignored, so a stream may be refreshed incrementally.

    Returns:
        The runs, as frozen `StoredRun`s.

    Raises:
        ValueError: when `ids` and `records` differ in length.
    """
    folds: dict[str, RunFold] = {}
    last: int | None = None
    numbers = range(len(records)) if ids is None else ids
    for event_id, record in zip(numbers, records, strict=True):
        if last is not None and event_id <= last:
            continue
        last = event_id
        fold = folds.get(record["runId"])
        if fold is None:
            fold = folds[record["runId"]] = RunFold(record)
        fold.add(record, event_id=event_id)
    return [fold.freeze() for fold in folds.values()]


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _safe(text: str) -> str:
    """Replace control and bidi-override characters so text cannot rewrite the terminal."""
    return _UNSAFE.sub(" ", text)


def _number(value: float) -> str:
    """Render a number as JavaScript does (`40`, not `40.0`)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _iso(ms: float) -> str:
    """Render epoch milliseconds as `2024-01-02T03:04:05.678Z`, as JavaScript does."""
    try:
        moment = _EPOCH + timedelta(milliseconds=int(ms))
    except OverflowError:
        return _number(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def format_run_list(
    runs: Iterable[StoredRun], failed_calls: Mapping[str, int] | None = None
) -> str:
    """Render one line per run: `<runId>  <pipelineId>  <status>  started <ISO>[  <N>ms]`.

    Runs are rendered in the order given; each line ends with a newline. A run listed in
    `failed_calls` (see `failed_call_counts`) ends with `  <n> failed call(s)`: an agent
    run can complete although some of its tool calls failed.
    """
    counts = failed_calls or {}
    lines = []
    for run in runs:
        duration = "" if run.duration_ms is None else f"  {_number(run.duration_ms)}ms"
        failed = counts.get(run.run_id, 0)
        calls = f"  {failed} failed call{'s' if failed != 1 else ''}" if failed else ""
        status = shown_status(run.status, run.error)
        lines.append(
            f"{_safe(run.run_id)}  {_safe(run.pipeline_id)}  {status}  "
            f"started {_iso(run.started_at_ms)}{duration}{calls}\n"
        )
    return "".join(lines)


def _shown_code(error: Mapping[str, Any]) -> str:
    """The code a person should see: a failed step's own code (`UNKNOWN_CITY`), if any.

    `TUBELESS_STEP_FAILED` only says a step raised; the `sourceCode` of what it raised
    (a tool's `ToolError` code) says why.
    """
    source = error.get("sourceCode")
    if error.get("code") == "TUBELESS_STEP_FAILED" and isinstance(source, str) and source:
        return source
    return str(error.get("code", "?"))


def format_run_detail(run: StoredRun) -> str:
    """Render one run: header lines, `Steps:`, `Logs:` and, after a failure, `Error:`.

    The `Error:` line shows the failed step's own code when it has one (see
    `_shown_code`), then the message.
    """
    lines = [
        f"Run {_safe(run.run_id)}",
        f"Pipeline {_safe(run.pipeline_id)}",
        f"Status {shown_status(run.status, run.error)}",
        f"Started {_iso(run.started_at_ms)}",
    ]
    if run.duration_ms is not None:
        lines.append(f"Duration {_number(run.duration_ms)}ms")
    lines += ["", "Steps:"]
    for step in run.steps:
        duration = "" if step.duration_ms is None else f"  {_number(step.duration_ms)}ms"
        lines.append(f"  {_safe(step.id)}  {step.status}{duration}")
    lines += ["", "Logs:"]
    lines += [f"  [{log.level}] {_safe(log.message)}" for log in run.logs]
    if run.error is not None:
        message = _safe(run.error.get("message", ""))
        lines += ["", "Error:", f"  {_safe(_shown_code(run.error))}  {message}"]
    return "\n".join(lines) + "\n"

"""One step's records folded into what it did: read live, or frozen into a `StoredStep`."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["StepFold", "StoredAttempt", "StoredStep"]

_TERMINAL = {
    "step.complete": "completed",
    "step.skipped": "skipped",
    "step.failed": "failed",
    "step.cancelled": "cancelled",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredAttempt:
    """The execution attempt of a step."""

    attempt_id: str
    """The attempt's id."""
    started_at_ms: float
    """When its first record was written."""
    status: str
    """`running`, then `completed`, `failed`, `skipped` or `cancelled`."""
    retries: tuple[float, ...] = ()
    """Attempt numbers above 1 reported through `report_attempt`."""
    finished_at_ms: float | None = None
    """When its terminal record was written."""
    duration_ms: float | None = None
    """Its duration, from the terminal record."""
    output_source: str | None = None
    """`override` when the output did not come from the handler."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{attemptId, startedAtMs, status, retries, durationMs?, finishedAtMs?, ...}`."""
        out: dict[str, Any] = {
            "attemptId": self.attempt_id,
            "startedAtMs": self.started_at_ms,
            "status": self.status,
            "retries": list(self.retries),
        }
        optional = (
            ("durationMs", self.duration_ms),
            ("finishedAtMs", self.finished_at_ms),
            ("outputSource", self.output_source),
        )
        out.update((key, value) for key, value in optional if value is not None)
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredStep:
    """One step of a stored run."""

    id: str
    """The step's id."""
    status: str
    """`planned`, `running`, `completed`, `failed`, `skipped` or `cancelled`."""
    name: str | None = None
    """The step's display name, from `step.planned`."""
    description: str | None = None
    """The step's description, from `step.planned`."""
    dependencies: tuple[str, ...] | None = None
    """Required dependencies, from `step.planned`."""
    optional_dependencies: tuple[str, ...] | None = None
    """Optional dependencies, from `step.planned`."""
    skip_after_failure_of: tuple[str, ...] | None = None
    """Failure gates, from `step.planned`."""
    nested_pipeline: Mapping[str, Any] | None = None
    """The child pipeline summary, from `step.planned`."""
    remote: Mapping[str, Any] | None = None
    """The remote engine, from `step.planned`."""
    started_at_ms: float | None = None
    """When it started running (or its terminal time minus its duration)."""
    finished_at_ms: float | None = None
    """When its terminal record was written."""
    duration_ms: float | None = None
    """Its duration, from the terminal record."""
    progress: Mapping[str, Any] | None = None
    """Its latest visible progress (trace wire form)."""
    attempt: StoredAttempt | None = None
    """Its execution attempt."""
    output_source: str | None = None
    """`override` when the output did not come from the handler."""

    def to_dict(self) -> dict[str, Any]:
        """Return the camelCase JSON form, leaving out absent fields."""
        out: dict[str, Any] = {"id": self.id, "status": self.status}
        fields: tuple[tuple[str, Any], ...] = (
            ("name", self.name),
            ("description", self.description),
            ("dependencies", _listed(self.dependencies)),
            ("optionalDependencies", _listed(self.optional_dependencies)),
            ("skipAfterFailureOf", _listed(self.skip_after_failure_of)),
            ("nestedPipeline", copy.deepcopy(self.nested_pipeline)),
            ("remote", copy.deepcopy(self.remote)),
            ("startedAtMs", self.started_at_ms),
            ("finishedAtMs", self.finished_at_ms),
            ("durationMs", self.duration_ms),
            ("progress", copy.deepcopy(self.progress)),
            ("attempt", None if self.attempt is None else self.attempt.to_dict()),
            ("outputSource", self.output_source),
        )
        out.update((key, value) for key, value in fields if value is not None)
        return out


def _listed(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


def _visible(progress: Mapping[str, Any]) -> bool:
    """Whether progress carries work information rather than an empty heartbeat."""
    total = progress.get("total")
    return bool(
        progress.get("message", "").strip()
        or progress.get("details")
        or (total is not None and total > 0)
        or progress.get("completed", 0) > 0
    )


class StepFold:
    """One step's records folded in as they arrive: the live reporters read it as it grows.

    `freeze()` gives the `StoredStep` that `history` shows; the read-only properties give
    the same facts to a live view, plus `ended`, the terminal record itself (its `error`
    says why a step failed, its payload why it was skipped).
    """

    def __init__(self, step_id: str) -> None:
        self._step: dict[str, Any] = {"id": step_id, "status": "planned"}
        self._attempt: dict[str, Any] | None = None
        self._ended: Mapping[str, Any] | None = None
        self._failed_details: set[str] = set()

    @property
    def id(self) -> str:
        """The step's id."""
        return str(self._step["id"])

    @property
    def status(self) -> str:
        """`planned`, `running`, `completed`, `failed`, `skipped` or `cancelled`."""
        return str(self._step["status"])

    @property
    def name(self) -> str | None:
        """The step's display name, from `step.planned`."""
        return self._step.get("name")

    @property
    def description(self) -> str | None:
        """The step's description, from `step.planned`."""
        return self._step.get("description")

    @property
    def started_at_ms(self) -> float | None:
        """When it started running (or its terminal time minus its duration)."""
        return self._step.get("started_at_ms")

    @property
    def duration_ms(self) -> float | None:
        """Its duration, from the terminal record."""
        return self._step.get("duration_ms")

    @property
    def progress(self) -> Mapping[str, Any] | None:
        """Its latest visible progress, else its first (trace wire form)."""
        return self._step.get("progress")

    @property
    def failed_detail_count(self) -> int:
        """How many distinct detail rows (an agent's tool calls) have shown as failed.

        A row counts once however many progress snapshots show it; a group row (a turn, a
        batch) is not counted when rows inside it are, even once it is shown collapsed.
        The steps of an iteration (a turn's `decide`, `calls` and `reduce`) are not
        counted: a failed `decide` is no failed call.
        """
        return len(self._failed_details)

    @property
    def nested_pipeline(self) -> Mapping[str, Any] | None:
        """The child pipeline summary from `step.planned` (`mode` `iterate`, ...)."""
        return self._step.get("nested_pipeline")

    @property
    def ended(self) -> Mapping[str, Any] | None:
        """Its terminal record (`step.complete`, `.failed`, `.skipped` or `.cancelled`)."""
        return self._ended

    def add(self, record: Mapping[str, Any]) -> None:
        """Fold one `step.*` record of this step in."""
        name, payload = record["name"], record.get("payload") or {}
        if name == "step.planned":
            self._plan(payload)
            return
        if name == "step.artifact":
            return  # artifacts are not projected yet
        if payload.get("outputSource"):
            self._step["output_source"] = payload["outputSource"]
        if record.get("attemptId"):
            self._add_attempt(record)
        if name == "step.running":
            if self._ended is not None:
                return  # a late progress record never reopens a settled step
            self._step["status"] = "running"
            self._step.setdefault("started_at_ms", record["timestampMs"])
            self._progress(payload.get("progress"))
        elif name in _TERMINAL:
            self._ended = record
            duration = record.get("durationMs")
            self._step.update(
                status=_TERMINAL[name],
                finished_at_ms=record["timestampMs"],
                duration_ms=duration,
            )
            if duration is not None:
                self._step["started_at_ms"] = record["timestampMs"] - duration

    def _plan(self, payload: Mapping[str, Any]) -> None:
        self._step.update(
            name=payload.get("name"),
            description=payload.get("description"),
            dependencies=tuple(payload.get("dependencies", ())),
            optional_dependencies=tuple(payload.get("optionalDependencies", ())),
            skip_after_failure_of=tuple(payload.get("skipAfterFailureOf", ())),
            nested_pipeline=copy.deepcopy(payload.get("nestedPipeline")),
            remote=copy.deepcopy(payload.get("remote")),
        )

    def _add_attempt(self, record: Mapping[str, Any]) -> None:
        attempt = self._attempt
        if attempt is None:
            attempt = self._attempt = {
                "attempt_id": record["attemptId"],
                "started_at_ms": record["timestampMs"],
                "status": "running",
                "retries": [],
            }
        if "output_source" in self._step:
            attempt["output_source"] = self._step["output_source"]
        if record["name"] == "step.attempted" and record["payload"]["attempt"] > 1:
            attempt["retries"].append(record["payload"]["attempt"])
        if record["name"] in _TERMINAL:
            attempt.update(
                status=_TERMINAL[record["name"]],
                finished_at_ms=record["timestampMs"],
                duration_ms=record.get("durationMs"),
            )

    def _progress(self, progress: Mapping[str, Any] | None) -> None:
        if progress is None:
            return
        copied = copy.deepcopy(dict(progress))
        self._count_failed(copied.get("details"))
        if "details" in copied and "detailCount" not in copied:
            copied["detailCount"] = len(copied["details"])
        if "progress" not in self._step or _visible(copied):
            self._step["progress"] = copied

    def _count_failed(self, details: object) -> None:
        if not isinstance(details, list):
            return
        rows = [row for row in details if isinstance(row, Mapping)]
        ids = [str(row.get("id", "")) for row in rows]
        nested = self.nested_pipeline
        iterate = isinstance(nested, Mapping) and nested.get("mode") == "iterate"
        for row, row_id in zip(rows, ids, strict=True):
            if row.get("status") != "failed" or not row_id:
                continue
            if iterate and row.get("depth") == 1:
                continue  # an iteration's own step (an agent's `decide`), not a call in it
            if any(other.startswith(f"{row_id}/") for other in ids):
                continue  # a group: the rows inside it say what failed
            counted = self._failed_details
            if any(seen.startswith(f"{row_id}/") for seen in counted):
                continue  # a group shown collapsed after a row inside it was counted
            # A row inside a group counted while collapsed replaces the group.
            counted.difference_update([seen for seen in counted if row_id.startswith(f"{seen}/")])
            counted.add(row_id)

    def freeze(self) -> StoredStep:
        """Return the folded step."""
        attempt = None
        if self._attempt is not None:
            attempt = StoredAttempt(**{**self._attempt, "retries": tuple(self._attempt["retries"])})
        return StoredStep(**self._step, attempt=attempt)

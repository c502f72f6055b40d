"""The trace record rules JSON Schema cannot express, checked after the schema.

Each rule assumes the record already matches its kind's schema, and returns the first
problem as `(json_path, message)`, or `None`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tubeless.trace._encoding import json_text

__all__ = [
    "TRACE_ATTRIBUTE_LIMIT",
    "TRACE_CAUSE_DEPTH_LIMIT",
    "TRACE_DETAIL_BYTE_LIMIT",
    "TRACE_FAN_OUT_CAUSE_DEPTH_LIMIT",
    "TRACE_MESSAGE_LIMIT",
    "TRACE_RECORD_BYTE_LIMIT",
    "TRACE_SNAPSHOT_BYTE_LIMIT",
    "json_bytes",
    "record_problem",
    "record_size_problem",
    "relation_problem",
]

TRACE_DETAIL_BYTE_LIMIT = 262144
"""At most this many bytes of compact UTF-8 JSON for a progress record's `details`."""
TRACE_SNAPSHOT_BYTE_LIMIT = 262144
"""At most this many bytes of compact UTF-8 JSON for a definition snapshot."""
TRACE_CAUSE_DEPTH_LIMIT = 16
"""At most this many links in an error's `cause` chain."""
TRACE_FAN_OUT_CAUSE_DEPTH_LIMIT = 9
"""At most this many links in a cause chain inside fan-out diagnostics."""

TRACE_RECORD_BYTE_LIMIT = 1024 * 1024
"""At most this many bytes of compact UTF-8 JSON for a whole record: one NDJSON line."""
TRACE_MESSAGE_LIMIT = 16384
"""At most this many characters in a message (error, cause, log, progress, skip)."""
TRACE_ATTRIBUTE_LIMIT = 128
"""At most this many attributes in a `step.attempted` record."""

Problem = tuple[str, str]
Record = Mapping[str, Any]


def json_bytes(value: object) -> int:
    """The size of `value` as compact UTF-8 JSON, the measure of the byte limits."""
    return len(json_text(value).encode("utf-8"))


def record_size_problem(record: Record) -> Problem | None:
    """Return why `record` cannot be one NDJSON line the reader accepts, or `None`.

    The record must encode as UTF-8 (no lone surrogates) and hold at most
    `TRACE_RECORD_BYTE_LIMIT` bytes of compact JSON. `validate_record` applies this to
    every record it is given; a run's own records are bounded as they are built, and the
    NDJSON writer measures each line it writes.
    """
    try:
        text = json_text(record)
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "$", "holds a lone surrogate, which is not UTF-8 text"
    except ValueError as error:  # an integer too long to write, say
        return "$", f"cannot be written as JSON ({type(error).__name__})"
    if size > TRACE_RECORD_BYTE_LIMIT:
        limit = TRACE_RECORD_BYTE_LIMIT
        return "$", f"{size} bytes of JSON exceed the {limit}-byte record limit"
    return None


def _attempted_problem(record: Record) -> Problem | None:
    count = len(record["payload"]["attributes"])
    if count > TRACE_ATTRIBUTE_LIMIT:
        path = "$.payload.attributes"
        return path, f"{count} attributes exceed the limit of {TRACE_ATTRIBUTE_LIMIT}"
    return None


def _chain_length(cause: Mapping[str, Any]) -> int:
    length = 1
    while "cause" in cause:
        cause = cause["cause"]
        length += 1
    return length


def relation_problem(record: Record) -> Problem | None:
    """The rule between shared fields: `iteration` only in version 3, naming the parent run."""
    iteration = record.get("iteration")
    if iteration is None:
        return None
    if record["version"] == 2:
        return "$.iteration", "version 2 records may not carry iteration"
    if iteration["runId"] != record.get("parentRunId"):
        return "$.iteration.runId", f"{iteration['runId']!r} must equal parentRunId"
    return None


def _identity_version_problem(snapshot: Record) -> Problem | None:
    version = snapshot["identity"]["version"]
    steps = snapshot["steps"]
    if version != 3:
        nested_v3 = any(
            step.get("nestedPipeline", {}).get("identity", {}).get("version") == 3 for step in steps
        )
        if "metadata" in snapshot or nested_v3 or any("metadata" in step for step in steps):
            return "$.payload.definitionSnapshot", "graph metadata requires identity version 3"
    if version == 1:
        for index, step in enumerate(steps):
            nested = step.get("nestedPipeline")
            if nested and (
                nested["mode"] == "iterate" or nested.get("identity", {}).get("version") == 2
            ):
                path = f"$.payload.definitionSnapshot.steps[{index}].nestedPipeline"
                return path, "iteration requires identity version 2"
    return None


def _started_problem(record: Record) -> Problem | None:
    payload = record["payload"]
    identity = payload.get("definitionIdentity")
    if record["version"] == 2 and identity is not None and identity["version"] != 1:
        return "$.payload.definitionIdentity.version", "trace version 2 requires identity 1"
    snapshot = payload.get("definitionSnapshot")
    if snapshot is None:
        return None
    if snapshot["identity"] != identity:
        path = "$.payload.definitionSnapshot.identity"
        return path, "must equal payload.definitionIdentity"
    problem = _identity_version_problem(snapshot)
    if problem is None and json_bytes(snapshot) > TRACE_SNAPSHOT_BYTE_LIMIT:
        limit = TRACE_SNAPSHOT_BYTE_LIMIT
        return "$.payload.definitionSnapshot", f"exceeds the {limit}-byte snapshot limit"
    return problem


def _planned_problem(record: Record) -> Problem | None:
    nested = record["payload"].get("nestedPipeline")
    if nested is None:
        return None
    if record["version"] == 2 and nested["mode"] == "iterate":
        return "$.payload.nestedPipeline.mode", "iteration requires trace version 3"
    if nested["stepCount"] < len(nested["stepIds"]):
        count = len(nested["stepIds"])
        return "$.payload.nestedPipeline.stepCount", f"must be at least len(stepIds) ({count})"
    return None


def _running_problem(record: Record) -> Problem | None:
    progress = record["payload"].get("progress")
    details = None if progress is None else progress.get("details")
    if details is None:
        return None
    count = progress.get("detailCount")
    if count is not None and count < len(details):
        path = "$.payload.progress.detailCount"
        return path, f"{count} is less than the number of details ({len(details)})"
    size = json_bytes(details)
    if size > TRACE_DETAIL_BYTE_LIMIT:
        limit = TRACE_DETAIL_BYTE_LIMIT
        return "$.payload.progress.details", f"{size} bytes of JSON exceed the {limit}-byte limit"
    return None


def _fan_out_problem(fan_out: Record) -> Problem | None:
    failures = fan_out["failures"]
    if fan_out["failureCount"] - len(failures) != fan_out["omittedFailureCount"]:
        path = "$.error.fanOut.omittedFailureCount"
        return path, "must equal failureCount minus the number of failures"
    limit = TRACE_FAN_OUT_CAUSE_DEPTH_LIMIT
    previous = -1
    for index, failure in enumerate(failures):
        if failure["index"] <= previous:
            return f"$.error.fanOut.failures[{index}].index", "indexes must increase"
        previous = failure["index"]
        if _chain_length(failure["error"]) > limit:
            return f"$.error.fanOut.failures[{index}].error", f"is deeper than {limit} levels"
    scheduler = fan_out.get("schedulerError")
    if scheduler is not None and _chain_length(scheduler) > limit:
        return "$.error.fanOut.schedulerError", f"is deeper than {limit} levels"
    return None


def _error_problem(record: Record) -> Problem | None:
    error = record.get("error")
    if error is None:
        return None
    cause = error.get("cause")
    if cause is not None and _chain_length(cause) > TRACE_CAUSE_DEPTH_LIMIT:
        return "$.error.cause", f"is deeper than {TRACE_CAUSE_DEPTH_LIMIT} levels"
    fan_out = error.get("fanOut")
    return None if fan_out is None else _fan_out_problem(fan_out)


_KIND_RULES: Mapping[str, Callable[[Record], Problem | None]] = {
    "pipeline.started": _started_problem,
    "step.planned": _planned_problem,
    "step.running": _running_problem,
    "step.attempted": _attempted_problem,
    "step.failed": _error_problem,
    "step.cancelled": _error_problem,
    "pipeline.finalize.failed": _error_problem,
    "pipeline.completed": _error_problem,
}


def record_problem(record: Record, *, payload_checked: bool = False) -> Problem | None:
    """Return the first rule `record` breaks (it already matches its schema), or `None`.

    The size rule is separate (`record_size_problem`): it costs an encoding of the whole
    record, which a run's records need not pay. With `payload_checked` the payload's own
    rules are skipped too: every kind rule of a kind whose payload the writer checks when
    building it (`pipeline.started`, `step.planned`, `step.running`, `step.attempted`)
    looks only at the payload.
    """
    problem = relation_problem(record)
    if problem is not None or payload_checked:
        return problem
    rule = _KIND_RULES.get(record["name"])
    try:
        return None if rule is None else rule(record)
    except ValueError:  # a byte limit met text it cannot encode (a lone surrogate, say)
        return "$", "holds text that cannot be written as UTF-8 JSON"

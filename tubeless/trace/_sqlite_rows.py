"""The row layout of the SQLite trace store: a record to columns and back, exactly.

The shared `pipeline_run_events` columns (the TypeScript tubeless writes the same table)
lose two things: the `iteration` relation (no column), and the JSON number type of
`version`/`timestampMs` (INTEGER affinity turns `5.0` into `5`) and of `durationMs` (REAL
affinity turns `5` into `5.0`). The extra column `extra_json` holds
exactly those fields, only when needed, so a row read back equals the record written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tubeless.errors import TraceRecordError
from tubeless.trace._encoding import json_text, payload_json, shared_field_json

__all__ = [
    "COLUMNS",
    "INSERT",
    "Row",
    "check_row_text",
    "record_row",
    "row_record",
    "store_row",
]

COLUMNS = (
    "version, run_id, correlation_id, parent_run_id, pipeline_id, step_id, attempt_id, "
    "item_key, event_name, timestamp_ms, duration_ms, payload_json, error_json, extra_json"
)
INSERT = f"INSERT INTO pipeline_run_events ({COLUMNS}) VALUES ({', '.join('?' * 14)})"
_TEXT_FIELDS = (
    ("correlationId", 2),
    ("parentRunId", 3),
    ("itemKey", 7),
    ("stepId", 5),
    ("attemptId", 6),
)
_INT64 = 2**63

Row = tuple[Any, ...]


def _column_number(value: int | float, integer_column: bool) -> tuple[int | float, bool]:
    """Return what to store in a numeric column, and whether the column loses the type."""
    if isinstance(value, int):
        if integer_column and -_INT64 <= value < _INT64:
            return value, False
        try:
            return float(value), True
        except OverflowError:
            return 0.0, True
    if integer_column:
        return value, value.is_integer()  # SQLite stores an integral REAL as INTEGER here
    return value, False


def record_row(record: dict[str, Any]) -> Row:
    """Return the table row (columns in `COLUMNS` order) that stores `record` exactly."""
    # `extra_json`'s members, in this order: `iteration`, then the fields a column loses.
    extra: list[str] = []
    if "iteration" in record:
        extra.append(f'"iteration":{shared_field_json(record, "iteration")}')
    version = record["version"]
    if type(version) is not int:
        version, lossy = _column_number(version, True)
        if lossy:
            extra.append(f'"version":{json_text(record["version"])}')
    timestamp = record["timestampMs"]
    if type(timestamp) is not int or not -_INT64 <= timestamp < _INT64:
        timestamp, lossy = _column_number(timestamp, True)
        if lossy:
            extra.append(f'"timestampMs":{json_text(record["timestampMs"])}')
    duration = record.get("durationMs")
    if duration is not None and type(duration) is not float:
        duration, lossy = _column_number(duration, False)
        if lossy:
            extra.append(f'"durationMs":{json_text(record["durationMs"])}')
    error = record.get("error")
    return (
        version,
        record["runId"],
        record.get("correlationId"),
        record.get("parentRunId"),
        record["pipelineId"],
        record.get("stepId"),
        record.get("attemptId"),
        record.get("itemKey"),
        record["name"],
        timestamp,
        duration,
        payload_json(record),
        None if error is None else json_text(error),
        f"{{{','.join(extra)}}}" if extra else None,
    )


def store_row(record: dict[str, Any]) -> Row:
    """`record_row(record)`, refused as `check_row_text` refuses it: what the store buffers.

    Raises:
        TraceRecordError: as `check_row_text` does.
    """
    row = record_row(record)
    check_row_text(row)
    return row


def check_row_text(row: Row) -> None:
    """Refuse a row holding text SQLite cannot store as UTF-8 (a lone surrogate).

    One such row would fail the whole batch it is committed with.
    """
    for value in row:
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise TraceRecordError(
                    "Invalid trace record at $: holds a lone surrogate, which is not UTF-8 text"
                ) from None


def row_record(row: Sequence[Any]) -> dict[str, Any]:
    """Rebuild the record a row (`id` first, then `COLUMNS`) stores."""
    record: dict[str, Any] = {
        "version": row[1],
        "name": row[9],
        "pipelineId": row[5],
        "runId": row[2],
    }
    for key, column in _TEXT_FIELDS:
        if row[column + 1] is not None:
            record[key] = row[column + 1]
    record["timestampMs"] = row[10]
    if row[11] is not None:
        record["durationMs"] = row[11]
    if row[13] is not None:
        record["error"] = json.loads(row[13])
    record["payload"] = json.loads(row[12])
    if row[14] is not None:
        record.update(json.loads(row[14]))
    return record

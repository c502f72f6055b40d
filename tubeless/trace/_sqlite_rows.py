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
from tubeless.trace._wire import RecordHead, TraceRecord, payload_json, shared_field_json

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


# One encoder, built once: `json.dumps` with options builds a new encoder per call.
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


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
    extra: dict[str, Any] = {}
    if "iteration" in record:
        extra["iteration"] = record["iteration"]
    version = record["version"]
    if type(version) is not int:
        version, lossy = _column_number(version, True)
        if lossy:
            extra["version"] = record["version"]
    timestamp = record["timestampMs"]
    if type(timestamp) is not int or not -_INT64 <= timestamp < _INT64:
        timestamp, lossy = _column_number(timestamp, True)
        if lossy:
            extra["timestampMs"] = record["timestampMs"]
    duration = record.get("durationMs")
    if duration is not None and type(duration) is not float:
        duration, lossy = _column_number(duration, False)
        if lossy:
            extra["durationMs"] = record["durationMs"]
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
        None if error is None else _dumps(error),
        _extra_json(record, extra),
    )


def _extra_json(record: dict[str, Any], extra: dict[str, Any]) -> str | None:
    """`extra`'s JSON; for a run's record, its shared `iteration` is encoded once per run."""
    if not extra:
        return None
    if type(record) is not TraceRecord:
        return _dumps(extra)
    parts = []
    for key, value in extra.items():  # plain ASCII names: "iteration", "durationMs", ...
        if key == "iteration":
            text = shared_field_json(record, key)
        elif type(value) is int:
            text = int.__repr__(value)
        else:
            text = _dumps(value)
        parts.append(f'"{key}":{text}')
    return f"{{{','.join(parts)}}}"


def store_row(record: dict[str, Any]) -> Row:
    """`record_row(record)`, refused as `check_row_text` refuses it: what the store buffers.

    A run's record takes the columns of its run's shared fields from its head, where they
    are worked out and checked once per run; only the record's own text is checked here.

    Raises:
        TraceRecordError: as `check_row_text` does.
    """
    if type(record) is TraceRecord:
        head: RecordHead | None = getattr(record, "_head", None)
        row = None if head is None else _run_row(record, head)
        if row is not None:
            return row
    row = record_row(record)
    check_row_text(row)
    return row


_HeadColumns = tuple[int, str, str | None, str | None, str, str | None, str | None]
"""`version`, `run_id`, `correlation_id`, `parent_run_id`, `pipeline_id`, `item_key`, and
the `"iteration":...` text that starts `extra_json` (`None` without an iteration)."""


def _head_columns(head: RecordHead) -> _HeadColumns | None:
    """The columns `head`'s fields give every row of the run; `None` if any is unusual."""
    columns: _HeadColumns | tuple[()] | None = head.row_columns
    if columns is None:
        fields = head.fields
        version = fields["version"]
        iteration = None
        if "iteration" in fields:
            iteration = f'"iteration":{head.field_json("iteration")}'
        columns = (
            version,
            fields["runId"],
            fields.get("correlationId"),
            fields.get("parentRunId"),
            fields["pipelineId"],
            fields.get("itemKey"),
            iteration,
        )
        try:
            check_row_text(columns)
        except TraceRecordError:
            columns = ()
        if type(version) is not int or not -_INT64 <= version < _INT64:
            columns = ()
        head.row_columns = columns
    return columns or None


def _run_row(record: TraceRecord, head: RecordHead) -> Row | None:
    """`store_row` of a run's record, or `None` when it takes the general path."""
    columns = _head_columns(head)
    timestamp = record["timestampMs"]
    if columns is None or type(timestamp) is not int or not -_INT64 <= timestamp < _INT64:
        return None
    version, run_id, correlation_id, parent_run_id, pipeline_id, item_key, iteration = columns
    duration = record.get("durationMs")
    if duration is None or type(duration) is float:
        extra = None if iteration is None else f"{{{iteration}}}"
    elif type(duration) is int and -_INT64 <= duration < _INT64:
        # A REAL column would read an int duration back as a float: `extra_json` keeps it.
        text = f'"durationMs":{int.__repr__(duration)}'
        extra = f"{{{text}}}" if iteration is None else f"{{{iteration},{text}}}"
        duration = float(duration)
    else:
        return None
    step_id, attempt_id = record.get("stepId"), record.get("attemptId")
    payload = payload_json(record)
    error = record.get("error")
    error_text = None if error is None else _dumps(error)
    check_row_text((step_id, attempt_id, payload, error_text))
    return (
        version,
        run_id,
        correlation_id,
        parent_run_id,
        pipeline_id,
        step_id,
        attempt_id,
        item_key,
        record["name"],
        timestamp,
        duration,
        payload,
        error_text,
        extra,
    )


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

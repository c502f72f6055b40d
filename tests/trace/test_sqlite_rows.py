"""The SQLite row layout: which fields need the extra column."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import TraceRecordError
from tubeless.trace._encoding import RecordHead
from tubeless.trace._sqlite_rows import COLUMNS, record_row, row_record, store_row

MakeRecord = Callable[..., dict[str, Any]]
_EXTRA = COLUMNS.split(", ").index("extra_json")


def test_typical_records_need_no_extra_column(make_record: MakeRecord) -> None:
    """Int timestamps, float durations and no iteration fit the reference's columns."""
    record = make_record("step.complete", durationMs=12.5)
    assert record_row(record)[_EXTRA] is None


def test_the_extra_column_holds_only_what_the_columns_lose(make_record: MakeRecord) -> None:
    """`iteration`, an integral float timestamp and an int duration go to `extra_json`."""
    record = make_record("step.running", timestampMs=5.0)
    extra = json.loads(record_row(record)[_EXTRA])
    assert extra == {"iteration": record["iteration"], "timestampMs": 5.0}
    record = make_record("step.complete", durationMs=12)
    assert json.loads(record_row(record)[_EXTRA]) == {"durationMs": 12}


def test_a_row_rebuilds_its_record(make_record: MakeRecord) -> None:
    """Reading a row's columns back gives the record, absent fields left out."""
    record = make_record("step.failed")
    row = (7, *record_row(record))
    assert row_record(row) == record


def test_a_run_record_row_matches_the_plain_row() -> None:
    """A run's record (shared fields encoded once) gives the row its plain copy gives."""
    iteration = {"runId": "parent", "stepId": "loop", "attemptId": "parent:a1", "index": 2}
    head = RecordHead(
        {"pipelineId": "p", "runId": "r", "parentRunId": "parent", "iteration": iteration}
    )
    for duration in (0, 7, 2.5, 2**70, None):
        record = head.record("step.complete")
        record["timestampMs"] = 5
        record["stepId"] = "s"
        record["attemptId"] = "r:a1"
        if duration is not None:
            record["durationMs"] = duration
        record["payload"] = {"status": "completed", "é": [1, 2.0]}
        assert record_row(record) == record_row(dict(record))
        assert store_row(record) == record_row(dict(record))


def test_a_run_record_row_without_iteration_matches_the_plain_row() -> None:
    """The store's row of a run's record equals the plain one for every shared field."""
    head = RecordHead({"pipelineId": "p", "runId": "r", "correlationId": "c", "itemKey": "k"})
    for timestamp in (5, 2**64, 5.5):
        record = head.record("step.failed")
        record["timestampMs"] = timestamp
        record["stepId"] = "s"
        record["durationMs"] = 3
        record["error"] = {"message": "no", "code": "X"}
        record["payload"] = {}
        assert store_row(record) == record_row(dict(record))


def test_the_store_refuses_text_sqlite_cannot_keep() -> None:
    """A lone surrogate is refused in a run's shared fields as in its own, like any record."""
    for shared, own in (({"itemKey": "\ud800"}, "s"), ({}, "\udfff")):
        head = RecordHead({"pipelineId": "p", "runId": "r", **shared})
        record = head.record("step.running")
        record["timestampMs"] = 5
        record["stepId"] = own
        record["payload"] = {}
        for candidate in (record, dict(record)):
            with pytest.raises(TraceRecordError, match="lone surrogate"):
                store_row(candidate)

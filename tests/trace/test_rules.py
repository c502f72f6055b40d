"""The record rules JSON Schema cannot express, as `validate_record` applies them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import TraceRecordError
from tubeless.trace import TRACE_DETAIL_BYTE_LIMIT, validate_record

MakeRecord = Callable[..., dict[str, Any]]


def _rejected(record: dict[str, Any]) -> str:
    with pytest.raises(TraceRecordError) as caught:
        validate_record(record)
    return str(caught.value)


def test_iteration_must_match_the_parent_run(make_record: MakeRecord) -> None:
    """`iteration.runId` must equal `parentRunId`."""
    message = _rejected(make_record("step.running", parentRunId="someone-else"))
    assert "step.running" in message
    assert "$.iteration.runId" in message
    assert "parentRunId" in message


def test_iteration_without_a_parent_run_is_rejected(make_record: MakeRecord) -> None:
    """A record with `iteration` but no `parentRunId` is rejected."""
    record = make_record("step.running")
    del record["parentRunId"]
    assert "$.iteration.runId" in _rejected(record)


def test_version_two_may_not_carry_iteration(make_record: MakeRecord) -> None:
    """Version 2 records predate the iteration relation."""
    assert "version 2" in _rejected(make_record("step.running", version=2))


def test_version_two_may_not_plan_iterate(make_record: MakeRecord) -> None:
    """A version 2 record cannot describe an iterate child."""
    message = _rejected(make_record("step.planned", version=2))
    assert "$.payload.nestedPipeline.mode" in message


def test_version_two_requires_identity_version_one(make_record: MakeRecord) -> None:
    """A version 2 `pipeline.started` carries only a version 1 identity."""
    record = make_record("pipeline.started", version=2)
    del record["payload"]["definitionSnapshot"]
    assert "$.payload.definitionIdentity.version" in _rejected(record)


def test_details_over_the_byte_limit_are_rejected(make_record: MakeRecord) -> None:
    """Detail rows are capped at 256 KiB of compact UTF-8 JSON."""
    record = make_record("step.running")
    progress = record["payload"]["progress"]
    row_text = "é" * 1500  # two bytes each in UTF-8
    progress["details"] = [{"id": f"r{index}", "name": row_text} for index in range(100)]
    progress["detailCount"] = 100
    message = _rejected(record)
    assert "$.payload.progress.details" in message
    assert str(TRACE_DETAIL_BYTE_LIMIT) in message
    progress["details"] = progress["details"][:80]
    validate_record(record)


def test_detail_count_covers_the_retained_rows(make_record: MakeRecord) -> None:
    """`detailCount` may exceed the retained rows but never fall short of them."""
    record = make_record("step.running")
    record["payload"]["progress"]["detailCount"] = 1
    assert "$.payload.progress.detailCount" in _rejected(record)
    del record["payload"]["progress"]["detailCount"]
    validate_record(record)


def test_nested_step_count_covers_the_step_ids(make_record: MakeRecord) -> None:
    """A planned child's `stepCount` is at least the number of retained `stepIds`."""
    record = make_record("step.planned")
    record["payload"]["nestedPipeline"]["stepCount"] = 2
    assert "$.payload.nestedPipeline.stepCount" in _rejected(record)


def test_the_snapshot_identity_must_equal_the_run_identity(make_record: MakeRecord) -> None:
    """`definitionSnapshot.identity` must equal `definitionIdentity`, and needs it present."""
    record = make_record("pipeline.started")
    snapshot = record["payload"]["definitionSnapshot"]
    snapshot["identity"] = {**snapshot["identity"], "implementationVersion": "other"}
    assert "$.payload.definitionSnapshot.identity" in _rejected(record)
    record = make_record("pipeline.started")
    del record["payload"]["definitionIdentity"]
    assert "$.payload.definitionSnapshot.identity" in _rejected(record)


def test_a_snapshot_over_256_kib_is_rejected(make_record: MakeRecord) -> None:
    """Definition snapshots are capped at 256 KiB of compact UTF-8 JSON."""
    record = make_record("pipeline.started")
    step = record["payload"]["definitionSnapshot"]["steps"][0]
    step["dependencies"] = [f"{index:04d}" + "d" * 4000 for index in range(66)]
    assert "exceeds the 262144-byte" in _rejected(record)


def test_iterate_needs_identity_version_two(make_record: MakeRecord) -> None:
    """A version 1 identity cannot describe an iterate child."""
    record = make_record("pipeline.started")
    for identity in (
        record["payload"]["definitionIdentity"],
        record["payload"]["definitionSnapshot"]["identity"],
    ):
        identity["version"] = 1
    assert "steps[0].nestedPipeline" in _rejected(record)


def test_graph_metadata_needs_identity_version_three(make_record: MakeRecord) -> None:
    """Snapshot metadata is only allowed with identity version 3."""
    record = make_record("pipeline.started")
    record["payload"]["definitionSnapshot"]["metadata"] = {"owner": "data"}
    assert "identity version 3" in _rejected(record)
    for identity in (
        record["payload"]["definitionIdentity"],
        record["payload"]["definitionSnapshot"]["identity"],
    ):
        identity["version"] = 3
    validate_record(record)


def test_snapshot_internals_may_grow(make_record: MakeRecord) -> None:
    """Unknown snapshot fields are allowed when they hold JSON values."""
    record = make_record("pipeline.started")
    record["payload"]["definitionSnapshot"]["steps"][0]["cache"] = {"ttl": 3}
    validate_record(record)
    record["payload"]["definitionSnapshot"]["steps"][0]["cache"] = {1, 2}
    assert "$.payload.definitionSnapshot" in _rejected(record)


def test_cause_chains_stop_at_16_levels(make_record: MakeRecord) -> None:
    """An error's cause chain holds at most 16 links."""
    record = make_record("pipeline.completed")
    cause: dict[str, Any] = {"message": "deepest"}
    for level in range(15):
        cause = {"message": f"level {level}", "cause": cause}
    record["error"]["cause"] = cause
    validate_record(record)
    record["error"]["cause"] = {"message": "one more", "cause": cause}
    assert "$.error.cause" in _rejected(record)


def test_fan_out_counts_must_add_up(make_record: MakeRecord) -> None:
    """`failureCount - len(failures)` must equal `omittedFailureCount`."""
    record = make_record("step.failed")
    record["error"]["fanOut"]["omittedFailureCount"] = 0
    assert "$.error.fanOut.omittedFailureCount" in _rejected(record)


def test_fan_out_failures_keep_input_order(make_record: MakeRecord) -> None:
    """Fan-out failure indexes strictly increase."""
    record = make_record("step.failed")
    record["error"]["fanOut"]["failures"][1]["index"] = 1
    assert "$.error.fanOut.failures[1].index" in _rejected(record)


def test_fan_out_causes_stop_at_9_levels(make_record: MakeRecord) -> None:
    """A fan-out failure's cause chain holds at most 9 links of short strings."""
    record = make_record("step.failed")
    cause: dict[str, Any] = {"message": "deepest"}
    for level in range(9):
        cause = {"message": f"level {level}", "cause": cause}
    record["error"]["fanOut"]["failures"][0]["error"] = cause
    assert "$.error.fanOut.failures[0].error" in _rejected(record)
    record["error"]["fanOut"]["failures"][0]["error"] = {"message": "x" * 1025}
    assert "$.error.fanOut.failures[0].error.message" in _rejected(record)


def test_absurdly_deep_values_are_rejected_not_crashing(make_record: MakeRecord) -> None:
    """A cause chain deeper than the interpreter's recursion limit is a record error."""
    record = make_record("pipeline.completed")
    cause: dict[str, Any] = {"message": "deepest"}
    for _ in range(100_000):
        cause = {"message": "", "cause": cause}
    record["error"]["cause"] = cause
    assert "nested too deeply" in _rejected(record)

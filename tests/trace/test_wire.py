"""The trace v3 JSON Schema and `validate_record`'s schema checks."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tubeless.errors import PIPELINE_ERROR_CODES, TraceRecordError
from tubeless.schema._compiled import compile_checker
from tubeless.trace import (
    TRACE_LIST_LIMIT,
    TRACE_RECORD_NAMES,
    TRACE_STRING_LIMIT,
    TRACE_VERSION,
    load_trace_schema,
    validate_record,
)
from tubeless.trace._wire import (
    SHARED_FIELDS,
    check_own_fields,
    check_record,
    shared_fields_valid,
)

Records = dict[str, dict[str, Any]]
MakeRecord = Callable[..., dict[str, Any]]


def test_every_kind_is_accepted(every_kind: Records) -> None:
    """A hand-built record of each of the fourteen kinds passes validation."""
    assert sorted(every_kind) == sorted(TRACE_RECORD_NAMES)
    for record in every_kind.values():
        validate_record(record)


def test_minimal_records_are_accepted(make_record: MakeRecord) -> None:
    """Records without any optional field pass, including an empty log message."""
    base = {"version": 3, "pipelineId": "p", "runId": "r", "timestampMs": 0}
    validate_record({**base, "name": "pipeline.log", "payload": {"level": "log"}})
    validate_record(
        {**base, "name": "step.running", "stepId": "s", "attemptId": "a", "payload": {}}
    )
    validate_record({**base, "name": "pipeline.finalize.started", "payload": {}})
    validate_record(
        {
            **base,
            "name": "pipeline.started",
            "payload": {"dryRun": True, "planOk": False, "stepCount": 0, "targetIds": []},
        }
    )


def test_version_two_records_are_read(make_record: MakeRecord) -> None:
    """Readers accept version 2 records that carry no iteration."""
    validate_record(make_record("step.complete", version=2))


def test_the_shipped_schema_is_valid_draft_2020_12() -> None:
    """The JSON file is a valid draft 2020-12 schema and ships inside the package."""
    text = resources.files("tubeless.trace").joinpath("trace-v3.schema.json").read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert load_trace_schema() == schema


def test_load_trace_schema_returns_a_fresh_copy() -> None:
    """Changing the returned dict does not change what validation uses."""
    schema = load_trace_schema()
    schema["$defs"]["records"].clear()
    assert load_trace_schema()["$defs"]["records"]


def test_the_error_code_enum_is_the_catalog() -> None:
    """The schema's error code enum lists exactly `PIPELINE_ERROR_CODES`."""
    codes = load_trace_schema()["$defs"]["errorCode"]["enum"]
    assert len(codes) == len(set(codes))
    assert sorted(codes) == sorted(PIPELINE_ERROR_CODES)


def test_the_limits_match_the_schema() -> None:
    """The exported list and string limits are the ones the schema enforces."""
    defs = load_trace_schema()["$defs"]
    assert TRACE_VERSION == 3
    assert defs["stringList"]["maxItems"] == TRACE_LIST_LIMIT
    assert defs["progress"]["properties"]["details"]["maxItems"] == TRACE_LIST_LIMIT
    assert defs["boundedString"]["maxLength"] == TRACE_STRING_LIMIT


def test_every_record_kind_declares_the_common_fields_alike() -> None:
    """Each kind's schema declares the shared top-level fields the same way."""
    records = load_trace_schema()["$defs"]["records"]
    common = ["version", "pipelineId", "runId", "timestampMs", "correlationId"]
    common += ["parentRunId", "itemKey", "iteration"]
    first = records["pipeline.started"]["properties"]
    for name, schema in records.items():
        assert schema["additionalProperties"] is False, name
        assert {key: schema["properties"][key] for key in common} == {
            key: first[key] for key in common
        }, name
        assert schema["properties"]["name"] == {"const": name}
        assert {"version", "pipelineId", "runId"} <= set(schema["required"]), name


def test_the_root_schema_dispatches_on_name(every_kind: Records) -> None:
    """A generic validator given the whole schema accepts the records and rejects a bad one."""
    validator = Draft202012Validator(load_trace_schema())
    for record in every_kind.values():
        assert validator.is_valid(record)
    assert not validator.is_valid({**every_kind["step.running"], "attemptId": ""})


def _rejected(record: object) -> str:
    with pytest.raises(TraceRecordError) as caught:
        validate_record(record)  # type: ignore[arg-type]
    return str(caught.value)


def test_a_bad_version_is_rejected(make_record: MakeRecord) -> None:
    """Only versions 2 and 3 are records; the message names the kind and the path."""
    message = _rejected(make_record("step.complete", version=4))
    assert "step.complete" in message
    assert "$.version" in message


def test_a_missing_run_id_is_rejected(make_record: MakeRecord) -> None:
    """A record without `runId` is rejected, naming the missing property."""
    record = make_record("pipeline.log")
    del record["runId"]
    message = _rejected(record)
    assert "pipeline.log" in message
    assert "runId" in message


def test_an_unknown_name_is_rejected(make_record: MakeRecord) -> None:
    """A name outside the fourteen kinds is rejected at `$.name`."""
    message = _rejected(make_record("step.complete", name="step.done"))
    assert "$.name" in message
    assert "step.done" in message


def test_a_non_dict_is_rejected() -> None:
    """Only a dict can be a record."""
    assert "must be a dict" in _rejected([1, 2])


def test_an_unknown_error_code_is_rejected(make_record: MakeRecord) -> None:
    """`error.code` must be a catalog code; agent codes belong in `sourceCode`."""
    record = make_record("step.failed")
    record["error"]["code"] = "TUBELESS_AGENT_LIMIT_REACHED"
    assert "$.error.code" in _rejected(record)


def test_a_trace_error_may_not_carry_step_id(make_record: MakeRecord) -> None:
    """The trace error object is the reference's: `stepId` is not one of its fields."""
    record = make_record("step.failed")
    record["error"]["stepId"] = "load"
    assert "$.error" in _rejected(record)


def test_a_bad_fingerprint_is_rejected(make_record: MakeRecord) -> None:
    """Definition fingerprints must be `sha256:` and 64 lowercase hex digits."""
    record = make_record("pipeline.started")
    record["payload"]["definitionIdentity"]["definitionId"] = "sha256:ABC"
    message = _rejected(record)
    assert "$.payload.definitionIdentity.definitionId" in message


def test_a_blank_implementation_version_is_rejected(make_record: MakeRecord) -> None:
    """`implementationVersion` must hold a non-blank character."""
    record = make_record("pipeline.started")
    record["payload"]["definitionIdentity"]["implementationVersion"] = "   "
    assert "implementationVersion" in _rejected(record)


@pytest.mark.parametrize("value", [{"nested": 1}, [1], None])
def test_an_attribute_must_be_a_scalar(make_record: MakeRecord, value: object) -> None:
    """Attribute values are booleans, finite numbers or strings, never containers or null."""
    record = make_record("step.attempted")
    record["payload"]["attributes"]["agent.bad"] = value
    assert "$.payload.attributes" in _rejected(record)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_rejected(make_record: MakeRecord, value: float) -> None:
    """NaN and infinities are not JSON numbers, wherever they appear."""
    assert "$.timestampMs" in _rejected(make_record("step.complete", timestampMs=value))
    record = make_record("step.attempted")
    record["payload"]["attributes"]["agent.turn"] = value
    assert "$.payload.attributes" in _rejected(record)


def test_a_boolean_is_not_a_number(make_record: MakeRecord) -> None:
    """`True` is not accepted where a number is required."""
    assert "$.timestampMs" in _rejected(make_record("step.complete", timestampMs=True))


def test_129_details_are_rejected(make_record: MakeRecord) -> None:
    """A progress record keeps at most 128 detail rows."""
    record = make_record("step.running")
    progress = record["payload"]["progress"]
    progress["details"] = [{"id": f"row-{index}"} for index in range(129)]
    progress["detailCount"] = 129
    assert "$.payload.progress.details" in _rejected(record)
    assert "Expected at most 128 items" in _rejected(record)
    assert len(_rejected(record)) < 500
    progress["details"].pop()
    validate_record(record)


def test_a_detail_row_needs_a_non_empty_bounded_id(make_record: MakeRecord) -> None:
    """Detail ids are 1 to 4096 characters; statuses come from a fixed set."""
    record = make_record("step.running")
    row = record["payload"]["progress"]["details"][0]
    row["id"] = ""
    assert "details[0].id" in _rejected(record)
    row["id"] = "x" * 4097
    assert "details[0].id" in _rejected(record)
    row["id"] = "x"
    row["status"] = "waiting"
    assert "details[0].status" in _rejected(record)


def test_step_ids_must_be_non_empty(make_record: MakeRecord) -> None:
    """Required ids reject the empty string; optional context strings allow it."""
    assert "$.stepId" in _rejected(make_record("step.complete", stepId=""))
    validate_record(make_record("step.complete", correlationId="", itemKey=""))


def test_lists_are_bounded_and_hold_non_empty_strings(make_record: MakeRecord) -> None:
    """Planned dependency lists hold at most 128 non-empty strings."""
    record = make_record("step.planned")
    record["payload"]["dependencies"] = [f"d{index}" for index in range(129)]
    assert "$.payload.dependencies" in _rejected(record)
    record["payload"]["dependencies"] = [""]
    assert "$.payload.dependencies[0]" in _rejected(record)


def test_tuples_are_not_lists(make_record: MakeRecord) -> None:
    """Arrays must be lists, so a record read back equals the record written."""
    record = make_record("pipeline.started")
    record["payload"]["targetIds"] = ("agent",)
    assert "$.payload.targetIds" in _rejected(record)


def test_extra_fields_are_rejected(make_record: MakeRecord) -> None:
    """Records and payloads carry only the fields their kind declares."""
    assert "$" in _rejected(make_record("step.complete", parentStep={"runId": "x"}))
    record = make_record("step.complete")
    record["payload"]["value"] = 42
    assert "$.payload" in _rejected(record)


def test_iterate_requires_max_iterations(make_record: MakeRecord) -> None:
    """A planned nested pipeline has `maxIterations` exactly when its mode is `iterate`."""
    record = make_record("step.planned")
    del record["payload"]["nestedPipeline"]["maxIterations"]
    assert "$.payload.nestedPipeline" in _rejected(record)
    record["payload"]["nestedPipeline"].update(mode="for-each", maxIterations=3)
    assert "$.payload.nestedPipeline" in _rejected(record)


def test_a_string_path_part_is_bounded(make_record: MakeRecord) -> None:
    """Issue paths hold finite numbers or strings of at most 4096 characters."""
    record = make_record("step.failed")
    record["error"]["issues"][0]["path"] = ["x" * 4097]
    assert "$.error.issues[0].path[0]" in _rejected(record)


def test_an_artifact_needs_an_id_or_uri(make_record: MakeRecord) -> None:
    """Artifact metadata names the artifact by `id` or `uri`."""
    record = make_record("step.artifact")
    del record["payload"]["artifact"]["uri"]
    assert "$.payload.artifact" in _rejected(record)


_REPLACEMENTS: tuple[object, ...] = (
    None,
    True,
    0,
    -1,
    1.5,
    3.0,
    math.nan,
    "",
    "x" * 5000,
    "sha256:" + "0" * 64,
    [],
    ["a"],
    {},
    {"message": "m"},
    (1,),
)


def _mutations(value: Any) -> Iterator[Any]:
    """Yield copies of `value` with one node replaced, deleted or given an extra key."""
    if isinstance(value, dict):
        for key in list(value):
            for changed in _mutations(value[key]):
                yield {**value, key: changed}
            yield {k: v for k, v in value.items() if k != key}
        yield {**value, "unexpected": 1}
    elif isinstance(value, list) and value:
        for changed in _mutations(value[0]):
            yield [changed, *value[1:]]
        yield value[1:]
    yield from _REPLACEMENTS


def test_compiled_checks_agree_with_jsonschema(every_kind: Records) -> None:
    """For thousands of mutated records, the fast check and `jsonschema` give one verdict."""
    schema = load_trace_schema()
    compared = rejected = 0
    for name in TRACE_RECORD_NAMES:
        checker = compile_checker(schema, f"/$defs/records/{name}")
        for candidate in _mutations(every_kind[name]):
            fast = checker.is_valid(candidate)
            assert fast == (checker.first_error(candidate) is None), (name, candidate)
            compared += 1
            rejected += not fast
    assert compared > 2000
    assert 0 < rejected < compared


def _verdict(check: Callable[[], None]) -> str | None:
    try:
        check()
    except TraceRecordError as error:
        return str(error)
    return None


def test_checking_shared_fields_once_and_own_fields_per_record_is_a_full_check(
    every_kind: Records,
) -> None:
    """A run checks its shared fields once and each record's own fields: same verdicts.

    For every mutated record, `shared_fields_valid` of the shared part together with
    `check_own_fields` of the rest accepts exactly what `check_record` accepts, and
    refuses with the same message.
    """
    compared = 0
    for name in TRACE_RECORD_NAMES:
        for candidate in _mutations(every_kind[name]):
            if not isinstance(candidate, dict) or candidate.get("name") != name:
                continue
            shared = {k: v for k, v in candidate.items() if k in ("version", *SHARED_FIELDS)}
            own = {k: v for k, v in candidate.items() if k not in shared and k != "name"}
            full = _verdict(lambda: check_record(candidate))  # noqa: B023
            if not shared_fields_valid(shared):
                assert full is not None, candidate
                continue
            split = _verdict(lambda: check_own_fields(candidate, own))  # noqa: B023
            assert split == full, (name, candidate)
            compared += 1
    assert compared > 1000

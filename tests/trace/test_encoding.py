"""Record encoding: a run's records and any other encode as `json.dumps` does, once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubeless.trace._encoding import RecordHead, SharedPayload, encode, payload_json


def _plain_line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        -0.0,
        1e300,
        True,
        None,
        2**80,
        'é \u2028 "q" \\ \x01 🙂',
        {"nested": [1, 2.0, {"a": None, "b": False}], "é": "x"},
        [],
    ],
)
def test_a_run_record_line_is_its_plain_json(value: object) -> None:
    """Own fields of any JSON type, and odd field names, encode as `json.dumps` does."""
    head = RecordHead({"pipelineId": "p-é", "runId": 'r"1', "itemKey": "\\k"})
    record = head.record("step.running")
    record["timestampMs"] = 5
    record['odd "key" é'] = value
    record["payload"] = {"value": value}
    assert encode(record).line == _plain_line(dict(record))
    assert payload_json(record) == _plain_line(record["payload"])[:-1]


def test_a_run_record_is_encoded_once_and_a_plain_one_each_time() -> None:
    """Every sink gets a run's record's one `EncodedRecord`; a plain dict is encoded anew."""
    head = RecordHead({"pipelineId": "p", "runId": "r"})
    payload = {"message": "shared by records"}
    encodings = []
    for _ in range(2):
        record = head.record("step.planned")
        record["timestampMs"] = 1
        record["stepId"] = "s"
        record["payload"] = payload
        encodings.append(encode(record))
        assert encode(record) is encodings[-1]
        assert encodings[-1].line == _plain_line(dict(record))
        assert encodings[-1].payload == '{"message":"shared by records"}'
        plain = dict(record)
        assert encode(plain) == encodings[-1]
        assert encode(plain) is not encode(plain)
    assert encodings[0] is not encodings[1]


def test_a_shared_payload_is_encoded_once_for_every_record_sending_it() -> None:
    """Records of several runs sending one `SharedPayload` share its text; a copy does not."""
    payload = SharedPayload(message="é \u2028", steps=["a", "b"], count=2)
    texts = []
    for run in ("r1", "r2"):
        head = RecordHead({"pipelineId": "p", "runId": run})
        for sent in (payload, dict(payload)):
            record = head.record("step.planned")
            record["timestampMs"] = 1
            record["stepId"] = "s"
            record["payload"] = sent
            assert encode(record).line == _plain_line(dict(record))
            texts.append(encode(record).payload)
    assert texts[0] is texts[2]
    assert texts[1] is not texts[0]
    assert texts[1] == texts[0] == _plain_line(dict(payload))[:-1]


def test_unknown_names_and_versions_still_encode_plainly() -> None:
    """A head with a float version or a name outside the catalog takes the plain path."""
    head = RecordHead({"pipelineId": "p", "runId": "r"})
    record = head.record("not.a.kind")
    record["timestampMs"] = 1
    record["payload"] = {}
    assert encode(record).line == _plain_line(dict(record))
    record = head.record("step.running")
    record["version"] = 3.0
    record["timestampMs"] = 1
    record["payload"] = {"a": 1}
    assert encode(record).line == _plain_line(dict(record))


_SCALARS = st.one_of(
    st.text(),
    st.integers(),
    st.integers(min_value=2**63),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.one_of(st.text(), st.integers(), st.booleans()), _VALUES, max_size=6))
def test_any_payload_encodes_as_json_dumps(payload: dict[Any, Any]) -> None:
    """A payload of any keys and values, flat or nested, gives `json.dumps`'s compact text."""
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    assert payload_json({"payload": payload}) == expected
    head = RecordHead({"pipelineId": "p", "runId": "r"})
    record = head.record("step.running")
    record["timestampMs"] = 1
    record["payload"] = payload
    assert encode(record).payload == expected
    assert encode(record).line == _plain_line(dict(record))


@given(st.dictionaries(st.text(), _SCALARS, max_size=6))
def test_a_shared_payload_encodes_as_json_dumps(payload: dict[str, Any]) -> None:
    """A `SharedPayload` of any scalars gives `json.dumps`'s text, the same each time."""
    shared = SharedPayload(payload)
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    assert payload_json({"payload": shared}) == expected
    assert payload_json({"payload": shared}) is payload_json({"payload": shared})


def test_a_cycle_is_refused_as_json_dumps_refuses_it() -> None:
    """A value holding itself raises the `ValueError` `json.dumps` raises, not a recursion."""
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected") as caught:
        payload_json({"payload": {"rows": cycle}})
    assert type(caught.value) is ValueError


@given(
    st.lists(
        st.one_of(
            st.dictionaries(st.text(max_size=4), _SCALARS, max_size=3).map(SharedPayload),
            _VALUES,
        ),
        max_size=5,
    )
)
def test_a_list_holding_shared_objects_encodes_as_json_dumps(rows: list[Any]) -> None:
    """A payload's list mixing `SharedPayload`s and other values gives `json.dumps`'s text."""
    payload = {"progress": {"details": rows, "completed": 1}}
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    assert payload_json({"payload": payload}) == expected
    assert payload_json({"payload": payload}) == expected  # and again, texts reused


def test_a_shared_row_in_a_list_is_encoded_once_for_every_payload_holding_it() -> None:
    """A `SharedPayload` row's JSON is made once: every later list holding it reuses it."""
    row = SharedPayload(id="turn-1", status="completed")
    first = payload_json({"payload": {"details": [row, {"id": "now"}]}})
    row["status"] = "edited"  # a shared row must not change; its text shows it was kept
    later = payload_json({"payload": {"details": [{"id": "new"}, row]}})
    assert first == '{"details":[{"id":"turn-1","status":"completed"},{"id":"now"}]}'
    assert later == '{"details":[{"id":"new"},{"id":"turn-1","status":"completed"}]}'
    cycle: list[Any] = [row]
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected"):
        payload_json({"payload": {"rows": cycle}})


@pytest.mark.parametrize(
    "shared",
    [
        {"pipelineId": "p", "runId": "r", "parentRunId": None, "itemKey": 'k "é"'},
        {"pipelineId": "p", "runId": "r", "iteration": {"runId": "r0", "index": 2}},
        {"pipelineId": "p", 7: "an int key", True: [1.5, None]},
    ],
)
def test_a_head_of_any_shared_fields_starts_lines_as_json_dumps_does(
    shared: dict[Any, Any],
) -> None:
    """Shared fields of every JSON type, and keys that are not strings, read as `json.dumps`."""
    head = RecordHead(shared)
    for name in ("pipeline.started", "step.complete"):
        record = head.record(name)
        record["timestampMs"] = 1
        record["payload"] = {}
        assert encode(record).line == _plain_line(dict(record))


def test_a_shared_object_held_by_a_payload_is_encoded_once() -> None:
    """A `SharedPayload` inside a payload's object reuses its text, as one in a list does."""
    inner = SharedPayload(id="turn-1", steps=["a"])
    first = payload_json({"payload": {"group": inner, "n": 1}})
    inner["steps"] = ["edited"]  # a shared object must not change; its text shows it was kept
    later = payload_json({"payload": {"group": inner}})
    assert first == '{"group":{"id":"turn-1","steps":["a"]},"n":1}'
    assert later == '{"group":{"id":"turn-1","steps":["a"]}}'

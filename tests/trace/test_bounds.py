"""Trace bounds: what the writer accepts always reads back, and a run never loses a record."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tubeless.errors import TraceRecordError
from tubeless.pipeline import RunControls, create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, RecordingLogger
from tubeless.trace import (
    TRACE_RECORD_NAMES,
    NdjsonTraceSink,
    SqliteTraceStore,
    read_ndjson,
    validate_record,
)
from tubeless.trace._bounds import TRACE_ERROR_BYTE_BUDGET, bounded_error, bounded_text
from tubeless.trace._rules import TRACE_MESSAGE_LIMIT, TRACE_RECORD_BYTE_LIMIT, json_bytes

MakeRecord = Callable[..., dict[str, Any]]
FAST = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
THOROUGH = settings(FAST, max_examples=400)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path


def _replace(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = record
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


HOSTILE_STRINGS = st.one_of(
    st.text(max_size=50),
    st.builds(
        lambda unit, count: unit * count,
        st.sampled_from(["a", "\x00", "é", "🙂", "\ud800", "\n", '"\\']),
        st.sampled_from([4096, 4097, 16385, 200_000, 1_100_000]),
    ),
)
HOSTILE_VALUES = st.one_of(
    HOSTILE_STRINGS,
    st.sampled_from([10**5000, 2**64, -1, float("nan"), float("inf"), None, True]),
    st.builds(lambda size: [0] * size, st.sampled_from([129, 300_000])),
    st.builds(
        lambda size: {f"k{i}": "v" * 100 for i in range(size)}, st.sampled_from([200, 20_000])
    ),
)


def _write_then_read(record: dict[str, Any], valid: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace.ndjson"
        with NdjsonTraceSink(path) as sink:
            try:
                sink.export(record)
            except TraceRecordError:
                written = []
            else:
                written = [record]
            sink.export(valid)  # a refusal leaves the sink usable
        assert read_ndjson(path) == [*written, valid]


def _mutations(make_record: MakeRecord, data: st.DataObject) -> tuple[dict[str, Any], dict]:
    kind = data.draw(st.sampled_from(TRACE_RECORD_NAMES))
    record = make_record(kind)
    valid = copy.deepcopy(record)
    paths = list(_leaves(record))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        _replace(record, path, data.draw(HOSTILE_VALUES))
    return record, valid


@FAST
@given(st.data())
def test_a_mutated_record_is_written_and_read_back_or_refused_cleanly(
    make_record: MakeRecord, data: st.DataObject
) -> None:
    """Huge, odd or unencodable fields: the writer either refuses or writes a readable line."""
    _write_then_read(*_mutations(make_record, data))


@pytest.mark.slow
@THOROUGH
@given(st.data())
def test_many_mutated_records_are_written_and_read_back_or_refused_cleanly(
    make_record: MakeRecord, data: st.DataObject
) -> None:
    """The same property over many more examples."""
    _write_then_read(*_mutations(make_record, data))


def test_a_record_over_one_mebibyte_is_refused_with_its_size(make_record: MakeRecord) -> None:
    """The record limit is the reader's line limit, measured in UTF-8 bytes."""
    record = make_record("step.artifact")
    record["payload"]["artifact"]["metadata"] = {"pad": "🙂" * (TRACE_RECORD_BYTE_LIMIT // 4)}

    with pytest.raises(TraceRecordError, match="exceed the 1048576-byte record limit"):
        validate_record(record)


def test_a_lone_surrogate_is_refused(make_record: MakeRecord) -> None:
    """A string that is not UTF-8 could not be written, so the record is refused."""
    record = make_record("pipeline.log")
    record["payload"]["message"] = "half \ud800 a pair"

    with pytest.raises(TraceRecordError, match="lone surrogate"):
        validate_record(record)


@pytest.mark.parametrize(
    ("kind", "path", "limit"),
    [
        pytest.param("pipeline.log", ("payload", "message"), TRACE_MESSAGE_LIMIT, id="log"),
        pytest.param("step.failed", ("error", "message"), TRACE_MESSAGE_LIMIT, id="error"),
        pytest.param("step.failed", ("error", "cause", "message"), TRACE_MESSAGE_LIMIT, id="cause"),
        pytest.param("step.failed", ("error", "sourceCode"), 4096, id="source-code"),
        pytest.param("step.attempted", ("payload", "attributes", "operation"), 4096, id="attr"),
    ],
)
def test_each_free_text_field_is_bounded(
    make_record: MakeRecord, kind: str, path: tuple[str, ...], limit: int
) -> None:
    """Messages hold at most 16384 characters; codes, names and attribute values 4096."""
    record = make_record(kind)
    _replace(record, path, "m" * limit)
    validate_record(record)
    _replace(record, path, "m" * (limit + 1))

    with pytest.raises(TraceRecordError, match=r"at most|Expected"):
        validate_record(record)


def test_bounded_text_cuts_and_escapes() -> None:
    """Long text is cut with an ellipsis; lone surrogates become escapes."""
    assert bounded_text("abc", 5) == "abc"
    assert bounded_text("abcdef", 5) == "abcd…"
    assert bounded_text("a\ud800b", 10) == "a\\ud800b"


def _huge_error(make_record: MakeRecord) -> dict[str, Any]:
    error = make_record("step.failed")["error"]
    error["message"] = "\x00" * 3_000_000 + "\ud800"
    error["cause"] = {"message": "c" * 1_000_000, "name": "n" * 5000}
    error["issues"] = [{"message": "m" * 5000, "path": ["\x01" * 5000] * 200} for _ in range(300)]
    failure = error["fanOut"]["failures"][0]
    error["fanOut"]["failures"] = [
        {**failure, "index": index, "key": "\x02" * 5000, "error": {"message": "\x03" * 5000}}
        for index in range(32)
    ]
    error["fanOut"]["failureCount"] = 40
    error["fanOut"]["omittedFailureCount"] = 8
    return error


def test_a_huge_error_is_cut_to_a_valid_record_within_its_budget(
    make_record: MakeRecord,
) -> None:
    """Strings are cut, issues and failures dropped from the end, counts kept consistent."""
    error = bounded_error(_huge_error(make_record))
    record = make_record("step.failed", error=error)

    validate_record(record)
    assert json_bytes(error) <= TRACE_ERROR_BYTE_BUDGET
    assert len(error["message"]) == TRACE_MESSAGE_LIMIT
    fan_out = error["fanOut"]
    assert fan_out["failureCount"] - len(fan_out["failures"]) == fan_out["omittedFailureCount"]


def _raise(message: str) -> Callable[[Any, Any], Any]:
    def run(inputs: Any, context: Any) -> Any:
        raise RuntimeError(message) from ValueError(message)

    return run


def test_a_run_with_huge_messages_keeps_every_record_and_reads_back(tmp_path: Path) -> None:
    """Exceptions, logs, issues and attributes of megabytes: no record dropped, trace readable."""
    huge = "\x1b[2J" * 500_000 + "\ud800"

    def noisy(inputs: Any, context: Any) -> Any:
        context.log.info(huge)
        context.report_attempt(1, {"note": huge})
        context.report_progress(1, total=2, message=huge)
        return {huge[:70_000]: 1, "k" * 100_000: 2}

    step = create_steps()
    steps = [
        step("noisy", run=noisy, output_schema={"type": "object", "additionalProperties": False}),
        step("boom", run=_raise(huge)),
    ]
    pipeline = define_pipeline(id="noisy", steps=steps)
    logger = RecordingLogger()
    path = tmp_path / "trace.ndjson"
    with NdjsonTraceSink(path) as sink:
        run = pipeline.run(
            None,
            controls=RunControls(continue_on_error=True),
            context={"tracing": sink, "log": logger},
        )

    records = read_ndjson(path)
    assert run.status == "failed"
    assert [m for m in logger.messages("warning") if "Dropped" in m or "sink" in m] == []
    names = [record["name"] for record in records]
    assert names.count("step.failed") == 2
    assert "pipeline.log" in names and "step.attempted" in names
    assert names[-1] == "pipeline.completed"
    assert all(len(json.dumps(r, ensure_ascii=False)) <= TRACE_RECORD_BYTE_LIMIT for r in records)


def test_a_run_record_too_large_to_write_is_refused_alone(tmp_path: Path) -> None:
    """A step id of a million characters: records naming it are refused, the rest reads back."""
    step = create_steps()
    pipeline = define_pipeline(id="wide", steps=[step("s" * 1_100_000, run=lambda i, c: 1)])
    logger = RecordingLogger()
    path = tmp_path / "trace.ndjson"
    with NdjsonTraceSink(path) as sink:
        run = pipeline.run(None, context={"tracing": sink, "log": logger})

    records = read_ndjson(path)
    assert run.status == "completed"
    names = [record["name"] for record in records]
    assert names[-1] == "pipeline.completed"
    assert "step.planned" not in names and "step.complete" not in names
    refused = logger.messages("warning")
    assert refused and all("record limit" in message for message in refused)
    assert all(len(message) < 1_000 for message in refused)


def test_the_sqlite_store_refuses_a_lone_surrogate_alone(tmp_path: Path) -> None:
    """A run whose correlation id is not UTF-8 loses its records, and the store stays usable."""
    step = create_steps()
    pipeline = define_pipeline(id="odd", steps=[step("s", run=lambda i, c: 1)])
    logger = RecordingLogger()
    with SqliteTraceStore(tmp_path / "runs.sqlite") as store:
        pipeline.run(None, context={"tracing": store, "log": logger, "correlation_id": "\ud800"})
        pipeline.run(None, context={"tracing": store, "log": logger})
        names = [record["name"] for record in store.events()]

    assert names[0] == "pipeline.started" and names[-1] == "pipeline.completed"
    assert any("lone surrogate" in message for message in logger.messages("warning"))


HOSTILE_ROWS = st.lists(
    st.dictionaries(
        st.sampled_from(["id", "name", "label", "status", "completed", "total", "depth", "x"]),
        st.one_of(HOSTILE_VALUES, st.sampled_from(["running", "failed", "bogus", ""])),
    ),
    max_size=4,
)


@FAST
@given(
    completed=HOSTILE_VALUES,
    total=st.one_of(st.none(), HOSTILE_VALUES),
    message=st.one_of(st.none(), HOSTILE_VALUES),
    details=st.one_of(
        st.none(),
        HOSTILE_ROWS,
        st.just([{"id": "r" * 4000}] * 300),
        # Rows whose JSON is several bytes per character, near the detail byte limit.
        st.builds(
            lambda unit, count, number: (
                [{"id": unit * 4096, "name": unit * 4096, "completed": number}] * count
            ),
            st.sampled_from(["\x00", "\ud800", "🙂", '"', "a"]),
            st.sampled_from([1, 4, 5, 6, 40, 128]),
            st.sampled_from([0, 2**999, -(2**999), 1.7976931348623157e308]),
        ),
    ),
)
def test_progress_records_skip_the_payload_schema_yet_always_read_back(
    completed: Any, total: Any, message: Any, details: Any
) -> None:
    """Hostile progress raises `TypeError` in the handler or makes a record the reader takes.

    The writer skips the payload schema for progress, so its own rules must hold.
    """
    refused: list[BaseException] = []

    def report(inputs: Any, context: Any) -> None:
        try:
            context.report_progress(completed, total=total, message=message, details=details)
        except TypeError as error:
            refused.append(error)

    sink = MemoryTraceSink()
    logger = RecordingLogger()
    pipeline = define_pipeline(id="progress", steps=[create_steps()("report", run=report)])
    run = pipeline.run(None, context={"tracing": sink, "log": logger})

    assert run.status == "completed"
    assert logger.messages("warning") == []
    progress = [r for r in sink.records if r["name"] == "step.running" and r["payload"]]
    assert len(progress) == (0 if refused else 1)
    for record in sink.records:
        validate_record(copy.deepcopy(dict(record)))


INTEGER_READINGS = st.one_of(
    st.integers(0, 2**60), st.sampled_from([2**53, -(2**53), 2**64, 10**5000, -1, 0, True])
)
FLOAT_READINGS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1.5, -0.0, False])
)
# One kind per clock: the run subtracts readings, and a huge int less a float overflows.
CLOCKS = st.one_of(
    st.lists(INTEGER_READINGS, min_size=1, max_size=40),
    st.lists(FLOAT_READINGS, min_size=1, max_size=40),
)


@FAST
@given(readings=CLOCKS)
def test_a_hostile_clock_never_yields_a_record_the_reader_refuses(readings: list[Any]) -> None:
    """Records the library shaped skip the schema only while the clock gives plain integers.

    A run whose clock returns floats, huge integers, booleans or NaN emits each record
    with valid fields, or drops it with a warning; every record it delivers reads back.
    """
    ticks = iter(readings * 1000)

    def clock() -> Any:
        return next(ticks)

    def work(inputs: Any, context: Any) -> int:
        context.report_progress(1, total=2, message="half", details=[{"id": "a"}])
        context.report_attempt(1, {"try": "first"})
        return 1

    inner_steps = create_steps()
    inner = define_pipeline(id="inner", steps=[inner_steps("work", run=work)])
    steps = create_steps()
    child = steps.from_pipeline("child", pipeline=inner, map_options=lambda inputs, context: {})
    after = steps("after", run=lambda inputs, context: inputs["child"], depends_on=[child])
    pipeline = define_pipeline(id="hostile-clock", steps=[child, after])
    sink, logger = MemoryTraceSink(), RecordingLogger()
    pipeline.run(None, context={"tracing": sink, "log": logger, "now": clock})

    warnings = logger.messages("warning")
    assert all(message.startswith("Dropped an invalid trace record") for message in warnings)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace.ndjson"
        with NdjsonTraceSink(path) as ndjson:
            for record in sink.records:
                plain = copy.deepcopy(dict(record))
                validate_record(plain)
                ndjson.export(plain)
        assert read_ndjson(path) == [dict(record) for record in sink.records]

"""Writing NDJSON traces with `NdjsonTraceSink` and reading them with `read_ndjson`."""

from __future__ import annotations

import io
import json
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tubeless.errors import TornTraceWarning, TraceRecordError, TraceSinkError, TraceStoreError
from tubeless.trace import NdjsonTraceSink, _ndjson, read_ndjson
from tubeless.trace._encoding import payload_json

Records = dict[str, dict[str, Any]]
MakeRecord = Callable[..., dict[str, Any]]


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def test_a_written_trace_reads_back_equal(tmp_path: Path, every_kind: Records) -> None:
    """Every kind of record survives a write and a read, numbers keeping their type."""
    records = list(every_kind.values())
    records[0]["timestampMs"] = 1700000000000.0
    records[1]["timestampMs"] = 1700000000000.25
    path = tmp_path / "deep" / "dir" / "trace.ndjson"
    with NdjsonTraceSink(path) as sink:
        for record in records:
            sink.export(record)
    back = read_ndjson(path)
    assert back == records
    assert type(back[0]["timestampMs"]) is float
    assert type(back[2]["timestampMs"]) is int


def test_lines_are_compact_json_with_unicode_kept(tmp_path: Path, make_record: MakeRecord) -> None:
    """Each record is one compact line, written as UTF-8 rather than escaped."""
    record = make_record("pipeline.log")
    record["payload"]["message"] = "héllo ☃"
    path = tmp_path / "trace.ndjson"
    with NdjsonTraceSink(str(path)) as sink:
        sink.export(record)
    assert path.read_text(encoding="utf-8") == _line(record) + "\n"
    assert "☃" in path.read_text(encoding="utf-8")


def test_a_path_is_truncated(tmp_path: Path, make_record: MakeRecord) -> None:
    """Opening a sink on an existing file starts it afresh."""
    path = tmp_path / "trace.ndjson"
    path.write_text("old contents\n")
    with NdjsonTraceSink(path) as sink:
        sink.export(make_record("pipeline.log"))
    assert read_ndjson(path) == [make_record("pipeline.log")]


def test_a_stream_is_written_but_not_closed(make_record: MakeRecord) -> None:
    """A sink on a caller's stream writes to it and leaves it open."""
    stream = io.StringIO()
    sink = NdjsonTraceSink(stream)
    sink.export(make_record("pipeline.log"))
    sink.close()
    assert not stream.closed
    assert stream.getvalue() == _line(make_record("pipeline.log")) + "\n"


def test_records_reach_the_file_without_flush(tmp_path: Path, make_record: MakeRecord) -> None:
    """A reader of a live file sees a record soon after `export`, with no flush or close.

    The timed flush waits `FLUSH_INTERVAL` (50 ms); the test only proves it happens.
    """
    path = tmp_path / "trace.ndjson"
    with NdjsonTraceSink(path) as sink:
        sink.export(make_record("pipeline.log"))
        deadline = time.monotonic() + 30
        while not path.read_bytes().endswith(b"\n") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert read_ndjson(path) == [make_record("pipeline.log")]


def test_flush_writes_held_records_and_leaves_no_thread(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    """`flush()` (called at every run's end) writes at once and stops the timer thread."""
    path = tmp_path / "trace.ndjson"
    before = threading.active_count()
    with NdjsonTraceSink(path) as sink:
        for _ in range(3):
            sink.export(make_record("pipeline.log"))
        sink.flush()
        assert len(read_ndjson(path)) == 3
        assert threading.active_count() == before


def test_an_invalid_record_is_refused_and_the_sink_stays_usable(
    make_record: MakeRecord,
) -> None:
    """A bad record raises `TraceRecordError`, writes nothing and harms nothing."""
    stream = io.StringIO()
    sink = NdjsonTraceSink(stream)
    with pytest.raises(TraceRecordError):
        sink.export(make_record("pipeline.log", runId=""))
    sink.export(make_record("pipeline.log"))
    assert stream.getvalue().count("\n") == 1


class _BrokenStream(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("disk full")


def test_a_write_error_is_kept_and_raised_again(make_record: MakeRecord) -> None:
    """After a failed write, every later export and the close raise `TraceSinkError`."""
    sink = NdjsonTraceSink(_BrokenStream())
    with pytest.raises(TraceSinkError, match="disk full"):
        sink.export(make_record("pipeline.log"))
    with pytest.raises(TraceSinkError, match="failed earlier: disk full"):
        sink.export(make_record("pipeline.log"))
    with pytest.raises(TraceSinkError, match="disk full"):
        sink.close()
    sink.close()


def test_export_after_close_is_refused(tmp_path: Path, make_record: MakeRecord) -> None:
    """A closed sink raises `TraceSinkError`; closing twice is harmless."""
    sink = NdjsonTraceSink(tmp_path / "trace.ndjson")
    sink.close()
    sink.close()
    with pytest.raises(TraceSinkError, match="closed"):
        sink.export(make_record("pipeline.log"))


def test_threads_never_interleave_lines(tmp_path: Path, make_record: MakeRecord) -> None:
    """Records exported from many threads at once each land on a whole line."""
    path = tmp_path / "trace.ndjson"
    barrier = threading.Barrier(8)

    def write(worker: int) -> None:
        barrier.wait()
        for index in range(200):
            record = make_record("pipeline.log")
            record["payload"]["message"] = f"{worker}-{index}-" + "x" * 500
            sink.export(record)

    with NdjsonTraceSink(path) as sink:
        threads = [threading.Thread(target=write, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    messages = [record["payload"]["message"] for record in read_ndjson(path)]
    assert len(messages) == 1600
    for worker in range(8):
        mine = [m.split("-")[1] for m in messages if m.startswith(f"{worker}-")]
        assert mine == [str(index) for index in range(200)]


def test_blank_lines_and_crlf_are_tolerated(tmp_path: Path, make_record: MakeRecord) -> None:
    """Blank lines (spaces and tabs) are skipped and `\\r\\n` endings are accepted."""
    record = make_record("pipeline.log")
    path = tmp_path / "trace.ndjson"
    path.write_bytes(
        b"\n  \t\n" + _line(record).encode() + b"\r\n\r\n" + _line(record).encode() + b"\r\n"
    )
    assert read_ndjson(path) == [record, record]


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        (b"\xff\xfe not utf-8", "is not valid UTF-8"),
        (b'{"version": 3,', "is not valid JSON"),
        (b'{"a": NaN}', "is not valid JSON"),
        (b"[1, 2]", "is not a valid trace record"),
        (b'{"version":3,"name":"pipeline.log"}', "is not a valid trace record"),
    ],
)
def test_a_bad_line_is_reported_by_number(
    tmp_path: Path, make_record: MakeRecord, bad_line: bytes, problem: str
) -> None:
    """The error names the 1-based line number of the first bad line, blanks counted."""
    good = _line(make_record("pipeline.log")).encode()
    path = tmp_path / "trace.ndjson"
    path.write_bytes(good + b"\n\n" + bad_line + b"\n" + good + b"\n")
    with pytest.raises(TraceStoreError) as caught:
        read_ndjson(path)
    assert f"line 3 {problem}" in str(caught.value)


def test_the_record_problem_is_in_the_message(tmp_path: Path, make_record: MakeRecord) -> None:
    """A schema failure names the record kind and the JSON path."""
    path = tmp_path / "trace.ndjson"
    path.write_text(_line(make_record("step.complete", stepId="")) + "\n")
    with pytest.raises(TraceStoreError, match=r"line 1 .*step\.complete.*\$\.stepId"):
        read_ndjson(path)


def test_a_missing_file_is_a_store_error(tmp_path: Path) -> None:
    """Reading a file that does not exist raises `TraceStoreError`."""
    with pytest.raises(TraceStoreError, match="not found"):
        read_ndjson(tmp_path / "missing.ndjson")


def test_a_directory_is_not_a_trace(tmp_path: Path) -> None:
    """Only regular files are read."""
    with pytest.raises(TraceStoreError, match="not a regular file"):
        read_ndjson(tmp_path)


def test_a_line_over_one_mebibyte_is_refused(tmp_path: Path, make_record: MakeRecord) -> None:
    """A line of exactly 1 MiB is read; one byte more is refused by line number."""
    record = make_record("step.artifact")
    metadata = record["payload"]["artifact"]["metadata"]
    metadata["pad"] = ""
    padding = 1024 * 1024 - len(_line(record).encode())
    metadata["pad"] = "m" * padding
    path = tmp_path / "trace.ndjson"
    path.write_text(_line(record) + "\r\n")
    assert read_ndjson(path) == [record]
    metadata["pad"] += "m"
    path.write_text("\n" + _line(record) + "\n")
    with pytest.raises(TraceStoreError, match="line 2 exceeds the 1048576-byte line limit"):
        read_ndjson(path)


def test_the_file_size_is_limited(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file larger than the file limit is refused before any line is parsed."""
    path = tmp_path / "trace.ndjson"
    path.write_text((_line(make_record("pipeline.log")) + "\n") * 3)
    monkeypatch.setattr(_ndjson, "NDJSON_FILE_BYTE_LIMIT", path.stat().st_size)
    assert len(read_ndjson(path)) == 3
    monkeypatch.setattr(_ndjson, "NDJSON_FILE_BYTE_LIMIT", path.stat().st_size - 1)
    with pytest.raises(TraceStoreError, match="byte NDJSON trace limit"):
        read_ndjson(path)


def test_the_record_count_is_limited(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file with more records than the limit is refused at the first record too many."""
    path = tmp_path / "trace.ndjson"
    path.write_text((_line(make_record("pipeline.log")) + "\n\n") * 3)
    monkeypatch.setattr(_ndjson, "NDJSON_RECORD_LIMIT", 3)
    assert len(read_ndjson(path)) == 3
    monkeypatch.setattr(_ndjson, "NDJSON_RECORD_LIMIT", 2)
    with pytest.raises(TraceStoreError, match="line 5: more than 2 records"):
        read_ndjson(path)


def _torn(tmp_path: Path, every_kind: Records, tail: bytes) -> Path:
    records = list(every_kind.values())[:3]
    path = tmp_path / "trace.ndjson"
    path.write_bytes("".join(_line(record) + "\n" for record in records).encode() + tail)
    return path


def test_a_torn_last_line_fails_by_default(tmp_path: Path, every_kind: Records) -> None:
    """Without the option, a last line cut short fails the read, naming the line."""
    path = _torn(tmp_path, every_kind, b'{"version":3,"na')

    with pytest.raises(TraceStoreError, match="line 4 is not valid JSON"):
        read_ndjson(path)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b'{"version":3,"na', id="cut-json"),
        pytest.param(b'{"version":3}', id="cut-record"),
        pytest.param("\u00e9".encode()[:1], id="cut-utf8"),
    ],
)
def test_a_torn_last_line_is_skipped_with_a_warning(
    tmp_path: Path, every_kind: Records, tail: bytes
) -> None:
    """With `tolerate_torn_tail`, the records before it are returned and a warning counts them."""
    path = _torn(tmp_path, every_kind, tail)

    with pytest.warns(TornTraceWarning, match="torn line 4 .*read 3 records"):
        records = read_ndjson(path, tolerate_torn_tail=True)

    assert records == list(every_kind.values())[:3]


def test_a_whole_last_line_without_newline_is_kept(tmp_path: Path, every_kind: Records) -> None:
    """A last line that parses is a record, newline or not, and nothing warns."""
    record = list(every_kind.values())[3]
    path = _torn(tmp_path, every_kind, _line(record).encode())

    assert read_ndjson(path, tolerate_torn_tail=True)[-1] == record


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"version":3,"na\n', id="bad-line-with-newline"),
        pytest.param(b"not json\n{}", id="bad-line-before-the-tail"),
    ],
)
def test_only_the_torn_tail_is_tolerated(
    tmp_path: Path, every_kind: Records, content: bytes
) -> None:
    """A bad line that ends with a newline, or comes before the last one, still fails."""
    path = _torn(tmp_path, every_kind, content)

    with pytest.raises(TraceStoreError, match="line 4"):
        read_ndjson(path, tolerate_torn_tail=True)


def test_a_killed_writer_leaves_a_trace_that_reads_with_the_option(
    tmp_path: Path, every_kind: Records
) -> None:
    """Cutting a written trace at any byte leaves every whole record readable."""
    path = tmp_path / "trace.ndjson"
    with NdjsonTraceSink(path) as sink:
        for record in every_kind.values():
            sink.export(record)
    data = path.read_bytes()
    ends = [index + 1 for index, byte in enumerate(data) if byte == ord("\n")]
    cut_path = tmp_path / "cut.ndjson"
    for cut in [*range(0, len(data), 97), *(end - 1 for end in ends)]:
        cut_path.write_bytes(data[:cut])
        # A cut just before a newline leaves that line whole: it reads as a record.
        whole = sum(1 for end in ends if end <= cut + 1)
        torn = cut not in ends and cut + 1 not in ends and cut != 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = read_ndjson(cut_path, tolerate_torn_tail=True)
        assert records == list(every_kind.values())[:whole]
        assert len(caught) == (1 if torn else 0)


def test_a_run_writes_each_record_as_its_plain_json_and_encodes_it_once(tmp_path: Path) -> None:
    """A run's lines splice in its shared fields, byte for byte a plain encoding; once.

    Two sinks of one run share each record's encoding.
    """
    from tubeless.pipeline import create_steps, define_pipeline
    from tubeless.trace import compose_sinks

    inner_steps = create_steps()
    inner = define_pipeline(
        id="inner-é", steps=[inner_steps("work", run=lambda inputs, context: "🙂")]
    )
    steps = create_steps()
    fan = steps.for_each_pipeline(
        "fan",
        pipeline=inner,
        items=lambda inputs, context: ["a", "é"],
        key=lambda item, index: f'item-"{item}"\\',
        map_options=lambda item, index, inputs, context: {},
    )
    pipeline = define_pipeline(id="outer", steps=[fan])
    paths = [tmp_path / "one.ndjson", tmp_path / "two.ndjson"]
    sinks = [NdjsonTraceSink(path) for path in paths]
    encoded: list[Any] = []
    real = _ndjson.encode

    def counting(record: Any) -> Any:
        encoded.append(record)
        return real(record)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_ndjson, "encode", counting)
        run = pipeline.run(None, context={"tracing": compose_sinks(*sinks)})
    for sink in sinks:
        sink.close()
    assert run.status == "completed"
    lines = paths[0].read_text("utf-8").splitlines(keepends=True)
    assert paths[1].read_text("utf-8").splitlines(keepends=True) == lines
    assert len(lines) == len(encoded) // 2 > 10
    for record, line in zip(encoded[::2], lines, strict=True):
        plain = json.dumps(dict(record), separators=(",", ":"), ensure_ascii=False) + "\n"
        assert line == plain
        assert _ndjson.encode(record) is _ndjson.encode(record)
        assert payload_json(record) == _line(record["payload"])
        assert f'"payload":{payload_json(record)}' in line


def _echo_agent(
    agent_id: str,
    run_tool: Callable[[Any, Any], str],
    decide: Callable[[Any, Any], dict[str, Any]],
    *,
    description: str = "Echo",
    limits: dict[str, int],
) -> Any:
    """An agent with one `echo` tool, state kept as it is."""
    from tubeless.agent import define_agent, define_tool

    tool = define_tool(
        description=description,
        input_schema={"type": "object"},
        output_schema={"type": "string"},
        run=run_tool,
    )
    return define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {},
        decide=decide,
        reduce=lambda state, outcomes: state,
        tools={"echo": tool},
        limits=limits,
    )


def _written_beside_memory(agent: Any, path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Run `agent` into an NDJSON file and a memory sink; each line must be its record's
    `json.dumps`. Returns the lines and the records."""
    from tubeless.testing import MemoryTraceSink
    from tubeless.trace import compose_sinks

    memory = MemoryTraceSink()
    with NdjsonTraceSink(path) as sink:
        run = agent.run({}, context={"tracing": compose_sinks(sink, memory)})
    assert run.status == "completed", run.errors
    lines = path.read_text("utf-8").splitlines(keepends=True)
    for record, line in zip(memory.records, lines, strict=True):
        assert line == _line(dict(record)) + "\n"
    return lines, memory.records


def test_cached_parts_of_later_runs_stay_byte_identical(tmp_path: Path) -> None:
    """Later runs reuse field names' text and send the plan's payloads: same bytes as plain.

    A second and third run of one plan send `step.planned` and `pipeline.started` with
    the payload objects the first run's records held; an agent's child runs (its turns
    and tool calls) send them within one run too.
    """
    turns = iter(range(100))

    def decide(state: Any, context: Any) -> dict[str, Any]:
        if next(turns) % 3 == 2:
            return {"kind": "finish", "result": state}
        calls = [{"id": f"c-{index}-é", "tool": "echo", "input": {}} for index in range(2)]
        return {"kind": "continue", "calls": calls}

    agent = _echo_agent(
        "cached-é",
        lambda value, context: 'é\u2028"quoted"',
        decide,
        description="Echo ünïcode",
        limits={"max_turns": 5, "max_calls": 10, "max_decisions": 5, "max_concurrency": 2},
    )
    for attempt in range(3):
        _, records = _written_beside_memory(agent, tmp_path / f"run-{attempt}.ndjson")
        kinds = {record["name"] for record in records}
        assert {"step.planned", "pipeline.started", "step.attempted"} <= kinds
        for record in records:
            assert payload_json(record) == _line(record["payload"])


def test_a_long_iterating_step_writes_its_settled_groups_byte_for_byte(tmp_path: Path) -> None:
    """Past 31 turns, with failed calls kept under their groups, lines stay plain JSON.

    An agent's turn loop sends its settled groups again in every snapshot, and drops the
    oldest; every progress line it writes still reads as `json.dumps` gives it.
    """
    from tubeless import ToolError

    def run_tool(value: Any, context: Any) -> str:
        if value["fail"]:
            raise ToolError("BROKEN", "nö")
        return "ok"

    turns = iter(range(100))

    def decide(state: Any, context: Any) -> dict[str, Any]:
        turn = next(turns)
        if turn == 40:
            return {"kind": "finish", "result": state}
        calls = [
            {"id": f"c-{turn}-{index}", "tool": "echo", "input": {"fail": turn % 7 == index}}
            for index in range(2)
        ]
        return {"kind": "continue", "calls": calls}

    agent = _echo_agent(
        "long-é",
        run_tool,
        decide,
        limits={"max_turns": 50, "max_calls": 200, "max_decisions": 50},
    )
    lines, _ = _written_beside_memory(agent, tmp_path / "run.ndjson")
    assert any('"name":"10 earlier turns"' in line for line in lines)
    assert any('"status":"failed","depth":2' in line for line in lines)

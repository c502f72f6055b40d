"""Composed sinks: every record to every healthy sink, failing sinks retired."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import TraceRecordError, TraceSinkError
from tubeless.testing import MemoryTraceSink
from tubeless.trace import compose_sinks

MakeRecord = Callable[..., dict[str, Any]]


class _Exploding:
    """A sink whose every call raises."""

    def __init__(self) -> None:
        self.closed = False

    def export(self, record: dict[str, Any]) -> None:
        raise OSError("no space left")

    def flush(self) -> None:
        raise OSError("cannot flush")

    def close(self) -> None:
        self.closed = True
        raise OSError("cannot close")


class _ExportOnly:
    """A sink with neither `flush` nor `close`."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def export(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def test_each_record_reaches_every_sink(make_record: MakeRecord) -> None:
    """Every sink receives every record, in order."""
    first, second = MemoryTraceSink(), MemoryTraceSink()
    composed = compose_sinks(first, second)
    records = [make_record("pipeline.log"), make_record("step.complete")]
    for record in records:
        composed.export(record)
    assert first.records == records
    assert second.records == records


def test_a_failing_sink_is_retired_with_a_partial_error(make_record: MakeRecord) -> None:
    """The failing sink is dropped; the error is partial while others stay healthy."""
    healthy, failing = MemoryTraceSink(), MemoryTraceSink(fail_after=1)
    composed = compose_sinks(failing, healthy)
    composed.export(make_record("pipeline.log"))
    with pytest.raises(TraceSinkError, match="retired") as caught:
        composed.export(make_record("step.complete"))
    assert caught.value.partial is True
    assert isinstance(caught.value.__cause__, TraceSinkError)
    assert composed.healthy == (healthy,)
    composed.export(make_record("pipeline.finalize.started"))
    assert len(healthy.records) == 3
    assert len(failing.records) == 1


def test_the_last_failure_is_not_partial(make_record: MakeRecord) -> None:
    """When no sink is left, the error says so with `partial=False`."""
    composed = compose_sinks(MemoryTraceSink(fail_after=0), _Exploding())
    with pytest.raises(TraceSinkError) as caught:
        composed.export(make_record("pipeline.log"))
    assert caught.value.partial is False
    assert composed.healthy == ()
    composed.export(make_record("pipeline.log"))  # nothing left to fail


def test_an_invalid_record_retires_no_sink(make_record: MakeRecord) -> None:
    """A bad record is refused before any sink sees it."""
    sink = MemoryTraceSink()
    composed = compose_sinks(sink)
    with pytest.raises(TraceRecordError):
        composed.export(make_record("pipeline.log", runId=""))
    assert composed.healthy == (sink,)
    assert sink.records == []


def test_flush_reaches_every_sink_and_retires_failures() -> None:
    """Flush calls every healthy sink that has `flush`; a failing one is retired."""
    memory, plain, exploding = MemoryTraceSink(), _ExportOnly(), _Exploding()
    composed = compose_sinks(memory, plain, exploding)
    with pytest.raises(TraceSinkError, match="failed to flush") as caught:
        composed.flush()
    assert caught.value.partial is True
    assert memory.flush_count == 1
    assert composed.healthy == (memory, plain)


def test_close_reaches_every_sink_then_raises(make_record: MakeRecord) -> None:
    """Close closes every sink, retired ones too, then raises the first failure."""
    first, exploding, last = MemoryTraceSink(fail_after=0), _Exploding(), MemoryTraceSink()
    composed = compose_sinks(first, exploding, last)
    with pytest.raises(TraceSinkError):
        composed.export(make_record("pipeline.log"))
    with pytest.raises(TraceSinkError, match="cannot close") as caught:
        composed.close()
    assert caught.value.partial is True
    assert first.closed and exploding.closed and last.closed


def test_threads_see_the_same_order_in_every_sink(make_record: MakeRecord) -> None:
    """Records exported from many threads arrive in one order, the same for every sink."""
    first, second = MemoryTraceSink(), MemoryTraceSink()
    composed = compose_sinks(first, second)
    barrier = threading.Barrier(4)

    def write(worker: int) -> None:
        barrier.wait()
        for index in range(100):
            record = make_record("pipeline.log")
            record["payload"]["message"] = f"{worker}-{index}"
            composed.export(record)

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(first.records) == 400
    assert first.records == second.records

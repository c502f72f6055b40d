"""The test doubles in `tubeless.testing`."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tubeless.errors import TraceRecordError, TraceSinkError
from tubeless.testing import MemoryTraceSink


def _record(message: str) -> dict[str, Any]:
    return {
        "version": 3,
        "name": "pipeline.log",
        "pipelineId": "p",
        "runId": "r",
        "timestampMs": 0,
        "payload": {"level": "log", "message": message},
    }


def test_memory_sink_keeps_copies_in_order() -> None:
    """Records are kept in export order, unaffected by later changes to the caller's dict."""
    sink = MemoryTraceSink()
    first = _record("one")
    sink.export(first)
    sink.export(_record("two"))
    first["payload"]["message"] = "changed"
    assert [record["payload"]["message"] for record in sink.records] == ["one", "two"]


def test_memory_sink_validates_records() -> None:
    """An invalid record raises `TraceRecordError` and is not kept."""
    sink = MemoryTraceSink()
    with pytest.raises(TraceRecordError):
        sink.export({"name": "pipeline.log"})
    assert sink.records == []


def test_memory_sink_fails_after_n_records() -> None:
    """With `fail_after=2`, the third and every later export raise `TraceSinkError`."""
    sink = MemoryTraceSink(fail_after=2)
    sink.export(_record("one"))
    sink.export(_record("two"))
    for _ in range(2):
        with pytest.raises(TraceSinkError, match="after 2 records"):
            sink.export(_record("three"))
    assert len(sink.records) == 2


def test_memory_sink_counts_flushes_and_refuses_records_after_close() -> None:
    """`flush` is counted; after `close`, records are kept but new ones refused."""
    sink = MemoryTraceSink()
    sink.export(_record("one"))
    sink.flush()
    sink.flush()
    sink.close()
    assert sink.flush_count == 2 and sink.closed
    with pytest.raises(TraceSinkError, match="closed"):
        sink.export(_record("two"))
    assert len(sink.records) == 1


def test_memory_sink_is_thread_safe() -> None:
    """Exports from many threads at once are all kept."""
    sink = MemoryTraceSink()
    barrier = threading.Barrier(8)

    def write() -> None:
        barrier.wait()
        for index in range(250):
            sink.export(_record(str(index)))

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink.records) == 2000

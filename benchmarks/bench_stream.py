"""The record stream's own cost: a traced run's records kept or written with no harness.

Trace v3 fixes what a traced W(N, K) run emits (12.8 records per tool call at K=4). This
replays the records of one such run into a fresh `MemoryTraceSink` and a fresh
`NdjsonTraceSink`, each record built as a run builds it (a `TraceRecord` started from its
run's `RecordHead`, then its own fields and its payload), best of 3. Nothing else runs:
no step, no validation, no progress, no hook; the payloads are the run's own objects,
made before the clock, and the replay's inputs are left out of garbage collection
(`gc.freeze`). So this is less than any harness could pay, and a traced run costs at
least the no-sink run plus it. The sink targets of issue 19 (a sink's run within 2x or
3x the no-sink run) leave the record stream 1x or 2x the no-sink run: when the replay
alone costs more, no harness can meet the target with the stream as defined.
"""

from __future__ import annotations

import dataclasses
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import format_table
from bench_agent import AgentFigures, build_agent, run_agent

from tubeless.testing import MemoryTraceSink
from tubeless.trace import NdjsonTraceSink
from tubeless.trace.lowlevel import RecordHead

REPEATS = 3
ROOM = {"memory": 1.0, "ndjson": 2.0}
"""What each sink target leaves the record stream, in no-sink runs (limit - 1)."""

Step = tuple[RecordHead, str, Any, dict[str, Any], Any]
"""One record to build: its run's head, `name`, `timestampMs`, own fields, payload."""


@dataclasses.dataclass(frozen=True, slots=True)
class StreamFloor:
    """The replayed stream of one W(N, K) run, per tool call."""

    turns: int
    """N."""
    calls: int
    """K."""
    records_per_call: float
    """Records the run emitted, over N * K."""
    memory_us_per_call: float
    """Building every record and keeping it in a `MemoryTraceSink`, in microseconds."""
    ndjson_us_per_call: float
    """Building every record and writing it to an `NdjsonTraceSink` file, closed."""


def _replay_steps(turns: int, calls: int) -> list[Step]:
    """The records of one traced W(turns, calls) run, taken apart into what builds them."""
    sink = MemoryTraceSink()
    run_agent(build_agent(turns, calls), {"tracing": sink})
    heads: dict[int, RecordHead] = {}
    steps = []
    for record in sink.records:
        shared = record._head.fields
        head = heads.get(id(shared))
        if head is None:
            fields = {key: value for key, value in shared.items() if key not in ("version", "name")}
            head = heads[id(shared)] = RecordHead(fields)
        own = {key: value for key, value in record.items() if key not in shared}
        payload, timestamp = own.pop("payload"), own.pop("timestampMs")
        steps.append((head, record["name"], timestamp, own, payload))
    return steps


def _replay_seconds(steps: list[Step], sink: MemoryTraceSink | NdjsonTraceSink) -> float:
    """Build and export every record of `steps` into `sink` as a run does; close it."""
    export = sink.export
    gc.collect()
    gc.freeze()
    try:
        started = time.perf_counter()
        for head, name, timestamp, own, payload in steps:
            record = head.record(name)
            record["timestampMs"] = timestamp
            if own:
                record.update(own)
            record["payload"] = payload
            export(record)
        sink.close()
        return time.perf_counter() - started
    finally:
        gc.unfreeze()


def measure_stream(turns: int, calls: int) -> StreamFloor:
    """Replay one W(turns, calls) run's records into each sink, best of `REPEATS`."""
    steps = _replay_steps(turns, calls)
    memory = ndjson = float("inf")
    with tempfile.TemporaryDirectory() as directory:
        for attempt in range(REPEATS):
            memory = min(memory, _replay_seconds(steps, MemoryTraceSink()))
            path = Path(directory) / f"stream-{attempt}.ndjson"
            ndjson = min(ndjson, _replay_seconds(steps, NdjsonTraceSink(path)))
    total = turns * calls
    return StreamFloor(turns, calls, len(steps) / total, memory / total * 1e6, ndjson / total * 1e6)


def format_stream(floor: StreamFloor, figures: AgentFigures) -> list[str]:
    """The replay against the room each sink target leaves, and the sink's own run."""
    none = figures.per_call("none", floor.turns, floor.calls)
    costs = {"memory": floor.memory_us_per_call, "ndjson": floor.ndjson_us_per_call}
    rows = []
    for sink, cost in costs.items():
        room = ROOM[sink] * none
        traced = figures.per_call(sink, floor.turns, floor.calls) - none
        rows.append((sink, [f"{cost:.1f}", f"{room:.1f}", f"{cost / room:.2f}x", f"{traced:.1f}"]))
    title = (
        f"The record stream alone at N={floor.turns}, K={floor.calls}: "
        f"{floor.records_per_call:.1f} records per call built and exported, no harness (us/call)"
    )
    columns = ["stream alone", "target's room", "stream / room", "run - no sink"]
    return format_table(title, "sink", columns, rows)


def stream_json(floor: StreamFloor) -> dict[str, float]:
    """The measurement as JSON."""
    return {
        "turns": floor.turns,
        "calls": floor.calls,
        "recordsPerCall": floor.records_per_call,
        "memoryMicrosecondsPerCall": floor.memory_us_per_call,
        "ndjsonMicrosecondsPerCall": floor.ndjson_us_per_call,
    }

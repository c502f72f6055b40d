"""How fast the SQLite trace store appends, against plain `sqlite3` inserts of the same rows.

Run with `python benchmarks/bench_trace_store.py [RECORDS]`. Each measurement uses a fresh
temporary database with the store's table, indexes and triggers, opened before the clock
starts and closed before it stops. The floor inserts the store's own rows, already built,
with `executemany`, once in one transaction (the floor) and once in transactions of 64
rows (the store's commit size); the store validates each record, builds its row, and
commits in batches of 64. The script also prints the cost of `validate_record`
for the record kinds an agent emits most.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from tubeless.trace import SqliteTraceStore, validate_record
from tubeless.trace._sqlite_rows import INSERT, record_row

GOAL_RATIO = 2.0
REPEATS = 5


def agent_records(count: int) -> list[dict[str, Any]]:
    """Return `count` records shaped like an agent's tool-call runs."""
    records: list[dict[str, Any]] = []
    for index in range(count):
        turn = index // 40
        context = {
            "version": 3,
            "pipelineId": "research-agent/tool/search",
            "runId": f"tool-run-{index // 4}",
            "parentRunId": f"turn-run-{turn}",
            "correlationId": "corr-1",
            "itemKey": f"call-{index // 4}",
            "timestampMs": 1_700_000_000_000 + index,
            "stepId": "tool",
            "attemptId": f"attempt-{index // 4}",
        }
        kind = index % 4
        if kind == 0:
            record = {**context, "name": "step.running", "payload": {}}
        elif kind == 1:
            attributes = {
                "agent.runId": "agent-run-1",
                "agent.turn": turn + 1,
                "agent.callId": f"call-{index // 4}",
                "agent.tool": "search",
                "agent.parentAttemptId": f"calls-attempt-{turn}",
            }
            payload = {"attempt": 1, "attributes": attributes}
            record = {**context, "name": "step.attempted", "payload": payload}
        elif kind == 2:
            payload = {"level": "log", "message": f"searched for item {index}"}
            record = {**context, "name": "pipeline.log", "payload": payload}
        else:
            payload = {"status": "completed"}
            record = {**context, "name": "step.complete", "durationMs": 1.25, "payload": payload}
        records.append(record)
    return records


def store_seconds(records: list[dict[str, Any]], path: Path) -> float:
    """Time exporting every record through `SqliteTraceStore`, commit included."""
    store = SqliteTraceStore(path)
    started = time.perf_counter()
    for record in records:
        store.export(record)
    store.close()
    return time.perf_counter() - started


def floor_seconds(
    records: list[dict[str, Any]], path: Path, batch: int, *, encode_inside: bool = False
) -> float:
    """Time plain `executemany` inserts of the same rows, `batch` rows per transaction.

    With `encode_inside` the rows (their JSON columns) are built inside the clock too.
    """
    SqliteTraceStore(path).close()  # same table, indexes, triggers and pragmas
    rows = [] if encode_inside else [record_row(record) for record in records]
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    if encode_inside:
        rows = [record_row(record) for record in records]
    for start in range(0, len(rows), batch):
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(INSERT, rows[start : start + batch])
        connection.execute("COMMIT")
    connection.close()  # as the store's close(), this checkpoints the WAL
    return time.perf_counter() - started


def validation_microseconds(records: list[dict[str, Any]]) -> dict[str, float]:
    """Return the mean cost of `validate_record` per record kind, in microseconds."""
    costs = {}
    for record in records[:4]:
        runs = 20_000
        seconds = timeit.timeit(lambda record=record: validate_record(record), number=runs)
        costs[record["name"]] = seconds / runs * 1e6
    return costs


def main() -> int:
    """Print records per second for the store and the floor, and their ratio."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    records = agent_records(count)
    store = floor = batched = float("inf")
    with tempfile.TemporaryDirectory() as directory:
        for attempt in range(REPEATS):  # interleaved, best of each, to damp machine noise
            base = Path(directory)
            store = min(store, store_seconds(records, base / f"store-{attempt}"))
            floor = min(floor, floor_seconds(records, base / f"floor-{attempt}", count))
            batched = min(batched, floor_seconds(records, base / f"batched-{attempt}", 64))
    print(f"records:                          {count}")
    print(f"SqliteTraceStore:                 {count / store:12,.0f} records/s")
    print(f"sqlite3 executemany, 1 commit:    {count / floor:12,.0f} records/s")
    print(f"sqlite3 executemany, 64 per commit: {count / batched:10,.0f} records/s")
    print(
        f"ratio store / 1-commit floor:     {store / floor:.2f}x (goal: within {GOAL_RATIO:.0f}x)"
    )
    print(f"ratio store / 64-per-commit floor: {store / batched:.2f}x")
    print("validate_record per record:")
    for name, cost in validation_microseconds(records).items():
        print(f"  {name:16s} {cost:6.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

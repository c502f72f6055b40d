"""SQLite's own share of a traced agent run: the records a tool call emits, inserted alone.

The trace stream of a run is fixed by the specification (eight records per tool run,
plus each turn's), and so is the store's table with its three indexes. This measures,
for each K, how many records W(N, K) emits per tool call and what inserting exactly
those rows costs SQLite with nothing else running: building each row's JSON and
`executemany` in transactions of 64 (the store's commit size) into a fresh store file,
best of 3. Added to the harness's own cost with no sink, it gives the least
`tubeless + SqliteTraceStore` could cost if building, checking and delivering every
record were free.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from _measure import format_table
from bench_agent import AgentFigures, build_agent, run_agent
from bench_trace_store import floor_seconds

from tubeless.testing import MemoryTraceSink

REPEATS = 3
COMMIT_SIZE = 64


@dataclasses.dataclass(frozen=True, slots=True)
class InsertShare:
    """Records per tool call at one K and SQLite's cost of inserting them."""

    calls: int
    """K."""
    records_per_call: float
    """Records the run emitted, over N * K."""
    insert_us_per_call: float
    """Seconds to insert all those rows, over N * K, in microseconds."""


def measure_inserts(turns: int, calls: int) -> InsertShare:
    """Count the records of one W(turns, calls) run and time inserting their rows."""
    sink = MemoryTraceSink()
    run_agent(build_agent(turns, calls), {"tracing": sink})
    records = [dict(record) for record in sink.records]
    best = float("inf")
    with tempfile.TemporaryDirectory() as directory:
        for attempt in range(REPEATS):
            path = Path(directory) / f"inserts-{attempt}.sqlite"
            best = min(best, floor_seconds(records, path, COMMIT_SIZE, encode_inside=True))
    total = turns * calls
    return InsertShare(calls, len(records) / total, best / total * 1e6)


def format_inserts(shares: list[InsertShare], figures: AgentFigures) -> list[str]:
    """The table: records/call, inserts us/call and x floor (2), and no sink + inserts."""
    turns = figures.grid.turns[-1]
    rows = []
    for share in shares:
        floor = figures.per_call("floor2", turns, share.calls)
        bound = figures.per_call("none", turns, share.calls) + share.insert_us_per_call
        rows.append(
            (
                f"K={share.calls}",
                [
                    f"{share.records_per_call:.1f}",
                    f"{share.insert_us_per_call:.1f}",
                    f"{share.insert_us_per_call / floor:.1f}x",
                    f"{bound / floor:.1f}x",
                ],
            )
        )
    title = (
        f"SQLite's share at N={turns}: records per tool call, their inserts alone "
        f"(JSON + executemany, {COMMIT_SIZE} per commit, one thread), x floor (2)"
    )
    columns = ["records/call", "inserts us/call", "x floor 2", "no sink + inserts"]
    return format_table(title, "", columns, rows)


def inserts_json(shares: list[InsertShare]) -> list[dict[str, float]]:
    """The measurements as JSON."""
    return [
        {
            "calls": share.calls,
            "recordsPerCall": share.records_per_call,
            "insertMicrosecondsPerCall": share.insert_us_per_call,
        }
        for share in shares
    ]

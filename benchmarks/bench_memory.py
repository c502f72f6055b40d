"""Peak memory of long agent runs: does a 10,000-turn run need more than a 1,000-turn one?

The W(N, 1) agent of `bench_agent` (constant-size state, the counting reducer, no sink) is
defined first; then `tracemalloc` starts, the run goes, and the peak of traced memory
above the level at the start is the figure. What the returned run report still holds
once the run is over is reported too. A short untraced run first fills the caches a
first run fills (compiled schemas, plans), so they do not count against the first size.
`tracemalloc` slows the run down; only memory is measured here.

CPython keeps up to 2,000 freed tuples of each small size for reuse, and `tracemalloc`
counts a kept tuple as allocated where it was first made. Those lists fill over a run's
first 2,000 turns, whatever the run holds (about 110 bytes a turn here), so they are
filled before tracing starts: the peak is then what the run itself holds.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from typing import Any

from _measure import Verdict, format_table
from bench_agent import build_agent, run_agent

FULL_TURNS = (1_000, 2_000, 10_000)
QUICK_TURNS = (1_000, 2_000, 4_000)
FLAT_LIMIT = 1.5


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryFigure:
    """Memory of one traced run."""

    turns: int
    """Turns of the run (one call each)."""
    peak: int
    """Peak traced bytes during the run, above the level before it."""
    retained: int
    """Traced bytes still held after the run while its report is alive."""


TUPLE_FREE_LIST = 2_000
"""How many freed tuples of each size from 1 to 20 CPython keeps (`PyTuple_MAXFREELIST`)."""


def fill_tuple_free_lists() -> None:
    """Make and free `TUPLE_FREE_LIST` tuples of each kept size, filling CPython's lists."""
    for size in range(1, 21):
        items = [None] * size
        made = [tuple(items) for _ in range(TUPLE_FREE_LIST)]
        del made


def traced_run(turns: int) -> MemoryFigure:
    """Run W(turns, 1) under `tracemalloc` and return its peak and retained bytes."""
    agent = build_agent(turns, 1)
    gc.collect()
    fill_tuple_free_lists()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run_agent(agent)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if result["n"] != turns:
        raise RuntimeError(f"memory run committed {result['n']} calls, not {turns}")
    return MemoryFigure(turns, peak - before, current - before)


def measure_memory(quick: bool) -> list[MemoryFigure]:
    """Warm up untraced, then trace one run per size, smallest first."""
    run_agent(build_agent(50, 1))
    return [traced_run(turns) for turns in (QUICK_TURNS if quick else FULL_TURNS)]


def format_memory(figures: list[MemoryFigure]) -> list[str]:
    """The table of peaks, retained bytes and growth against the smallest run."""
    base = figures[0]
    rows = [
        (
            f"{figure.turns:,}",
            [
                f"{figure.peak / 1024:,.0f}",
                f"{figure.peak / base.peak:.2f}x",
                f"{figure.retained / 1024:,.0f}",
            ],
        )
        for figure in figures
    ]
    lines = format_table(
        "Peak memory (tracemalloc), W(N, 1), no sink",
        "turns",
        ["peak KiB", f"peak / {base.turns:,}", "retained KiB"],
        rows,
    )
    last = figures[-1]
    slope = (last.peak - base.peak) / (last.turns - base.turns)
    lines.append(f"  peak growth: {slope:,.1f} bytes per extra turn")
    return lines


def memory_verdict(figures: list[MemoryFigure]) -> Verdict:
    """Flat means the longest run's peak is within 1.5x of the shortest run's."""
    base, last = figures[0], figures[-1]
    return Verdict(
        target=f"memory flat: peak of {last.turns:,} turns vs {base.turns:,} turns",
        value=last.peak / base.peak,
        limit=FLAT_LIMIT,
        detail=f"{last.peak / 1024:,.0f} KiB vs {base.peak / 1024:,.0f} KiB",
    )


def memory_json(figures: list[MemoryFigure]) -> list[dict[str, Any]]:
    """The figures as JSON."""
    return [
        {"turns": figure.turns, "peakBytes": figure.peak, "retainedBytes": figure.retained}
        for figure in figures
    ]

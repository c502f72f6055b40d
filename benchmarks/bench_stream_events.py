"""`pipeline.stream`'s cost per tool call, against a `MemoryTraceSink` and an untraced run.

Workload: W(N, K) of `bench_agent` (N turns of K `echo` calls). Four variants, each a
whole run: `none` (no sink), `memory` (a `MemoryTraceSink`: what any sink costs, the run
then builds and checks every record), `stream` (`with agent.stream({}) as events:` read to
the end on this thread) and `astream` (the same over asyncio, one `asyncio.run` per run).
The stream's own work is the `memory` sink's plus the projection into `RunEvent`s, the
bounded buffer and the reader's thread hops. The target of issue 36: the stream's
overhead over the untraced run within 1.3x of the memory sink's
((stream - none) / (memory - none) <= 1.3).

Each figure is the median of 5 repetitions (3 with --quick) divided by N * K, on two
clocks: wall time, and the CPU time of the whole process (every thread). The variants run
interleaved, in an order that rotates each repetition, after one warm-up run each; every
streamed run is checked to deliver one `call.finished` per call. Run alone with
`python benchmarks/bench_stream_events.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from _measure import Grid, GridSamples, Verdict, format_table, measure_grid, per_call, wall_and_cpu
from bench_agent import build_agent, run_agent

from tubeless.pipeline import Pipeline
from tubeless.testing import MemoryTraceSink

VARIANTS = ("none", "memory", "stream", "astream")
LIMIT = 1.3
"""The target: the stream's overhead at most this many times the memory sink's."""


FULL = Grid(turns=(200,), calls=(1, 4, 16), repeats=5)
QUICK = Grid(turns=(50,), calls=(1, 4), repeats=3)


def _check(finished: int, status: str, expected: int) -> None:
    if status != "completed" or finished != expected:
        raise RuntimeError(f"streamed run {status} with {finished}/{expected} calls finished")


def _stream(agent: Pipeline, expected: int) -> None:
    with agent.stream({}) as events:
        finished = sum(event.kind == "call.finished" for event in events)
    _check(finished, events.result.status, expected)


def _astream(agent: Pipeline, expected: int) -> None:
    async def read() -> None:
        async with agent.astream({}) as events:
            finished = 0
            async for event in events:
                finished += event.kind == "call.finished"
        _check(finished, events.result.status, expected)

    asyncio.run(read())


def run_timed(agent: Pipeline, variant: str, turns: int, calls: int) -> tuple[float, float]:
    """Time one whole run of `agent` as `variant`: (wall, CPU) seconds."""
    if variant == "none":
        return wall_and_cpu(lambda: run_agent(agent))
    if variant == "memory":
        return wall_and_cpu(lambda: run_agent(agent, {"tracing": MemoryTraceSink()}))
    read = _stream if variant == "stream" else _astream
    return wall_and_cpu(lambda: read(agent, turns * calls))


def measure(grid: Grid) -> GridSamples:
    """Every sample of the grid, wall and CPU, interleaved as the module says."""
    return measure_grid(grid, VARIANTS, build_agent, run_timed)


def overhead_ratio(samples: GridSamples, clock: str, variant: str, turns: int, calls: int) -> float:
    """(variant - none) / (memory - none), per call."""
    bare = per_call(samples, clock, "none", turns, calls)
    memory = per_call(samples, clock, "memory", turns, calls) - bare
    return (per_call(samples, clock, variant, turns, calls) - bare) / memory


def _table(grid: Grid, samples: GridSamples, clock: str) -> list[str]:
    rows = []
    for turns in grid.turns:
        for calls in grid.calls:
            figures = [per_call(samples, clock, v, turns, calls) for v in VARIANTS]
            cells = [f"{figure:.1f}" for figure in figures]
            cells += [
                f"{overhead_ratio(samples, clock, v, turns, calls):.2f}x"
                for v in ("stream", "astream")
            ]
            rows.append((f"N={turns},K={calls}", cells))
    columns = [*VARIANTS, "stream ovh/memory ovh", "astream ovh/memory ovh"]
    title = f"Run events, {clock} us per tool call, median of {grid.repeats}"
    return format_table(title, "", columns, rows)


def format_events(grid: Grid, samples: GridSamples) -> list[str]:
    """Two tables (wall clock, process CPU): us/call per variant and the overhead ratios."""
    return [*_table(grid, samples, "wall"), "", *_table(grid, samples, "cpu")]


def verdict(grid: Grid, samples: GridSamples) -> Verdict:
    """The target, judged on CPU time at the widest point (the least noisy figure)."""
    turns, calls = grid.turns[-1], grid.calls[-1]
    value = overhead_ratio(samples, "cpu", "stream", turns, calls)
    bare = per_call(samples, "cpu", "none", turns, calls)
    detail = (
        f"N={turns},K={calls}: stream +"
        f"{per_call(samples, 'cpu', 'stream', turns, calls) - bare:.1f} us, memory +"
        f"{per_call(samples, 'cpu', 'memory', turns, calls) - bare:.1f} us per call"
    )
    return Verdict(
        target="stream overhead vs memory sink overhead", value=value, limit=LIMIT, detail=detail
    )


def main(argv: Sequence[str]) -> int:
    """Measure and print the tables and the verdict."""
    grid = QUICK if "--quick" in argv else FULL
    samples = measure(grid)
    print("\n".join([*format_events(grid, samples), "", verdict(grid, samples).line()]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Shared pieces of the benchmarks: the clocks, the statistic, verdicts, text tables, and the
interleaved W(N, K) grid that the sink and stream benchmarks sample."""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def seconds(action: Callable[[], Any]) -> float:
    """Collect garbage, then time one call of `action` with `time.perf_counter`."""
    gc.collect()
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def wall_and_cpu(action: Callable[[], Any]) -> tuple[float, float]:
    """Collect garbage, then time one call of `action`: (wall, CPU of the whole process)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def median(samples: Sequence[float]) -> float:
    """The median of the samples (the statistic every benchmark reports)."""
    return statistics.median(samples)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One target of issue 7, judged on figures measured in this run."""

    target: str
    """What is judged, as the issue states it."""
    value: float
    """The measured ratio."""
    limit: float
    """The largest ratio that passes."""
    detail: str = ""
    """The figures behind the ratio."""

    @property
    def passed(self) -> bool:
        """Whether the measured ratio is within the limit."""
        return self.value <= self.limit

    def line(self) -> str:
        """One report line: PASS/FAIL, the target, the ratio against its limit."""
        status = "PASS" if self.passed else "FAIL"
        detail = f"  [{self.detail}]" if self.detail else ""
        return f"{status}  {self.target}: {self.value:.2f}x (limit {self.limit:g}x){detail}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the verdict."""
        return {
            "target": self.target,
            "value": self.value,
            "limit": self.limit,
            "passed": self.passed,
            "detail": self.detail,
        }


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  " + "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))


def format_table(
    title: str, corner: str, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]
) -> list[str]:
    """Render a titled text table: a header row, then one row per `(label, cells)`."""
    widths = [max(len(corner), *(len(label) for label, _ in rows))]
    for index, column in enumerate(columns):
        widths.append(max(len(column), *(len(cells[index]) for _, cells in rows)))
    lines = [title, _row([corner, *columns], widths)]
    lines.extend(_row([label, *cells], widths) for label, cells in rows)
    return lines


@dataclasses.dataclass(frozen=True, slots=True)
class Grid:
    """The W(N, K) points measured and how often."""

    turns: tuple[int, ...]
    """Values of N."""
    calls: tuple[int, ...]
    """Values of K."""
    repeats: int
    """Repetitions of a point (the median is reported), odd."""


GridSamples = dict[tuple[str, str, int, int], list[float]]
"""`(clock, variant, N, K)` -> seconds per whole run, one per repetition."""


def measure_grid(
    grid: Grid,
    variants: Sequence[str],
    build: Callable[[int, int], Any],
    run_timed: Callable[[Any, str, int, int], tuple[float, float]],
) -> GridSamples:
    """Every sample of the grid on both clocks: one warm-up run of each variant at each
    point, then `grid.repeats` rounds, the variants in an order that rotates each round so
    machine noise hits them all.

    Args:
        grid: The points and the repetitions.
        variants: The variants' names, as `run_timed` takes them.
        build: Makes the agent of one point from (N, K), before any clock.
        run_timed: Times one whole run of an agent as a variant: (wall, CPU) seconds.
    """
    agents = {(n, k): build(n, k) for n in grid.turns for k in grid.calls}
    for (turns, calls), agent in agents.items():  # warm-up
        for variant in variants:
            run_timed(agent, variant, turns, calls)
    samples: GridSamples = {}
    for repeat in range(grid.repeats):
        shift = repeat % len(variants)
        order = [*variants[shift:], *variants[:shift]]
        for (turns, calls), agent in agents.items():
            for variant in order:
                wall, cpu = run_timed(agent, variant, turns, calls)
                samples.setdefault(("wall", variant, turns, calls), []).append(wall)
                samples.setdefault(("cpu", variant, turns, calls), []).append(cpu)
    return samples


def per_call(samples: GridSamples, clock: str, variant: str, turns: int, calls: int) -> float:
    """Median microseconds per tool call of one variant at one point, on one clock."""
    return median(samples[(clock, variant, turns, calls)]) / (turns * calls) * 1e6

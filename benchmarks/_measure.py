"""Shared pieces of the benchmarks: the clock, the statistic, verdicts and text tables."""

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

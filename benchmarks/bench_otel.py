"""The live `OtelTraceSink`'s cost per tool call, as a ratio to the same agent with no sink.

Workload: W(N, K) of `bench_agent` (N turns of K `echo` calls). Three variants: no sink,
`MemoryTraceSink` (what any sink costs: the run then builds and checks every record) and
`OtelTraceSink`; otel/none is the figure asked for, otel/memory the sink's own share. The
sink runs on the SDK's `TracerProvider` with a `BatchSpanProcessor` (the processor a
service uses) in front of an exporter that counts the spans and drops them, so the figure
is the sink's and the SDK's cost, not a network's. The provider is made before the clock;
the sink's `close()` and the provider's `force_flush()` (every span handed to the
exporter) are inside it, and the exporter's count proves every span arrived.

Each figure is the median of 5 repetitions (3 with --quick) of the whole run, divided by
N * K; the variants run interleaved, in an order that rotates each repetition, so machine
noise hits them all. Run alone with `python benchmarks/bench_otel.py [--quick]`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from _measure import format_table, median, seconds
from bench_agent import build_agent, run_agent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tubeless.pipeline import Pipeline
from tubeless.testing import MemoryTraceSink
from tubeless.trace.otel import OtelTraceSink

VARIANTS = ("none", "memory", "otel")


@dataclasses.dataclass(frozen=True, slots=True)
class OtelGrid:
    """The points measured and how often."""

    turns: tuple[int, ...]
    """Values of N."""
    calls: tuple[int, ...]
    """Values of K."""
    repeats: int
    """Repetitions of a point (the median is reported), odd."""


FULL = OtelGrid(turns=(50, 200), calls=(1, 4, 16), repeats=5)
QUICK = OtelGrid(turns=(20,), calls=(1, 4), repeats=3)


class CountingExporter(SpanExporter):
    """Counts the spans it is given and drops them."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def spans_expected(turns: int, calls: int) -> int:
    """W(N, K)'s spans: the agent, N + 1 turns of 3 steps, N * K calls."""
    return 1 + (turns + 1) * 4 + turns * calls


def run_seconds(agent: Pipeline, variant: str, turns: int, calls: int) -> float:
    """Time one whole run of `agent`, with the live sink when `variant` is "otel"."""
    if variant == "none":
        return seconds(lambda: run_agent(agent))
    if variant == "memory":
        return seconds(lambda: run_agent(agent, {"tracing": MemoryTraceSink()}))
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    sink = OtelTraceSink(provider)

    def run() -> None:
        run_agent(agent, {"tracing": sink})
        sink.close()
        provider.force_flush()

    elapsed = seconds(run)
    provider.shutdown()
    if exporter.count != spans_expected(turns, calls) or sink.failures:
        raise RuntimeError(f"otel run exported {exporter.count} spans, {sink.failures} failures")
    return elapsed


def measure(grid: OtelGrid) -> dict[tuple[str, int, int], list[float]]:
    """Every sample: `(variant, N, K)` -> seconds per whole run, one per repetition."""
    agents = {(n, k): build_agent(n, k) for n in grid.turns for k in grid.calls}
    for (turns, calls), agent in agents.items():  # warm-up
        for variant in VARIANTS:
            run_seconds(agent, variant, turns, calls)
    samples: dict[tuple[str, int, int], list[float]] = {}
    for repeat in range(grid.repeats):
        shift = repeat % len(VARIANTS)
        order = VARIANTS[shift:] + VARIANTS[:shift]
        for (turns, calls), agent in agents.items():
            for variant in order:
                elapsed = run_seconds(agent, variant, turns, calls)
                samples.setdefault((variant, turns, calls), []).append(elapsed)
    return samples


def per_call(samples: dict[tuple[str, int, int], list[float]], key: tuple[str, int, int]) -> float:
    """Median microseconds per tool call."""
    return median(samples[key]) / (key[1] * key[2]) * 1e6


def format_otel(grid: OtelGrid, samples: dict[tuple[str, int, int], list[float]]) -> list[str]:
    """One row per point: us/call without and with the sink, the added cost and the ratio."""
    rows = []
    for turns in grid.turns:
        for calls in grid.calls:
            bare = per_call(samples, ("none", turns, calls))
            memory = per_call(samples, ("memory", turns, calls))
            live = per_call(samples, ("otel", turns, calls))
            cells = [f"{bare:.1f}", f"{memory:.1f}", f"{live:.1f}", f"{live / bare:.2f}x"]
            cells += [f"{live / memory:.2f}x", f"{live - memory:.1f}"]
            rows.append((f"N={turns},K={calls}", cells))
    columns = ["no sink", "memory sink", "otel sink", "otel/none", "otel/memory", "otel-memory"]
    title = f"OtelTraceSink (BatchSpanProcessor): us per tool call, median of {grid.repeats}"
    return format_table(title, "", columns, rows)


def otel_json(grid: OtelGrid, samples: dict[tuple[str, int, int], list[float]]) -> dict[str, Any]:
    """The figures as JSON: per-call medians, ratios and raw samples."""
    points = [(n, k) for n in grid.turns for k in grid.calls]
    return {
        "grid": dataclasses.asdict(grid),
        "perCallMicroseconds": {
            variant: {f"{n},{k}": per_call(samples, (variant, n, k)) for n, k in points}
            for variant in VARIANTS
        },
        "ratioToNoSink": {
            f"{n},{k}": per_call(samples, ("otel", n, k)) / per_call(samples, ("none", n, k))
            for n, k in points
        },
        "ratioToMemorySink": {
            f"{n},{k}": per_call(samples, ("otel", n, k)) / per_call(samples, ("memory", n, k))
            for n, k in points
        },
        "samplesSeconds": {f"{v},{n},{k}": samples[v, n, k] for v, n, k in samples},
    }


def main(argv: Sequence[str]) -> int:
    """Measure and print the table."""
    grid = QUICK if "--quick" in argv else FULL
    print("\n".join(format_otel(grid, measure(grid))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

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
N * K, on two clocks: wall time, and the CPU time of the whole process (every thread; less
hit by other processes on a loaded machine). The variants run interleaved, in an order
that rotates each repetition, so machine noise hits them all. Run alone with
`python benchmarks/bench_otel.py [--quick]`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from _measure import Grid, GridSamples, format_table, measure_grid, per_call, wall_and_cpu
from bench_agent import build_agent, run_agent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tubeless.pipeline import Pipeline
from tubeless.testing import MemoryTraceSink
from tubeless.trace.otel import OtelTraceSink

VARIANTS = ("none", "memory", "otel")


FULL = Grid(turns=(50, 200), calls=(1, 4, 16), repeats=5)
QUICK = Grid(turns=(20,), calls=(1, 4), repeats=3)


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


def run_timed(agent: Pipeline, variant: str, turns: int, calls: int) -> tuple[float, float]:
    """Time one whole run of `agent` with the sink `variant`: (wall, CPU) seconds."""
    if variant == "none":
        return wall_and_cpu(lambda: run_agent(agent))
    if variant == "memory":
        return wall_and_cpu(lambda: run_agent(agent, {"tracing": MemoryTraceSink()}))
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    sink = OtelTraceSink(provider)

    def run() -> None:
        run_agent(agent, {"tracing": sink})
        sink.close()
        provider.force_flush()

    elapsed = wall_and_cpu(run)
    provider.shutdown()
    if exporter.count != spans_expected(turns, calls) or sink.failures:
        raise RuntimeError(f"otel run exported {exporter.count} spans, {sink.failures} failures")
    return elapsed


def measure(grid: Grid) -> GridSamples:
    """Every sample of the grid, wall and CPU, interleaved as the module says."""
    return measure_grid(grid, VARIANTS, build_agent, run_timed)


def _table(grid: Grid, samples: GridSamples, clock: str) -> list[str]:
    rows = []
    for turns in grid.turns:
        for calls in grid.calls:
            bare = per_call(samples, clock, "none", turns, calls)
            memory = per_call(samples, clock, "memory", turns, calls)
            live = per_call(samples, clock, "otel", turns, calls)
            cells = [f"{bare:.1f}", f"{memory:.1f}", f"{live:.1f}", f"{live / bare:.2f}x"]
            cells += [f"{live / memory:.2f}x", f"{live - memory:.1f}"]
            rows.append((f"N={turns},K={calls}", cells))
    columns = ["no sink", "memory sink", "otel sink", "otel/none", "otel/memory", "otel-memory"]
    title = f"OtelTraceSink (BatchSpanProcessor), {clock} us per tool call"
    return format_table(f"{title}, median of {grid.repeats}", "", columns, rows)


def format_otel(grid: Grid, samples: GridSamples) -> list[str]:
    """Two tables (wall clock, process CPU): us/call per variant, ratios, the sink's share."""
    return [*_table(grid, samples, "wall"), "", *_table(grid, samples, "cpu")]


def otel_json(grid: Grid, samples: GridSamples) -> dict[str, Any]:
    """The figures as JSON: per-call medians and ratios for each clock, and raw samples."""
    points = [(n, k) for n in grid.turns for k in grid.calls]

    def ratio(clock: str, over: str, n: int, k: int) -> float:
        return per_call(samples, clock, "otel", n, k) / per_call(samples, clock, over, n, k)

    return {
        clock: {
            "perCallMicroseconds": {
                variant: {f"{n},{k}": per_call(samples, clock, variant, n, k) for n, k in points}
                for variant in VARIANTS
            },
            "ratioToNoSink": {f"{n},{k}": ratio(clock, "none", n, k) for n, k in points},
            "ratioToMemorySink": {f"{n},{k}": ratio(clock, "memory", n, k) for n, k in points},
        }
        for clock in ("wall", "cpu")
    } | {
        "grid": dataclasses.asdict(grid),
        "samplesSeconds": {",".join(map(str, key)): value for key, value in samples.items()},
    }


def main(argv: Sequence[str]) -> int:
    """Measure and print the table."""
    grid = QUICK if "--quick" in argv else FULL
    print("\n".join(format_otel(grid, measure(grid))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

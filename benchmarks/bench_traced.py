"""Traced runs restated per record: each sink's cost over the untraced run (issue 39, item 4).

Workload W(N, 4) of `bench_agent.py`. In one process, interleaved in an order that rotates
each repetition (medians of the repetitions): the untraced run, the run traced into a
`MemoryTraceSink` and into an `NdjsonTraceSink` (closed inside the clock), the inline
floor of `bench_agent.py` (validated calls on the calling thread, no harness), and the
record stream of `bench_stream.py` (the run's own records built and exported into each
sink with no harness at all). The targets, both ratios of figures measured here:

- NDJSON: (traced run - untraced run) per call is at most 1.3x the NDJSON stream's cost;
- memory: (traced run - untraced run) per record is at most a quarter of one inline
  validated tool call.

    python benchmarks/bench_traced.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from _measure import Verdict, format_table, median
from bench_agent import ValidatedEcho, agent_seconds, build_agent, inline_seconds
from bench_stream import _replay_seconds, _replay_steps

from tubeless.testing import MemoryTraceSink
from tubeless.trace import NdjsonTraceSink

CALLS = 4
NDJSON_LIMIT = 1.3
"""The NDJSON run's cost above the untraced run, over the stream's own cost."""
MEMORY_LIMIT = 0.25
"""The memory run's cost per record above the untraced run, over one inline call."""
VARIANTS = ("none", "memory", "ndjson", "inline", "stream memory", "stream ndjson")


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How long the run is and how often it repeats."""

    turns: int
    repeats: int


FULL = Plan(turns=800, repeats=7)
QUICK = Plan(turns=200, repeats=3)


@dataclasses.dataclass(frozen=True, slots=True)
class Traced:
    """Median microseconds per call of every variant, and records per call."""

    per_call: dict[str, float]
    records_per_call: float

    def above(self, sink: str) -> float:
        """A sink's run over the untraced run, microseconds per call."""
        return self.per_call[sink] - self.per_call["none"]

    def ndjson_ratio(self) -> float:
        """The NDJSON run's cost above untraced over the NDJSON stream's cost."""
        return self.above("ndjson") / self.per_call["stream ndjson"]

    def memory_per_record(self) -> float:
        """The memory run's cost above untraced, microseconds per record."""
        return self.above("memory") / self.records_per_call

    def memory_ratio(self) -> float:
        """The memory run's cost per record over one inline validated call."""
        return self.memory_per_record() / self.per_call["inline"]


def measure(plan: Plan) -> Traced:
    """Every variant `plan.repeats` times, interleaved; medians per call."""
    agent = build_agent(plan.turns, CALLS)
    steps = _replay_steps(plan.turns, CALLS)
    task = ValidatedEcho()
    total = plan.turns * CALLS
    samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as directory:

        def once(variant: str, index: int) -> float:
            if variant == "inline":
                return inline_seconds(plan.turns, CALLS, task)
            if variant == "stream memory":
                return _replay_seconds(steps, MemoryTraceSink())
            if variant == "stream ndjson":
                path = Path(directory) / f"stream-{index}.ndjson"
                return _replay_seconds(steps, NdjsonTraceSink(path))
            return agent_seconds(agent, variant, total)

        for variant in VARIANTS:  # warm up
            once(variant, -1)
        for repeat in range(plan.repeats):
            shift = repeat % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                samples[variant].append(once(variant, repeat))
    per_call = {variant: median(runs) / total * 1e6 for variant, runs in samples.items()}
    return Traced(per_call, len(steps) / total)


def format_traced(traced: Traced, plan: Plan) -> list[str]:
    """The per-call table and the two restated targets."""
    rows = [(variant, [f"{traced.per_call[variant]:.1f}"]) for variant in VARIANTS]
    title = (
        f"Traced runs, W({plan.turns}, {CALLS}), {traced.records_per_call:.1f} records per "
        "call: us per call"
    )
    lines = format_table(title, "variant", ["us/call"], rows)
    lines.append(
        f"  ndjson run - untraced: {traced.above('ndjson'):.1f} us/call = "
        f"{traced.ndjson_ratio():.2f}x the ndjson stream (limit {NDJSON_LIMIT}x)"
    )
    lines.append(
        f"  memory run - untraced: {traced.memory_per_record():.2f} us/record = "
        f"{traced.memory_ratio():.2f} inline calls (limit {MEMORY_LIMIT})"
    )
    return lines


def verdicts(traced: Traced) -> list[Verdict]:
    """The two targets of issue 39, item 4."""
    above, stream = traced.above("ndjson"), traced.per_call["stream ndjson"]
    return [
        Verdict(
            target="ndjson run above untraced / ndjson stream",
            value=traced.ndjson_ratio(),
            limit=NDJSON_LIMIT,
            detail=f"{above:.1f} vs {stream:.1f} us/call",
        ),
        Verdict(
            target="memory run above untraced per record / inline call",
            value=traced.memory_ratio(),
            limit=MEMORY_LIMIT,
            detail=(
                f"{traced.memory_per_record():.2f} us/record vs "
                f"{traced.per_call['inline']:.1f} us/call"
            ),
        ),
    ]


def traced_json(traced: Traced) -> dict[str, Any]:
    """The figures as JSON."""
    return {
        "microsecondsPerCall": traced.per_call,
        "recordsPerCall": traced.records_per_call,
        "ndjsonOverStream": traced.ndjson_ratio(),
        "memoryPerRecordOverInline": traced.memory_ratio(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    plan = QUICK if parser.parse_args().quick else FULL
    traced = measure(plan)
    print("\n".join(format_traced(traced, plan)))
    for verdict in verdicts(traced):
        print(verdict.line())


if __name__ == "__main__":
    main()

"""Deadlines: what `timeout=` adds to a tool call that finishes in time.

One agent makes N turns of one call each, to a tool with and without `timeout=60`; the
two run interleaved, and each figure is the median of several runs, per call. A call with
a deadline runs its handler on a thread of its own (a thread cannot be stopped, so the
call's thread must be free to give up at the deadline): that hand-off, two thread
wake-ups, is the cost, and it grows with the machine's load. Three handlers: one that
waits 20 ms (a tool that needs a deadline waits on a slow API: the target, within 5%),
one that waits 2 ms and one that returns at once (the hand-off alone), for information.

Usage: `python benchmarks/bench_deadlines.py [--quick]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from _measure import Verdict, format_table, median, seconds

from tubeless.agent import define_agent, define_tool

LIMIT = 1.05


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How much to measure."""

    turns: int
    """Calls per run (one per turn)."""
    repeats: int
    """Runs of each variant (interleaved)."""


QUICK = Plan(turns=20, repeats=5)
FULL = Plan(turns=100, repeats=11)

HANDLERS: dict[str, Callable[[Any, Any], Any]] = {
    "waits 20 ms": lambda value, context: time.sleep(0.02),
    "waits 2 ms": lambda value, context: time.sleep(0.002),
    "returns at once": lambda value, context: None,
}


def build(turns: int, handler: Callable[[Any, Any], Any], timeout: float | None) -> Any:
    """An agent that calls `handler` once per turn for `turns` turns, then finishes."""
    call = {"kind": "continue", "calls": [{"id": "c", "tool": "t", "input": {}}]}
    finish = {"kind": "finish", "result": None}
    tool = define_tool(
        description="t", input_schema={}, output_schema={}, run=handler, timeout=timeout
    )
    return define_agent(
        id="deadline-bench",
        input_schema={},
        result_schema={},
        initial_state=lambda options: None,
        decide=lambda state, context: call if context.turn <= turns else finish,
        tools={"t": tool},
        limits={"max_turns": turns + 1, "max_calls": turns, "max_decisions": turns + 1},
    )


def measure(plan: Plan) -> dict[str, dict[str, float]]:
    """Microseconds per call (median) for each handler, without and with a deadline."""
    figures: dict[str, dict[str, float]] = {}
    for name, handler in HANDLERS.items():
        agents = {
            "none": build(plan.turns, handler, None),
            "timeout": build(plan.turns, handler, 60.0),
        }
        samples: dict[str, list[float]] = {variant: [] for variant in agents}
        for agent in agents.values():  # warm up
            assert agent.run({}).status == "completed"
        for _ in range(plan.repeats):
            for variant, agent in agents.items():
                samples[variant].append(seconds(lambda agent=agent: agent.run({})))
        figures[name] = {
            variant: median(values) / plan.turns * 1e6 for variant, values in samples.items()
        }
    return figures


def format_deadlines(figures: dict[str, dict[str, float]], plan: Plan) -> list[str]:
    """The table: per-call microseconds without and with a deadline, and the ratio."""
    rows = [
        (
            name,
            [
                f"{row['none']:.0f}",
                f"{row['timeout']:.0f}",
                f"{row['timeout'] - row['none']:.0f}",
                f"{row['timeout'] / row['none']:.3f}",
            ],
        )
        for name, row in figures.items()
    ]
    title = f"us per call, {plan.turns} calls per run, median of {plan.repeats} interleaved runs"
    return format_table(title, "handler", ["no deadline", "timeout=60", "added", "ratio"], rows)


def verdict(figures: dict[str, dict[str, float]]) -> Verdict:
    """The target: a deadline within 5% of the same call without one (20 ms handler)."""
    row = figures["waits 20 ms"]
    return Verdict(
        target="a call with a deadline vs the same call without (handler waits 20 ms)",
        value=row["timeout"] / row["none"],
        limit=LIMIT,
        detail=f"{row['timeout']:.0f} us vs {row['none']:.0f} us per call",
    )


def main() -> None:
    """Measure and print the table and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and runs")
    plan = QUICK if parser.parse_args().quick else FULL
    figures = measure(plan)
    print("\n".join(format_deadlines(figures, plan)))
    print(verdict(figures).line())


if __name__ == "__main__":
    main()

"""The cost of one delegation (a `pipeline_tool` call of a subagent) against a handler call.

Workload: a parent agent that, for turns 1..N, continues with a batch of K calls of one
tool, then finishes. Two tools are measured the same way: `echo` (a handler tool,
`{"x": integer}` in, the integer out) and `delegate` (a `pipeline_tool` of a child agent
with the same input, whose `decide` finishes at once with `x`: one child agent run, one
child turn, one decision, charged to the shared budget tree). No trace sink.

The marginal cost of one call is the slope between K=1 and K=KMAX at the same N:
`(T(N, KMAX) - T(N, 1)) / (N * (KMAX - 1))`, which takes the turn's own cost out. Each
T is the median of the repetitions; echo and delegate points run interleaved, in an order
that rotates each repetition, so machine noise hits both. The figure reported is the
ratio of the two slopes (a delegation costs that many handler calls).

    python benchmarks/bench_delegation.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from _measure import format_table, median, seconds

from tubeless.agent import define_agent, define_tool, pipeline_tool

ECHO_INPUT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}
TOOLS = ("echo", "delegate")


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How long the runs are and how often they repeat."""

    turns: int
    """Turns of each run (N)."""
    widest: int
    """The larger batch size (KMAX)."""
    repeats: int
    """Runs of each point (the median is kept), odd."""


FULL = Plan(turns=200, widest=8, repeats=5)
QUICK = Plan(turns=40, widest=4, repeats=3)


def _child() -> Any:
    return define_agent(
        id="child",
        input_schema=ECHO_INPUT,
        result_schema={"type": "integer"},
        initial_state=lambda options: {"x": options["x"]},
        decide=lambda state, context: {"kind": "finish", "result": state["x"]},
    )


def _tools() -> dict[str, Any]:
    echo = define_tool(
        description="Echo x",
        input_schema=ECHO_INPUT,
        output_schema={"type": "integer"},
        run=lambda value, context: value["x"],
    )
    return {"echo": echo, "delegate": pipeline_tool(_child(), description="Delegate x")}


def build_parent(tool: str, turns: int, width: int) -> Any:
    """A parent that runs `turns` batches of `width` calls of `tool`, then finishes."""

    def decide(state: Any, context: Any) -> Any:
        if context.turn > turns:
            return {"kind": "finish", "result": state["n"]}
        calls = [{"id": f"c{i}", "tool": tool, "input": {"x": i}} for i in range(width)]
        return {"kind": "continue", "calls": calls}

    return define_agent(
        id=f"parent-{tool}",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {"n": 0},
        decide=decide,
        reduce=lambda state, outcomes: {"n": state["n"] + len(outcomes)},
        tools=_tools(),
        limits={
            "max_turns": turns + 1,
            "max_decisions": (turns + 1) * (1 + width),
            "max_calls": turns * width,
        },
    )


def _run(agent: Any, expected: int) -> None:
    run = agent.run({})
    if run.status != "completed" or run.value != expected:
        raise RuntimeError(f"benchmark run did not complete: {run.errors}")


def measure(plan: Plan) -> dict[str, dict[int, float]]:
    """Median seconds of each (tool, batch size) point."""
    widths = (1, plan.widest)
    points = [(tool, width) for tool in TOOLS for width in widths]
    agents = {point: build_parent(point[0], plan.turns, point[1]) for point in points}
    samples: dict[tuple[str, int], list[float]] = {point: [] for point in points}
    for repeat in range(plan.repeats):
        shift = repeat % len(points)
        for point in points[shift:] + points[:shift]:
            expected = plan.turns * point[1]
            samples[point].append(seconds(lambda p=point, e=expected: _run(agents[p], e)))
    result: dict[str, dict[int, float]] = {tool: {} for tool in TOOLS}
    for (tool, width), values in samples.items():
        result[tool][width] = median(values)
    return result


def slopes(measured: dict[str, dict[int, float]], plan: Plan) -> dict[str, float]:
    """Marginal seconds of one call of each tool."""
    calls = plan.turns * (plan.widest - 1)
    return {tool: (points[plan.widest] - points[1]) / calls for tool, points in measured.items()}


def format_delegation(measured: dict[str, dict[int, float]], plan: Plan) -> list[str]:
    """The report: run times, marginal cost per call, and the ratio."""
    marginal = slopes(measured, plan)
    rows = [
        (
            tool,
            [
                f"{measured[tool][1] * 1e3:.1f}",
                f"{measured[tool][plan.widest] * 1e3:.1f}",
                f"{marginal[tool] * 1e6:.1f}",
            ],
        )
        for tool in TOOLS
    ]
    lines = format_table(
        f"N={plan.turns} turns, median of {plan.repeats}",
        "tool",
        ["ms K=1", f"ms K={plan.widest}", "us per call"],
        rows,
    )
    lines.append(f"one delegation costs {ratio(measured, plan):.1f} handler-tool calls")
    return lines


def ratio(measured: dict[str, dict[int, float]], plan: Plan) -> float:
    """Marginal cost of a delegation over that of a handler call."""
    marginal = slopes(measured, plan)
    return marginal["delegate"] / marginal["echo"]


def main(argv: list[str] | None = None) -> int:
    """Measure and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs: a smoke run")
    plan = QUICK if parser.parse_args(argv).quick else FULL
    print("\n".join(format_delegation(measure(plan), plan)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

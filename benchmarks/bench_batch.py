"""Batch throughput: `run_many` against a hand-written thread-pool loop over the same agent.

Workload: N inputs of a two-turn agent whose one tool call waits `WAIT` seconds (an API),
8 workers. The baseline submits `agent.run` for every input to a `ThreadPoolExecutor(8)`
and collects the futures as they complete; `run_many` does the same through its lazy,
bounded window. Rounds alternate the two; the figure is the median wall time of each, and
the target is run_many / hand loop <= 1.1.

Usage: `python benchmarks/bench_batch.py [--quick]`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import time
from typing import Any

from _measure import Verdict, median, seconds

import tubeless
from tubeless.testing import scripted_decide

WORKERS = 8


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How much to measure."""

    inputs: int
    wait: float
    rounds: int


FULL = Plan(inputs=800, wait=0.002, rounds=5)
QUICK = Plan(inputs=200, wait=0.002, rounds=3)


def build(wait: float) -> Any:
    """The agent: one call that sleeps `wait`, then a finish with its value."""
    tool = tubeless.define_tool(
        description="Wait, then double n",
        input_schema={"type": "object"},
        output_schema={"type": "integer"},
        run=lambda value, context: time.sleep(wait) or value["n"] * 2,
    )
    return tubeless.define_agent(
        id="batched",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {"n": options["n"], "value": None},
        decide=scripted_decide(
            [
                lambda s, c: {
                    "kind": "continue",
                    "calls": [{"id": "c", "tool": "double", "input": {"n": s["n"]}}],
                },
                lambda s, c: {"kind": "finish", "result": s["value"]},
            ]
        ),
        reduce=lambda state, outcomes: {**state, "value": outcomes[0]["value"]},
        tools={"double": tool},
    )


def hand_loop(agent: Any, inputs: list[dict[str, int]]) -> int:
    """What a user writes today: a pool, one future per input, results as they complete."""
    done = 0
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(agent.run, options) for options in inputs]
        for future in concurrent.futures.as_completed(futures):
            done += future.result().status == "completed"
    return done


def batch(agent: Any, inputs: list[dict[str, int]]) -> int:
    """The same through `run_many`."""
    runs = tubeless.run_many(agent, inputs, max_workers=WORKERS)
    return sum(run.status == "completed" for _, run in runs)


def measure(plan: Plan) -> dict[str, Any]:
    """Median wall seconds of each way, rounds alternating."""
    agent = build(plan.wait)
    inputs = [{"n": n} for n in range(plan.inputs)]
    samples: dict[str, list[float]] = {"hand loop": [], "run_many": []}
    for _ in range(plan.rounds):
        samples["hand loop"].append(seconds(lambda: hand_loop(agent, inputs)))
        samples["run_many"].append(seconds(lambda: batch(agent, inputs)))
    return {name: median(values) for name, values in samples.items()}


def verdict(measured: dict[str, Any], plan: Plan) -> Verdict:
    """run_many's wall time over the hand loop's."""
    ratio = measured["run_many"] / measured["hand loop"]
    detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in measured.items())
    return Verdict(
        target=f"run_many throughput, {plan.inputs} inputs on {WORKERS} threads",
        value=ratio,
        limit=1.1,
        detail=detail,
    )


def main(argv: list[str] | None = None) -> int:
    """Print the table and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inputs and rounds")
    plan = QUICK if parser.parse_args(argv).quick else FULL
    measured = measure(plan)
    print(f"{'way':<12} {'median wall':>12} {'inputs/s':>10}")
    for name, wall in measured.items():
        print(f"{name:<12} {wall * 1000:>9.0f} ms {plan.inputs / wall:>10.0f}")
    print(verdict(measured, plan).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

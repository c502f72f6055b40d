"""Per-call cost of two checkouts, alternated: the speed guard of a change.

Each round runs the W(N, 4) workload of `bench_agent` (4 echo calls a turn, constant
state) once per sink in a fresh interpreter per checkout (`PYTHONPATH` set to it), the two
checkouts alternating, and reports the medians and their ratio.

Usage: `python benchmarks/bench_checkouts.py BASE_CHECKOUT [HEAD_CHECKOUT] [--rounds 5]
[--turns 400]` (the head defaults to this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SINKS = ("none", "memory", "ndjson", "sqlite", "durable")

_ONE = r"""
import gc, json, statistics, sys, tempfile, time
from pathlib import Path
from tubeless.agent import Durability, SqliteCheckpointStore, define_agent, define_tool
from tubeless.testing import MemoryTraceSink
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore

N, K = int(sys.argv[1]), 4
schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
echo = define_tool(description="echo", input_schema=schema, output_schema={"type": "integer"},
                   run=lambda value, context: value["x"])

def agent(durability=None):
    def decide(state, context):
        if context.turn <= N:
            calls = [{"id": f"c{i}", "tool": "echo", "input": {"x": i}} for i in range(K)]
            return {"kind": "continue", "calls": calls}
        return {"kind": "finish", "result": state}
    extra = {} if durability is None else {"implementation_version": "1", "durability": durability}
    limits = {"max_turns": N + 1, "max_decisions": N + 1, "max_calls": N * K, "max_concurrency": K}
    return define_agent(id="w", input_schema={"type": "object"}, result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0}, decide=decide,
        reduce=lambda state, outcomes: {"n": state["n"] + len(outcomes)},
        tools={"echo": echo}, limits=limits, **extra)

def once(kind, tmp):
    gc.collect()
    stamp = time.time_ns()
    durable = Durability(store=SqliteCheckpointStore(Path(tmp) / f"c{stamp}.db"), key="k")
    run_agent = agent(durable if kind == "durable" else None)
    sinks = {"memory": MemoryTraceSink,
             "ndjson": lambda: NdjsonTraceSink(Path(tmp) / f"t{stamp}.ndjson"),
             "sqlite": lambda: SqliteTraceStore(Path(tmp) / f"s{stamp}.db")}
    sink = sinks[kind]() if kind in sinks else None
    started = time.perf_counter()
    run = run_agent.run({}, context={} if sink is None else {"tracing": sink})
    if sink is not None and hasattr(sink, "close"):
        sink.close()
    took = time.perf_counter() - started
    assert run.status == "completed", run.errors
    return took / (N * K) * 1e6

with tempfile.TemporaryDirectory() as tmp:
    repeats = {kind: 1 if kind == "durable" else 3 for kind in sys.argv[2].split(",")}
    print(json.dumps({kind: statistics.median(once(kind, tmp) for _ in range(count))
                      for kind, count in repeats.items()}))
"""


def _round(checkout: Path, turns: int) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _ONE, str(turns), ",".join(SINKS)],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=checkout,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Alternate the two checkouts and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("head", type=Path, nargs="?", default=Path(__file__).parents[1])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args(argv)
    samples: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
    for _ in range(args.rounds):
        samples["base"].append(_round(args.base.resolve(), args.turns))
        samples["head"].append(_round(args.head.resolve(), args.turns))
    print(f"{'us per call':<12} {'base':>9} {'head':>9} {'ratio':>7}")
    for sink in SINKS:
        base = statistics.median(row[sink] for row in samples["base"])
        head = statistics.median(row[sink] for row in samples["head"])
        print(f"{sink:<12} {base:>9.1f} {head:>9.1f} {head / base:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A durable agent whose observations accumulate: late turn over early turn, and the run.

Workload (issue 39, item 2): N turns (400) of 4 calls, each call's outcome a 1 KB string,
so 4 KB of outcomes a turn; the reducer appends every outcome to `observations`. The
agent is durable on a `SqliteCheckpointStore` (WAL, `synchronous=FULL`). `decide` stamps
`time.perf_counter()` on entry, so a turn's cost is the time between one decision and
the next; the report gives the median turn of the first and of the last window, their
ratio, the whole run and the journal file's size, each the median over repetitions (a
fresh file each). With LangGraph and its SQLite checkpointer importable (a separate
environment: `--peers PYTHON` runs the same workload there, `durability="sync"`), the
same figures for it, in the same run.

    python benchmarks/bench_durable_growth.py [--quick] [--peers PYTHON]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import operator
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _measure import format_table, median

CALLS = 4
VALUE_BYTES = 1024
GROWTH_LIMIT = 1.5
"""The late turn over the early one (issue 39, item 2)."""
RUN_LIMIT = 0.5
"""The whole run over LangGraph's (issue 39, item 2)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """Turns of each run, the window at each end, and repetitions."""

    turns: int
    window: int
    repeats: int


FULL = Plan(turns=400, window=40, repeats=3)
QUICK = Plan(turns=100, window=10, repeats=1)


def _figures(stamps: list[float], seconds: float, path: Path, window: int) -> dict[str, float]:
    turns = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    return {
        "early": median(turns[:window]),
        "late": median(turns[-window:]),
        "run": seconds,
        "bytes": float(sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))),
    }


def tubeless_once(plan: Plan, directory: Path) -> dict[str, float]:
    """One durable run on a fresh SQLite file."""
    from tubeless import Durability, SqliteCheckpointStore
    from tubeless.agent import define_agent, define_tool

    stamps: list[float] = []

    def decide(state: Any, context: Any) -> dict[str, Any]:
        stamps.append(time.perf_counter())
        if context.turn > plan.turns:
            return {"kind": "finish", "result": len(state["observations"])}
        calls = [{"id": f"c{i}", "tool": "fetch", "input": {"x": i}} for i in range(CALLS)]
        return {"kind": "continue", "calls": calls}

    tool = define_tool(
        description="Fetch 1 KB",
        input_schema={"type": "object"},
        output_schema={"type": "string"},
        run=lambda value, context: f"{value['x']}" * VALUE_BYTES,
    )
    path = directory / "journal.sqlite"
    agent = define_agent(
        id="grow",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {"observations": []},
        decide=decide,
        reduce=lambda state, outcomes: {"observations": [*state["observations"], *outcomes]},
        tools={"fetch": tool},
        limits={
            "max_turns": plan.turns + 1,
            "max_calls": plan.turns * CALLS,
            "max_decisions": plan.turns + 1,
            "max_concurrency": CALLS,
        },
        implementation_version="bench",
        durability=Durability(store=SqliteCheckpointStore(path), key="grow"),
    )
    started = time.perf_counter()
    run = agent.run({})
    seconds = time.perf_counter() - started
    if run.status != "completed" or run.value != plan.turns * CALLS:
        raise RuntimeError(f"durable run {run.status}: {run.errors}")
    return _figures(stamps, seconds, path, plan.window)


class _State(TypedDict):
    turn: int
    observations: Annotated[list[str], operator.add]


def langgraph_once(plan: Plan, directory: Path) -> dict[str, float]:
    """The same workload as a LangGraph graph with `SqliteSaver`, `durability="sync"`."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    stamps: list[float] = []

    def decide(state: _State) -> dict[str, int]:
        stamps.append(time.perf_counter())
        return {"turn": state["turn"] + 1}

    def route(state: _State) -> Any:
        if state["turn"] > plan.turns:
            return END
        return [Send("fetch", {"x": index}) for index in range(CALLS)]

    def fetch(argument: dict[str, int]) -> dict[str, list[str]]:
        return {"observations": [f"{argument['x']}" * VALUE_BYTES]}

    graph = StateGraph(_State)
    graph.add_node("decide", decide)
    graph.add_node("fetch", fetch)
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route, ["fetch", END])
    graph.add_edge("fetch", "decide")
    path = directory / "langgraph.sqlite"
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    compiled = graph.compile(checkpointer=SqliteSaver(connection))
    config = {"configurable": {"thread_id": "grow"}, "recursion_limit": 10 * plan.turns}
    started = time.perf_counter()
    final = compiled.invoke(
        {"turn": 0, "observations": []}, config, durability="sync", stream_mode="values"
    )
    seconds = time.perf_counter() - started
    connection.close()
    if len(final["observations"]) != plan.turns * CALLS:
        raise RuntimeError(f"langgraph kept {len(final['observations'])} observations")
    return _figures(stamps, seconds, path, plan.window)


def child(variant: str, plan: Plan) -> dict[str, float]:
    """One run of `variant` in a fresh directory."""
    with tempfile.TemporaryDirectory() as directory:
        once = tubeless_once if variant == "tubeless" else langgraph_once
        return once(plan, Path(directory))


def measure(plan: Plan, peers: str | None) -> dict[str, list[dict[str, float]]]:
    """Each variant `plan.repeats` times, alternating; LangGraph in the peers' Python."""
    runs: dict[str, list[dict[str, float]]] = {"tubeless": []}
    if peers is not None:
        runs["langgraph"] = []
    for _ in range(plan.repeats):
        runs["tubeless"].append(child("tubeless", plan))
        if peers is not None:
            command = [peers, str(Path(__file__)), "--child", json.dumps(dataclasses.asdict(plan))]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"langgraph failed: {done.stderr[-600:]}", file=sys.stderr)
                runs.pop("langgraph")
                peers = None
                continue
            runs["langgraph"].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def format_growth(runs: dict[str, list[dict[str, float]]], plan: Plan) -> list[str]:
    """Late and early turn, their ratio, the whole run and the file, per variant."""
    rows = []
    for variant, samples in runs.items():
        early = median([s["early"] for s in samples]) * 1e3
        late = median([s["late"] for s in samples]) * 1e3
        run = median([s["run"] for s in samples])
        size = median([s["bytes"] for s in samples]) / 2**20
        cells = [f"{early:.1f}", f"{late:.1f}", f"{late / early:.1f}x", f"{run:.2f}", f"{size:.1f}"]
        rows.append((variant, cells))
    title = f"Durable, {plan.turns} turns, {CALLS} KB of outcomes a turn"
    columns = ["early ms/turn", "late ms/turn", "late/early", "run s", "file MiB"]
    return format_table(title, "variant", columns, rows)


def verdicts(runs: dict[str, list[dict[str, float]]]) -> list[Any]:
    """Issue 39's item 2 targets: late/early turn and the run against LangGraph's."""
    from _measure import Verdict

    def mid(variant: str, key: str) -> float:
        return median([sample[key] for sample in runs[variant]])

    found = [
        Verdict(
            target="durable growing state: late / early turn",
            value=mid("tubeless", "late") / mid("tubeless", "early"),
            limit=GROWTH_LIMIT,
        )
    ]
    if "langgraph" in runs:
        found.append(
            Verdict(
                target="durable growing state: whole run / LangGraph's",
                value=mid("tubeless", "run") / mid("langgraph", "run"),
                limit=RUN_LIMIT,
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peers")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child("langgraph", Plan(**json.loads(args.child)))))
        return
    plan = QUICK if args.quick else FULL
    runs = measure(plan, args.peers)
    print("\n".join(format_growth(runs, plan)))
    for verdict in verdicts(runs):
        print(verdict.line())


if __name__ == "__main__":
    main()

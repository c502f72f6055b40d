"""Durable execution per tool call: tubeless's journal against LangGraph's sync checkpoints.

Workload W(N, K) of `bench_agent.py` (N turns of K `echo` calls, `max_concurrency = K`),
three ways, in one process, on the same disk:

- `tubeless`: the agent as it is, not durable (the floor of the comparison);
- `tubeless durable`: the same agent with `Durability(store=SqliteCheckpointStore(...))`
  (WAL, `synchronous=FULL`): every decision, admission, call intent and outcome is
  durable before the agent goes on; an unsafe call that was running at a crash is
  reported as interrupted, never silently repeated;
- `langgraph sync`: LangGraph 1.x, the same loop as a graph (`decide` fans out K `Send`s
  to `echo`, whose results an `operator.add` reducer counts, then back to `decide`),
  with `SqliteSaver` (WAL, `synchronous=FULL`, SQLite's default) and
  `durability="sync"`: each superstep's checkpoint is written before the next starts; a
  node that was running at a crash simply runs again.

Figures: microseconds per tool call (median of the repetitions of the whole run, divided
by N * K) and durable writes per tool call: SQLite transactions committed (for tubeless,
each `lease.write` is one autocommit transaction; for LangGraph, every `commit()` of its
connection that had a transaction open). Each repetition uses a fresh file. LangGraph is
measured only when `langgraph` and `langgraph-checkpoint-sqlite` are installed (the bench
environment has them; the package and its tests never do).

    python benchmarks/bench_durable.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import operator
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _measure import format_table, median, seconds
from bench_agent import build_agent, run_agent

from tubeless import Durability, SqliteCheckpointStore

VARIANTS = ("tubeless", "tubeless durable", "langgraph sync")


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The workload and how often it repeats."""

    turns: int
    calls: int
    repeats: int


FULL = Plan(turns=200, calls=4, repeats=5)
QUICK = Plan(turns=40, calls=4, repeats=3)


class CountingStore:
    """A checkpoint store whose leases count their writes (one transaction each)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.writes = 0

    def acquire(self, key: str) -> Any:
        lease = self._store.acquire(key)
        counter = self

        class Lease:
            def read(self) -> str | None:
                return lease.read()  # type: ignore[no-any-return]

            def write(self, text: str) -> None:
                lease.write(text)
                counter.writes += 1

            def close(self) -> None:
                lease.close()

        return Lease()


def timed_run(run: Callable[[], Any], expected: Any, variant: str) -> float:
    """Time one whole `run()`, checking that it returned `expected` (every call counted)."""
    results: list[Any] = []
    elapsed = seconds(lambda: results.append(run()))
    if results != [expected]:
        raise RuntimeError(f"{variant} computed {results}")
    return elapsed


class State(TypedDict):
    """LangGraph's state: the calls counted by an `operator.add` reducer, and the turn."""

    n: Annotated[int, operator.add]
    turn: int


class _Counting(sqlite3.Connection):
    """A connection that counts the commits that ended a transaction."""

    commits = 0

    def commit(self) -> None:
        if self.in_transaction:
            type(self).commits += 1
        super().commit()


def langgraph_available() -> bool:
    """Whether LangGraph and its SQLite checkpointer are installed."""
    try:
        return importlib.util.find_spec("langgraph.checkpoint.sqlite") is not None
    except ImportError:  # no `langgraph` at all
        return False


def langgraph_graph(plan: Plan) -> Any:
    """LangGraph's W(N, K), uncompiled: `decide` fans out K `Send`s to `echo`, N turns."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    def decide(state: State) -> dict[str, int]:
        return {"turn": state["turn"] + 1}

    def route(state: State) -> Any:
        if state["turn"] > plan.turns:
            return END
        return [Send("echo", {"x": index}) for index in range(plan.calls)]

    def echo(argument: dict[str, int]) -> dict[str, int]:
        int(argument["x"])
        return {"n": 1}

    builder = StateGraph(State)
    builder.add_node("decide", decide)
    builder.add_node("echo", echo)
    builder.add_edge(START, "decide")
    builder.add_conditional_edges("decide", route, ["echo", END])
    builder.add_edge("echo", "decide")
    return builder


def langgraph_run(plan: Plan, path: Path) -> Callable[[], int]:
    """Build the LangGraph W(N, K) on a fresh SQLite file; return a run and its checks."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    builder = langgraph_graph(plan)

    def run() -> int:
        connection = sqlite3.connect(path, check_same_thread=False, factory=_Counting)
        connection.execute("PRAGMA synchronous = FULL")
        try:
            graph = builder.compile(checkpointer=SqliteSaver(connection))
            result = graph.invoke(
                {"n": 0, "turn": 0},
                config={"configurable": {"thread_id": "w"}, "recursion_limit": 10 * plan.turns},
                durability="sync",
            )
        finally:
            connection.close()
        return int(result["n"])

    return run


@dataclasses.dataclass
class Figures:
    """Per variant: seconds of each repetition, and the writes of the last one."""

    seconds: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    writes: dict[str, int] = dataclasses.field(default_factory=dict)


def interleaved(
    plan: Plan, variants: Sequence[str], one: Callable[[str], tuple[float, int]]
) -> Figures:
    """Run `one(variant)` -> (seconds, writes) for every variant `plan.repeats` times, in an
    order that rotates each repetition."""
    figures = Figures()
    for repetition in range(plan.repeats):
        shift = repetition % len(variants)
        for variant in [*variants[shift:], *variants[:shift]]:
            elapsed, writes = one(variant)
            figures.seconds.setdefault(variant, []).append(elapsed)
            figures.writes[variant] = writes
    return figures


def measure(plan: Plan) -> Figures:
    """Time every variant, interleaved, with fresh files each repetition."""
    variants = [v for v in VARIANTS if v != "langgraph sync" or langgraph_available()]
    plain = build_agent(plan.turns, plan.calls)
    return interleaved(plan, variants, lambda variant: _one(variant, plan, plain))


def _one(variant: str, plan: Plan, plain: Any) -> tuple[float, int]:
    total = plan.turns * plan.calls
    if variant == "tubeless":
        return timed_run(lambda: run_agent(plain), {"n": total}, "tubeless"), 0
    directory = Path(tempfile.mkdtemp(prefix="bench-durable-", dir="."))
    try:
        if variant == "tubeless durable":
            store = CountingStore(SqliteCheckpointStore(directory / "checkpoints.db"))
            durability = Durability(store=store, key="w")
            agent = build_agent(plan.turns, plan.calls, durability=durability)
            elapsed = timed_run(lambda: run_agent(agent), {"n": total}, "durable tubeless")
            return elapsed, store.writes
        run = langgraph_run(plan, directory / "langgraph.db")
        _Counting.commits = 0
        return timed_run(run, total, "langgraph"), _Counting.commits
    finally:
        shutil.rmtree(directory)


def summary(plan: Plan, figures: Figures) -> dict[str, dict[str, float]]:
    """Per variant: microseconds and durable writes per tool call."""
    calls = plan.turns * plan.calls
    return {
        variant: {
            "usPerCall": median(samples) / calls * 1e6,
            "writesPerCall": figures.writes[variant] / calls,
        }
        for variant, samples in figures.seconds.items()
    }


def format_per_call(plan: Plan, rows: dict[str, dict[str, float]]) -> list[str]:
    """The table of `summary`'s rows: us and writes per call for each variant."""
    return format_table(
        f"W({plan.turns}, {plan.calls}), median of {plan.repeats}",
        "variant",
        ["us/call", "writes/call"],
        [
            (variant, [f"{row['usPerCall']:.1f}", f"{row['writesPerCall']:.2f}"])
            for variant, row in rows.items()
        ],
    )


def format_durable(figures: Figures, plan: Plan) -> list[str]:
    """The table, and the durable ratio against LangGraph when it was measured."""
    rows = summary(plan, figures)
    table = format_per_call(plan, rows)
    measured = ratio(plan, figures)
    if measured is not None:
        table.append(f"  tubeless durable / langgraph sync: {measured:.2f}x per call")
    else:
        table.append("  langgraph sync: skipped (langgraph-checkpoint-sqlite not installed)")
    return table


def ratio(plan: Plan, figures: Figures) -> float | None:
    """Durable tubeless time per call over LangGraph's, when measured."""
    rows = summary(plan, figures)
    if "langgraph sync" not in rows:
        return None
    return rows["tubeless durable"]["usPerCall"] / rows["langgraph sync"]["usPerCall"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    plan = QUICK if parser.parse_args().quick else FULL
    print("\n".join(format_durable(measure(plan), plan)))


if __name__ == "__main__":
    main()

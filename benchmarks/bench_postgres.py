"""Durable cost per tool call on PostgreSQL, beside SQLite and LangGraph's Postgres saver.

Workload W(N, K) of `bench_agent.py` (N turns of K `echo` calls), in one process, each
variant on a fresh database or file every repetition, interleaved:

- `tubeless`: not durable (the floor);
- `tubeless sqlite`: `SqliteCheckpointStore` (WAL, `synchronous=FULL`);
- `tubeless postgres`: `PostgresCheckpointStore` (fenced lease, one conditional statement
  per journal write, `synchronous_commit=on`);
- `langgraph postgres`: LangGraph 1.x's `PostgresSaver` with `durability="sync"`, the graph
  of `bench_durable.py` (measured only when `langgraph-checkpoint-postgres` is installed).

The server is a throwaway PostgreSQL (Debian's binaries, `fsync` on, loopback TCP), as the
tests start it, unless `TUBELESS_BENCH_POSTGRES_URL` names one (each repetition then makes
a database there). Figures: microseconds per tool call (median of the repetitions of the
whole run divided by N * K) and checkpoint writes per call (lease writes for tubeless;
`put` and `put_writes` calls for LangGraph).

    python benchmarks/bench_postgres.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _measure import format_table, median, seconds
from bench_agent import build_agent, run_agent
from bench_durable import Plan, State

from tubeless import Durability, PostgresCheckpointStore, SqliteCheckpointStore

VARIANTS = ("tubeless", "tubeless sqlite", "tubeless postgres", "langgraph postgres")
FULL = Plan(turns=100, calls=4, repeats=5)
QUICK = Plan(turns=25, calls=4, repeats=3)


class Counting:
    """A checkpoint store whose leases count their writes."""

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


def langgraph_available() -> bool:
    """Whether LangGraph and its Postgres checkpointer are installed."""
    try:
        return importlib.util.find_spec("langgraph.checkpoint.postgres") is not None
    except ImportError:
        return False


def langgraph_run(plan: Plan, url: str) -> tuple[Callable[[], int], Callable[[], int]]:
    """The LangGraph W(N, K) on `url`: a run returning the count, and its write counter."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    writes = [0]

    class CountingSaver(PostgresSaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            writes[0] += 1
            return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            writes[0] += 1
            return super().put_writes(*args, **kwargs)

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
    with CountingSaver.from_conn_string(url) as saver:
        saver.setup()  # the tables, outside the timed run

    def run() -> int:
        with CountingSaver.from_conn_string(url) as saver:
            graph = builder.compile(checkpointer=saver)
            result = graph.invoke(
                {"n": 0, "turn": 0},
                config={"configurable": {"thread_id": "w"}, "recursion_limit": 10 * plan.turns},
                durability="sync",
            )
        return int(result["n"])

    return run, lambda: writes[0]


@contextmanager
def postgres() -> Iterator[Callable[[], str]]:
    """Make fresh databases: on `TUBELESS_BENCH_POSTGRES_URL`, else on a throwaway server."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from postgres_server import PostgresServer

    given = os.environ.get("TUBELESS_BENCH_POSTGRES_URL")
    server = PostgresServer()
    if given is not None:
        server.url = given
        base = given.rsplit("/", 1)[0]
        counter = iter(range(1, 10**6))

        def make() -> str:
            name = f"bench_{os.getpid()}_{next(counter)}"
            server.execute(given, f"CREATE DATABASE {name}")
            return f"{base}/{name}"

        yield make
        return
    server.start()
    try:
        yield server.database
    finally:
        server.stop()


@dataclasses.dataclass
class Figures:
    seconds: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    writes: dict[str, int] = dataclasses.field(default_factory=dict)


def measure(plan: Plan) -> Figures:
    """Time every variant, interleaved, on fresh databases each repetition."""
    figures = Figures()
    variants = [v for v in VARIANTS if v != "langgraph postgres" or langgraph_available()]
    with postgres() as database:
        for repetition in range(plan.repeats):
            shift = repetition % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                elapsed, writes = _one(variant, plan, database)
                figures.seconds.setdefault(variant, []).append(elapsed)
                figures.writes[variant] = writes
    return figures


def _one(variant: str, plan: Plan, database: Callable[[], str]) -> tuple[float, int]:
    total = plan.turns * plan.calls
    if variant == "langgraph postgres":
        run, writes = langgraph_run(plan, database())
        counts: list[int] = []
        elapsed = seconds(lambda: counts.append(run()))
        if counts != [total]:
            raise RuntimeError(f"langgraph computed {counts}")
        return elapsed, writes()
    directory = Path(tempfile.mkdtemp(prefix="bench-postgres-", dir="."))
    try:
        store: Counting | None = None
        if variant == "tubeless sqlite":
            store = Counting(SqliteCheckpointStore(directory / "checkpoints.db"))
        elif variant == "tubeless postgres":
            store = Counting(PostgresCheckpointStore(database()))
        durability = None if store is None else Durability(store=store, key="w")
        agent = build_agent(plan.turns, plan.calls, durability=durability)
        results: list[Any] = []
        elapsed = seconds(lambda: results.append(run_agent(agent)))
        if results != [{"n": total}]:
            raise RuntimeError(f"{variant} computed {results}")
        return elapsed, 0 if store is None else store.writes
    finally:
        shutil.rmtree(directory)


def summary(plan: Plan, figures: Figures) -> dict[str, dict[str, float]]:
    """Per variant: microseconds and checkpoint writes per tool call."""
    calls = plan.turns * plan.calls
    return {
        variant: {
            "usPerCall": median(samples) / calls * 1e6,
            "writesPerCall": figures.writes[variant] / calls,
        }
        for variant, samples in figures.seconds.items()
    }


def format_postgres(figures: Figures, plan: Plan) -> list[str]:
    """The table, and the ratios of the Postgres store against SQLite and LangGraph."""
    rows = summary(plan, figures)
    table = format_table(
        f"W({plan.turns}, {plan.calls}), median of {plan.repeats}",
        "variant",
        ["us/call", "writes/call"],
        [
            (variant, [f"{row['usPerCall']:.1f}", f"{row['writesPerCall']:.2f}"])
            for variant, row in rows.items()
        ],
    )
    ours = rows["tubeless postgres"]["usPerCall"]
    sqlite = rows["tubeless sqlite"]["usPerCall"]
    table.append(f"  tubeless postgres / tubeless sqlite: {ours / sqlite:.2f}x per call")
    if "langgraph postgres" in rows:
        theirs = rows["langgraph postgres"]["usPerCall"]
        table.append(f"  tubeless postgres / langgraph postgres: {ours / theirs:.2f}x per call")
    else:
        table.append("  langgraph postgres: skipped (langgraph-checkpoint-postgres not installed)")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    plan = QUICK if parser.parse_args().quick else FULL
    print("\n".join(format_postgres(measure(plan), plan)))


if __name__ == "__main__":
    main()

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
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_agent import build_agent, run_agent
from bench_durable import (
    CountingStore,
    Figures,
    Plan,
    format_per_call,
    interleaved,
    langgraph_graph,
    summary,
    timed_run,
)

from tubeless import Durability, PostgresCheckpointStore, SqliteCheckpointStore

VARIANTS = ("tubeless", "tubeless sqlite", "tubeless postgres", "langgraph postgres")
FULL = Plan(turns=100, calls=4, repeats=5)
QUICK = Plan(turns=25, calls=4, repeats=3)


def langgraph_available() -> bool:
    """Whether LangGraph and its Postgres checkpointer are installed."""
    try:
        return importlib.util.find_spec("langgraph.checkpoint.postgres") is not None
    except ImportError:
        return False


def langgraph_run(plan: Plan, url: str) -> tuple[Callable[[], int], Callable[[], int]]:
    """The LangGraph W(N, K) on `url`: a run returning the count, and its write counter."""
    from langgraph.checkpoint.postgres import PostgresSaver

    writes = [0]

    class CountingSaver(PostgresSaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            writes[0] += 1
            return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            writes[0] += 1
            return super().put_writes(*args, **kwargs)

    builder = langgraph_graph(plan)
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


def measure(plan: Plan) -> Figures:
    """Time every variant, interleaved, on fresh databases each repetition."""
    variants = [v for v in VARIANTS if v != "langgraph postgres" or langgraph_available()]
    with postgres() as database:
        return interleaved(plan, variants, lambda variant: _one(variant, plan, database))


def _one(variant: str, plan: Plan, database: Callable[[], str]) -> tuple[float, int]:
    total = plan.turns * plan.calls
    if variant == "langgraph postgres":
        run, writes = langgraph_run(plan, database())
        return timed_run(run, total, "langgraph"), writes()
    directory = Path(tempfile.mkdtemp(prefix="bench-postgres-", dir="."))
    try:
        store: CountingStore | None = None
        if variant == "tubeless sqlite":
            store = CountingStore(SqliteCheckpointStore(directory / "checkpoints.db"))
        elif variant == "tubeless postgres":
            store = CountingStore(PostgresCheckpointStore(database()))
        durability = None if store is None else Durability(store=store, key="w")
        agent = build_agent(plan.turns, plan.calls, durability=durability)
        elapsed = timed_run(lambda: run_agent(agent), {"n": total}, variant)
        return elapsed, 0 if store is None else store.writes
    finally:
        shutil.rmtree(directory)


def format_postgres(figures: Figures, plan: Plan) -> list[str]:
    """The table, and the ratios of the Postgres store against SQLite and LangGraph."""
    rows = summary(plan, figures)
    table = format_per_call(plan, rows)
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

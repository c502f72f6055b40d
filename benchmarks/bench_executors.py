"""Tool handlers on other executors: what a process pool or a Dask cluster buys and costs.

Speed-up: W(20, 4) of `bench_agent` (20 turns of 4 calls) of a CPU-bound tool (about
20 ms of pure-Python arithmetic, calibrated on this machine) with `max_concurrency=4`,
its handler on the agent's own threads, on a `ProcessPoolExecutor(2)` and on a Dask
`LocalCluster` of two single-threaded worker processes. Each figure is a ratio of wall
time to the baseline measured in the same run: the same 80 calls one after another
(threads, `max_concurrency=1`). Below 1 is faster; threads stay near 1 (the GIL). The
"no agent" rows submit the same calls straight to the executor, 4 at a time, turn by
turn: the ceiling the machine allows (on a shared machine, other load lowers it).

Overhead: W(50, 4) of a trivial tool (`{"x": integer}` in, the integer out) with
`max_concurrency=1`, so calls never overlap; the overhead of an executor is its run time
minus the thread run's, per call.

Cancellation: one handler waits on `context.signal`; the figure is the time from setting
the run's signal to the run's return (median of the repetitions).

Every variant runs once to warm up (worker start-up, imports) before it is timed; the
points run interleaved, rotating each repetition, and the median is kept.

    python benchmarks/bench_executors.py [--quick]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import pathlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from _measure import format_table, median, seconds

from tubeless.agent import define_agent, define_tool

X_INPUT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "n": {"type": "integer"}},
    "required": ["x"],
}
TARGET_SECONDS = 0.020
"""How long one call of the CPU-bound tool should take."""
CANCEL_WAIT = 30
"""Seconds a cancelled handler waits at most (never reached)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """How long the runs are and how often they repeat."""

    cpu_turns: int
    """Turns of the CPU-bound workload (4 calls each)."""
    echo_turns: int
    """Turns of the overhead workload (4 calls each)."""
    repeats: int
    """Runs of each point (the median is kept), odd."""


FULL = Plan(cpu_turns=20, echo_turns=50, repeats=3)
QUICK = Plan(cpu_turns=5, echo_turns=10, repeats=1)
WIDTH = 4


def burn(value: Any, context: Any) -> int:
    """About 20 ms of pure-Python arithmetic (`n` iterations, calibrated)."""
    total = 0
    for i in range(value["n"]):
        total = (total + i * i) % 1_000_003
    return total + value["x"]


def echo(value: Any, context: Any) -> int:
    """The trivial tool."""
    return int(value["x"])


def wait_for_cancel(value: Any, context: Any) -> bool:
    """Mark the start with a file, then wait on the remote signal."""
    pathlib.Path(value["marker"]).touch()
    return bool(context.signal.wait(CANCEL_WAIT))


def calibrate() -> int:
    """Iterations of `burn` that take about `TARGET_SECONDS` here."""
    n = 10_000
    while True:
        started = time.perf_counter()
        burn({"x": 0, "n": n}, None)
        took = time.perf_counter() - started
        if took > 0.005:
            return max(1, int(n * TARGET_SECONDS / took))
        n *= 4


def build(handler: Any, executor: Any, turns: int, concurrency: int, n: int) -> Any:
    """W(turns, 4) of `handler`, on `executor` (`None`: the agent's threads)."""
    extra = {} if executor is None else {"executor": executor}
    tool = define_tool(
        description="Work", input_schema=X_INPUT, output_schema={}, run=handler, **extra
    )

    def decide(state: Any, context: Any) -> Any:
        if context.turn > turns:
            return {"kind": "finish", "result": state["n"]}
        calls = [{"id": f"c{i}", "tool": "work", "input": {"x": i, "n": n}} for i in range(WIDTH)]
        return {"kind": "continue", "calls": calls}

    return define_agent(
        id="bench-executors",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {"n": 0},
        decide=decide,
        reduce=lambda state, outcomes: {"n": state["n"] + len(outcomes)},
        tools={"work": tool},
        limits={
            "max_turns": turns + 1,
            "max_decisions": turns + 1,
            "max_calls": turns * WIDTH,
            "max_concurrency": concurrency,
        },
    )


def raw_turns(executor: Any, turns: int, n: int) -> None:
    """The same calls straight on `executor`, turn by turn, without an agent (a ceiling)."""
    for _ in range(turns):
        futures = [executor.submit(burn, {"x": i, "n": n}, None) for i in range(WIDTH)]
        for future in futures:
            future.result()


def _run(agent: Any, expected: int) -> None:
    run = agent.run({})
    if run.status != "completed" or run.value != expected:
        raise RuntimeError(f"benchmark run did not complete: {run.errors}")


@contextlib.contextmanager
def executors() -> Iterator[dict[str, Any]]:
    """The executors of the variants (Dask only when `distributed` is installed)."""
    found: dict[str, Any] = {"threads": None}
    with contextlib.ExitStack() as stack:
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=2, mp_context=multiprocessing.get_context("spawn")
        )
        stack.callback(pool.shutdown, wait=True)
        found["process(2)"] = pool
        try:
            import distributed
        except ImportError:
            pass
        else:
            import dask

            scratch = stack.enter_context(tempfile.TemporaryDirectory())
            stack.enter_context(dask.config.set({"temporary-directory": scratch}))
            cluster = distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=scratch,
            )
            stack.callback(cluster.close)
            client = distributed.Client(cluster)
            stack.callback(client.close)
            found["dask(2)"] = client.get_executor(pure=False)
        yield found


def cancel_latency(executor: Any) -> float:
    """Seconds from setting the signal to the run's return, one handler waiting on it."""
    with tempfile.TemporaryDirectory() as folder:
        marker = pathlib.Path(folder) / "started"
        tool = define_tool(
            description="Wait",
            input_schema={"type": "object"},
            output_schema={},
            run=wait_for_cancel,
            **({} if executor is None else {"executor": executor}),
        )
        agent = define_agent(
            id="bench-cancel",
            input_schema={"type": "object"},
            result_schema={},
            initial_state=lambda options: {},
            decide=lambda state, context: {
                "kind": "continue",
                "calls": [{"id": "c", "tool": "wait", "input": {"marker": str(marker)}}],
            },
            tools={"wait": tool},
        )
        signal = threading.Event()
        set_at: list[float] = []

        def cancel() -> None:
            while not marker.exists():
                time.sleep(0.001)
            set_at.append(time.perf_counter())
            signal.set()

        canceller = threading.Thread(target=cancel)
        canceller.start()
        run = agent.run({}, context={"signal": signal})
        ended = time.perf_counter()
        canceller.join()
        if run.status != "cancelled":
            raise RuntimeError(f"benchmark run was not cancelled: {run.status}")
        return ended - set_at[0]


def _timed(points: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    for action in points.values():
        action()  # warm up
    samples: dict[str, list[float]] = {name: [] for name in points}
    names = list(points)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(seconds(points[name]))
    return {name: median(values) for name, values in samples.items()}


def measure(plan: Plan) -> dict[str, Any]:
    """Seconds of every point, the calibration and the derived ratios."""
    n = calibrate()
    cpu_calls = plan.cpu_turns * WIDTH
    echo_calls = plan.echo_turns * WIDTH
    with executors() as found:
        cpu: dict[str, Callable[[], None]] = {}
        serial = build(burn, None, plan.cpu_turns, 1, n)
        cpu["serial"] = lambda: _run(serial, cpu_calls)
        for name, executor in found.items():
            agent = build(burn, executor, plan.cpu_turns, WIDTH, n)
            cpu[name] = lambda a=agent: _run(a, cpu_calls)
            if executor is not None:
                cpu[f"{name}, no agent"] = lambda e=executor: raw_turns(e, plan.cpu_turns, n)
        cpu_seconds = _timed(cpu, plan.repeats)
        trivial: dict[str, Callable[[], None]] = {}
        for name, executor in found.items():
            agent = build(echo, executor, plan.echo_turns, 1, 0)
            trivial[name] = lambda a=agent: _run(a, echo_calls)
        echo_seconds = _timed(trivial, plan.repeats)
        cancel_seconds = {
            name: median([cancel_latency(executor) for _ in range(plan.repeats)])
            for name, executor in found.items()
        }
    return {
        "iterations": n,
        "cpuCalls": cpu_calls,
        "echoCalls": echo_calls,
        "cpuSeconds": cpu_seconds,
        "echoSeconds": echo_seconds,
        "speedRatio": {
            name: cpu_seconds[name] / cpu_seconds["serial"] for name in cpu if name != "serial"
        },
        "overheadSecondsPerCall": {
            name: (echo_seconds[name] - echo_seconds["threads"]) / echo_calls
            for name in trivial
            if name != "threads"
        },
        "threadSecondsPerCall": echo_seconds["threads"] / echo_calls,
        "cancelSeconds": cancel_seconds,
    }


def format_executors(measured: dict[str, Any], plan: Plan) -> list[str]:
    """The report: wall times and ratios, then the per-call overhead."""
    cpu = measured["cpuSeconds"]
    rows = [("serial", [f"{cpu['serial'] * 1e3:.0f}", "1.00"])]
    rows += [
        (name, [f"{cpu[name] * 1e3:.0f}", f"{ratio:.2f}"])
        for name, ratio in measured["speedRatio"].items()
    ]
    lines = format_table(
        f"CPU-bound tool (~20 ms, {measured['iterations']} iterations), "
        f"W({plan.cpu_turns}, {WIDTH}), max_concurrency={WIDTH}, median of {plan.repeats}",
        "handler on",
        ["ms", "x serial"],
        rows,
    )
    echo = measured["echoSeconds"]
    rows = [("threads", [f"{echo['threads'] * 1e3:.0f}", "-"])]
    rows += [
        (name, [f"{echo[name] * 1e3:.0f}", f"{overhead * 1e6:.0f}"])
        for name, overhead in measured["overheadSecondsPerCall"].items()
    ]
    lines += format_table(
        f"Trivial tool, W({plan.echo_turns}, {WIDTH}), max_concurrency=1 "
        f"(threads: {measured['threadSecondsPerCall'] * 1e6:.0f} us per call)",
        "handler on",
        ["ms", "+us per call"],
        rows,
    )
    rows = [(name, [f"{value * 1e3:.1f}"]) for name, value in measured["cancelSeconds"].items()]
    lines += format_table(
        "Cancellation: signal set -> run returned, one handler waiting on context.signal",
        "handler on",
        ["ms"],
        rows,
    )
    if "dask(2)" not in cpu:
        lines.append("(distributed is not installed: no Dask rows)")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Measure and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs: a smoke run")
    plan = QUICK if parser.parse_args(argv).quick else FULL
    print("\n".join(format_executors(measure(plan), plan)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

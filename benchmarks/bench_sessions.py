"""Many sessions at once: wall time over the ideal, and CPU per tool call (issue 39, item 3).

Workload: S sessions started together, each an agent of 3 turns of 4 calls and a
finishing turn; `decide` sleeps 50 ms (a model), each tool call sleeps 20 ms (an API),
`max_concurrency = 4`. Whatever S, the ideal wall time is 4 x 50 + 3 x 20 = 260 ms.
Sync harnesses run one thread per session (started together behind a barrier); asyncio
ones gather one coroutine per session.

Variants, each in a fresh subprocess so its CPU time (user + system, `getrusage`) is its
own, run interleaved in an order that rotates each repetition (medians reported; the
user and system shares are given apart, as Python's own work shows in the first and
thread hand-offs in both). Beside the ratio of medians, each tubeless variant's "paired"
ratio is the median over repetitions of its CPU per call over the floor's in the same
repetition, which a machine whose load drifts between repetitions moves less:

- `tubeless`: the agent, one `agent.run` per session thread;
- `tubeless shared pool`: the same with `context={"thread_pool": pool}`, one
  `ThreadPoolExecutor` the application owns serving every session's batches;
- `threads + shared pool`: the floor of sync harnesses, no harness: each session thread
  sleeps, runs one call itself and submits the other three to one shared pool;
- `asyncio`: the asyncio floor, `asyncio.sleep` and `asyncio.gather`, no harness;
- `baseline tubeless` and `baseline tubeless shared pool` (with `--baseline PATH`): the
  two `tubeless` variants importing the package from another checkout (say, main before
  a change), measured in the same run;
- peers (`langgraph`, `pydantic-ai`, `openai-agents`, see `_peers_sessions.py`), when
  `--peers PYTHON` names an interpreter that has them (a separate virtualenv).

Every variant, peers included, collects garbage once before its timer starts: the
objects its imports and set-up made are then counted long-lived, and the full collection
they would otherwise bring (18-61 ms, once a process, landing while the sessions start)
is not charged to the sessions. A long-lived service pays it once, at start-up.

With `--tool-timeout SECONDS` every tubeless tool call has that deadline, so the figures
are those of the deadline path (each attempt on an attempt thread; the floors unchanged).

    python benchmarks/bench_sessions.py [--quick] [--sessions 20,500] [--peers PY]
        [--baseline CHECKOUT] [--tool-timeout SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import gc
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _measure import format_table, median

DECIDE_SECONDS = 0.05
TOOL_SECONDS = 0.02
TURNS = 3
CALLS = 4
IDEAL_SECONDS = (TURNS + 1) * DECIDE_SECONDS + TURNS * TOOL_SECONDS
WALL_LIMIT = 7.0
"""tubeless's wall time over the ideal at the largest S, on a shared pool (issue 39)."""
CPU_LIMIT = 1.5
"""tubeless's CPU per call over the shared-pool thread floor's, on a shared pool."""
FLOOR = "threads + shared pool"
"""The sync floor that CPU per call is judged against."""
LOCAL = ("tubeless", "tubeless shared pool", FLOOR, "asyncio")
PEERS = ("langgraph", "pydantic-ai", "openai-agents")
HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """Session counts and repetitions."""

    sessions: tuple[int, ...]
    repeats: int


FULL = Plan(sessions=(20, 500), repeats=3)
QUICK = Plan(sessions=(20, 100), repeats=1)


def _decide(state: Any, context: Any) -> dict[str, Any]:
    time.sleep(DECIDE_SECONDS)
    if context.turn > TURNS:
        return {"kind": "finish", "result": state}
    calls = [{"id": f"c{i}", "tool": "api", "input": {"x": i}} for i in range(CALLS)]
    return {"kind": "continue", "calls": calls}


def _api(value: Any, context: Any) -> int:
    time.sleep(TOOL_SECONDS)
    return int(value["x"])


def tubeless_agent(timeout: float | None = None) -> Any:
    """The session agent: a counting reducer proves every call ran; with `timeout`, every
    call has that deadline (`define_tool(timeout=...)`)."""
    from tubeless.agent import define_agent, define_tool

    tool = define_tool(
        description="A remote API",
        input_schema={
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
        },
        output_schema={"type": "integer"},
        run=_api,
        timeout=timeout,
    )
    return define_agent(
        id="session",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0},
        decide=_decide,
        reduce=lambda state, outcomes: {"n": state["n"] + len(outcomes)},
        tools={"api": tool},
        limits={"max_turns": TURNS + 1, "max_calls": TURNS * CALLS, "max_concurrency": CALLS},
    )


def on_threads(sessions: int, session: Callable[[], int]) -> list[int]:
    """Run `session` on `sessions` threads released together; return their call counts."""
    barrier = threading.Barrier(sessions + 1)
    counts = [0] * sessions

    def body(index: int) -> None:
        barrier.wait()
        counts[index] = session()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    for thread in threads:
        thread.join()
    return counts


def _tubeless(sessions: int, shared: bool, timeout: float | None) -> Callable[[], list[int]]:
    agent = tubeless_agent(timeout)

    def session(context: dict[str, Any]) -> int:
        run = agent.run({}, context=context)
        if run.status != "completed":
            raise RuntimeError(f"session {run.status}: {run.errors}")
        return int(run.value["n"])

    def go() -> list[int]:
        if not shared:
            return on_threads(sessions, lambda: session({}))
        with concurrent.futures.ThreadPoolExecutor(sessions * (CALLS - 1)) as pool:
            return on_threads(sessions, lambda: session({"thread_pool": pool}))

    return go


def _threads(sessions: int) -> Callable[[], list[int]]:
    def go() -> list[int]:
        with concurrent.futures.ThreadPoolExecutor(sessions * (CALLS - 1)) as pool:

            def session() -> int:
                done = 0
                for _ in range(TURNS):
                    time.sleep(DECIDE_SECONDS)
                    futures = [pool.submit(time.sleep, TOOL_SECONDS) for _ in range(CALLS - 1)]
                    time.sleep(TOOL_SECONDS)
                    for future in futures:
                        future.result()
                    done += CALLS
                time.sleep(DECIDE_SECONDS)
                return done

            return on_threads(sessions, session)

    return go


def _asyncio(sessions: int) -> Callable[[], list[int]]:
    async def call() -> int:
        await asyncio.sleep(TOOL_SECONDS)
        return 1

    async def session() -> int:
        done = 0
        for _ in range(TURNS):
            await asyncio.sleep(DECIDE_SECONDS)
            done += sum(await asyncio.gather(*(call() for _ in range(CALLS))))
        await asyncio.sleep(DECIDE_SECONDS)
        return done

    async def everything() -> list[int]:
        return list(await asyncio.gather(*(session() for _ in range(sessions))))

    return lambda: asyncio.run(everything())


def _cpu_seconds() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def child(variant: str, sessions: int, timeout: float | None = None) -> dict[str, float]:
    """In the subprocess: run the variant once, return wall, CPU (user + system) and user
    seconds, and calls."""
    if variant in ("tubeless", "baseline tubeless"):
        go = _tubeless(sessions, shared=False, timeout=timeout)
    elif variant in ("tubeless shared pool", "baseline tubeless shared pool"):
        go = _tubeless(sessions, shared=True, timeout=timeout)
    elif variant == FLOOR:
        go = _threads(sessions)
    else:
        go = _asyncio(sessions)
    gc.collect()  # set-up's garbage and pending full collection (see the module docstring)
    (user, system), started = _cpu_seconds(), time.perf_counter()
    counts = go()
    wall, (user_after, system_after) = time.perf_counter() - started, _cpu_seconds()
    if counts != [TURNS * CALLS] * sessions:
        raise RuntimeError(f"{variant}: sessions made {sorted(set(counts))} calls")
    user = user_after - user
    cpu = user + system_after - system
    return {"wall": wall, "cpu": cpu, "user": user, "calls": float(sum(counts))}


def _command(variant: str, sessions: int, args: argparse.Namespace) -> tuple[list[str], Any]:
    environment = dict(os.environ)
    if variant in PEERS:
        script = HERE / "_peers_sessions.py"
        return [args.peers, str(script), variant, str(sessions)], environment
    root = args.baseline if variant.startswith("baseline ") else HERE.parent
    environment["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE)])
    command = [sys.executable, str(Path(__file__)), "--child", variant, str(sessions)]
    if args.tool_timeout is not None:
        command += ["--tool-timeout", str(args.tool_timeout)]
    return command, environment


def once(variant: str, sessions: int, args: argparse.Namespace) -> dict[str, float] | None:
    """Run one variant once in a subprocess; `None` when it failed (its stderr is shown)."""
    command, environment = _command(variant, sessions, args)
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        print(f"{variant} S={sessions} failed: {done.stderr[-600:]}", file=sys.stderr)
        return None
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


Figures = dict[tuple[str, int], list[dict[str, float]]]


def measure(plan: Plan, args: argparse.Namespace) -> Figures:
    """Every variant at every S, `plan.repeats` times, interleaved with a rotating order."""
    variants = list(LOCAL)
    if args.baseline is not None:
        variants += ["baseline tubeless", "baseline tubeless shared pool"]
    if args.peers is not None:
        variants += PEERS
    figures: Figures = {}
    for repeat in range(plan.repeats):
        order = variants[repeat % len(variants) :] + variants[: repeat % len(variants)]
        for sessions in plan.sessions:
            for variant in order:
                result = once(variant, sessions, args)
                if result is not None:
                    result["repeat"] = float(repeat)
                    figures.setdefault((variant, sessions), []).append(result)
    return figures


def summary(figures: Figures) -> dict[tuple[str, int], dict[str, float]]:
    """Per variant and S: median wall over the ideal, median CPU microseconds per call and
    its user share; for tubeless variants, the paired CPU ratio to the floor (`paired`)."""
    rows = {
        key: {
            "wallOverIdeal": median([r["wall"] for r in runs]) / IDEAL_SECONDS,
            "cpuUsPerCall": median([r["cpu"] / r["calls"] for r in runs]) * 1e6,
        }
        for key, runs in figures.items()
    }
    for (variant, sessions), row in rows.items():
        runs = figures[(variant, sessions)]
        if all("user" in r for r in runs):  # peers report CPU only
            row["userUsPerCall"] = median([r["user"] / r["calls"] for r in runs]) * 1e6
        ratio = paired(figures, variant, sessions)
        if ratio is not None and "tubeless" in variant:
            row["cpuPairedOverFloor"] = ratio
    return rows


def paired(figures: Figures, variant: str, sessions: int) -> float | None:
    """The median over repetitions of `variant`'s CPU per call over the thread floor's in
    the same repetition, or `None` without a repetition that measured both."""
    floor = {r.get("repeat"): r["cpu"] / r["calls"] for r in figures.get((FLOOR, sessions), [])}
    ratios = [
        r["cpu"] / r["calls"] / floor[r.get("repeat")]
        for r in figures.get((variant, sessions), [])
        if r.get("repeat") in floor
    ]
    return median(ratios) if ratios else None


def format_sessions(figures: Figures, plan: Plan) -> list[str]:
    """One table per S: wall over ideal, CPU per call, and CPU against the thread floor."""
    rows = summary(figures)
    lines: list[str] = []
    for sessions in plan.sessions:
        floor = rows.get((FLOOR, sessions))
        table = []
        for (variant, count), row in rows.items():
            if count != sessions:
                continue
            versus = f"{row['cpuUsPerCall'] / floor['cpuUsPerCall']:.2f}x" if floor else "-"
            pair = row.get("cpuPairedOverFloor")
            cells = [
                f"{row['wallOverIdeal']:.1f}x",
                f"{row['cpuUsPerCall']:.0f}",
                f"{row['userUsPerCall']:.0f}" if "userUsPerCall" in row else "-",
                versus,
                "-" if pair is None else f"{pair:.2f}x",
            ]
            table.append((variant, cells))
        title = f"S={sessions} sessions, ideal {IDEAL_SECONDS * 1e3:.0f} ms"
        columns = ["wall/ideal", "CPU us/call", "user us/call", "CPU/floor", "paired"]
        lines += format_table(title, "variant", columns, table)
        lines.append("")
    return lines[:-1]


def verdicts(figures: Figures, plan: Plan) -> list[Any]:
    """The two targets of issue 39 at the largest S, judged on the design that meets them:
    sessions on threads, every batch on one pool the application owns."""
    from _measure import Verdict

    rows, largest = summary(figures), plan.sessions[-1]
    shared = rows.get(("tubeless shared pool", largest))
    floor = rows.get((FLOOR, largest))
    if shared is None or floor is None:
        return []
    return [
        Verdict(
            target=f"{largest} sessions: tubeless (shared pool) wall / ideal",
            value=shared["wallOverIdeal"],
            limit=WALL_LIMIT,
        ),
        Verdict(
            target=f"{largest} sessions: tubeless (shared pool) CPU per call / thread floor",
            value=shared["cpuUsPerCall"] / floor["cpuUsPerCall"],
            limit=CPU_LIMIT,
            detail=f"{shared['cpuUsPerCall']:.0f} us vs {floor['cpuUsPerCall']:.0f} us; "
            f"paired {shared.get('cpuPairedOverFloor', float('nan')):.2f}x",
        ),
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", help="comma-separated session counts")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--baseline", type=Path, help="another checkout's root to compare")
    parser.add_argument("--peers", help="a Python that has the peer frameworks installed")
    parser.add_argument(
        "--tool-timeout",
        type=float,
        help="give every tubeless tool call this deadline in seconds (the deadline path)",
    )
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "S"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def plan_of(args: argparse.Namespace) -> Plan:
    """The plan the command line asks for."""
    plan = QUICK if args.quick else FULL
    if args.sessions:
        plan = dataclasses.replace(plan, sessions=tuple(int(s) for s in args.sessions.split(",")))
    if args.repeats:
        plan = dataclasses.replace(plan, repeats=args.repeats)
    return plan


def main() -> None:
    args = parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.tool_timeout)))
        return
    plan = plan_of(args)
    figures = measure(plan, args)
    print("\n".join(format_sessions(figures, plan)))
    for verdict in verdicts(figures, plan):
        print(verdict.line())


if __name__ == "__main__":
    main()

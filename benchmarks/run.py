"""Run every tubeless benchmark and report the figures and the targets of issues 7 and 39.

Usage: `python benchmarks/run.py [--quick] [--json PATH] [--profile OUT [--profile-sink S]]
[--peers PYTHON] [--baseline CHECKOUT]` (`tox -e bench -- --quick`). `--peers` names an
interpreter with langgraph, pydantic-ai and openai-agents for the sessions benchmark;
`--baseline` a checkout (say, main) whose tubeless that benchmark also measures. Every
ratio compares figures measured in this process and run. The report ends with one
PASS/FAIL line per target; the exit status is 0 whatever the verdicts (targets are read
from the report, never enforced by timing tests).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bench_agent
import bench_deadlines
import bench_delegation
import bench_durable
import bench_durable_growth
import bench_executors
import bench_inserts
import bench_memory
import bench_otel
import bench_postgres
import bench_sessions
import bench_state
import bench_stream
import bench_stream_events
import bench_traced
import profile_agent
from _measure import Verdict

TRACE_STORE_RECORDS = {False: 20_000, True: 2_000}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller N and fewer repetitions: a smoke run"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="OUT",
        help="instead of benchmarking, cProfile W(800, 4) and dump the stats to OUT",
    )
    parser.add_argument(
        "--profile-sink",
        choices=bench_agent.SINKS,
        default="none",
        help="the trace sink of the profiled run (default: none)",
    )
    parser.add_argument("--peers", help="a Python with the peer frameworks (issue 39's benches)")
    parser.add_argument("--baseline", type=Path, help="another checkout for the sessions bench")
    return parser.parse_args(argv)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def machine() -> dict[str, Any]:
    """Where and with what the figures were measured."""
    return {
        "started": _now(),
        "python": sys.version.replace("\n", " "),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "loadAverage": os.getloadavg(),
        "tubeless": importlib.metadata.version("tubeless-pipelines"),
        "jsonschema": importlib.metadata.version("jsonschema"),
        "opentelemetry-sdk": importlib.metadata.version("opentelemetry-sdk"),
    }


def emit(lines: list[str]) -> None:
    """Print a section now (the whole run takes minutes) and a blank line after it."""
    print("\n".join(lines), end="\n\n", flush=True)


def trace_store(quick: bool) -> str:
    """Run `bench_trace_store.py` in a subprocess and return its report."""
    script = Path(__file__).with_name("bench_trace_store.py")
    records = str(TRACE_STORE_RECORDS[quick])
    completed = subprocess.run(
        [sys.executable, str(script), records], capture_output=True, text=True, check=True
    )
    return completed.stdout.rstrip()


def _section(title: str) -> list[str]:
    return [title, "=" * len(title)]


def run_agent_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print the per-call tables; return the speed and linearity verdicts."""
    grid = bench_agent.QUICK if quick else bench_agent.FULL
    measured = bench_agent.AgentBench(grid).run()
    emit(_section("Agent harness: us per tool call") + bench_agent.format_agent(measured))
    figures["agent"] = bench_agent.agent_json(measured)
    shares = [bench_inserts.measure_inserts(grid.turns[0], calls) for calls in grid.calls]
    emit(bench_inserts.format_inserts(shares, measured))
    figures["agent"]["sqliteShare"] = bench_inserts.inserts_json(shares)
    stream = bench_stream.measure_stream(grid.turns[-1], bench_agent.TARGET_CALLS)
    emit(bench_stream.format_stream(stream, measured))
    figures["agent"]["recordStream"] = bench_stream.stream_json(stream)
    share = next(share for share in shares if share.calls == bench_agent.TARGET_CALLS)
    return bench_agent.agent_verdicts(measured, share.insert_us_per_call)


def run_memory_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print peak memory; return the flatness verdict."""
    measured = bench_memory.measure_memory(quick)
    emit(_section("Memory") + bench_memory.format_memory(measured))
    figures["memory"] = bench_memory.memory_json(measured)
    return [bench_memory.memory_verdict(measured)]


def run_state_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print state commit costs; return issue 39's growth verdict."""
    plan = bench_state.QUICK if quick else bench_state.FULL
    turns = bench_state.measure_turns(plan)
    own = bench_state.measure_own_state(plan)
    emit(_section("State") + bench_state.format_state(turns, own, plan))
    figures["state"] = bench_state.state_json(turns, own)
    return bench_state.state_verdicts(turns)


def run_trace_store_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Run and print the SQLite store benchmark (its own goal, not one of issue 7's)."""
    output = trace_store(quick)
    emit(_section("SQLite trace store (bench_trace_store.py)") + output.splitlines())
    figures["traceStore"] = {"records": TRACE_STORE_RECORDS[quick], "output": output}
    return []


def run_otel_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print the live OpenTelemetry sink's cost per call (information)."""
    grid = bench_otel.QUICK if quick else bench_otel.FULL
    samples = bench_otel.measure(grid)
    emit(_section("OpenTelemetry live sink") + bench_otel.format_otel(grid, samples))
    figures["otel"] = bench_otel.otel_json(grid, samples)
    return []


def run_delegation_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print the cost of one delegation against a handler call (information)."""
    plan = bench_delegation.QUICK if quick else bench_delegation.FULL
    measured = bench_delegation.measure(plan)
    title = "Delegation: one pipeline_tool call of a subagent against a handler call"
    emit(_section(title) + bench_delegation.format_delegation(measured, plan))
    marginal = bench_delegation.slopes(measured, plan)
    figures["delegation"] = {
        "turns": plan.turns,
        "widest": plan.widest,
        "secondsPerCall": marginal,
        "ratio": bench_delegation.ratio(measured, plan),
    }
    return []


def run_executors_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print tool handlers on a process pool and on Dask (information)."""
    plan = bench_executors.QUICK if quick else bench_executors.FULL
    measured = bench_executors.measure(plan)
    title = "Executors: a CPU-bound tool on threads, a process pool and a Dask cluster"
    emit(_section(title) + bench_executors.format_executors(measured, plan))
    figures["executors"] = measured
    return []


def run_deadlines_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """What `timeout=` adds to a call that finishes in time; the 5% target."""
    plan = bench_deadlines.QUICK if quick else bench_deadlines.FULL
    measured = bench_deadlines.measure(plan)
    title = "Deadlines: a tool call with and without timeout="
    emit(_section(title) + bench_deadlines.format_deadlines(measured, plan))
    figures["deadlines"] = {"turns": plan.turns, "usPerCall": measured}
    return [bench_deadlines.verdict(measured)]


def run_durable_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Durable W(200, 4) against LangGraph's sync SQLite checkpoints (when installed)."""
    plan = bench_durable.QUICK if quick else bench_durable.FULL
    measured = bench_durable.measure(plan)
    title = "Durable execution: SqliteCheckpointStore against LangGraph durability='sync'"
    emit(_section(title) + bench_durable.format_durable(measured, plan))
    figures["durable"] = {
        "turns": plan.turns,
        "calls": plan.calls,
        "variants": bench_durable.summary(plan, measured),
    }
    ratio = bench_durable.ratio(plan, measured)
    if ratio is None:
        return []
    rows = figures["durable"]["variants"]
    detail = (
        f"{rows['tubeless durable']['usPerCall']:.0f} us vs "
        f"{rows['langgraph sync']['usPerCall']:.0f} us per call"
    )
    return [
        Verdict(
            target="durable agent per call vs LangGraph sync checkpoints",
            value=ratio,
            limit=1.0,
            detail=detail,
        )
    ]


def run_postgres_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Durable cost per call on PostgreSQL beside SQLite and LangGraph's Postgres saver."""
    plan = bench_postgres.QUICK if quick else bench_postgres.FULL
    measured = bench_postgres.measure(plan)
    title = "Durable execution on PostgreSQL: PostgresCheckpointStore, SQLite, LangGraph"
    emit(_section(title) + bench_postgres.format_postgres(measured, plan))
    figures["postgres"] = {
        "turns": plan.turns,
        "calls": plan.calls,
        "variants": bench_postgres.summary(plan, measured),
    }
    return []


def run_traced_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Traced runs against the record stream and the inline call (issue 39, item 4)."""
    plan = bench_traced.QUICK if quick else bench_traced.FULL
    traced = bench_traced.measure(plan)
    emit(_section("Traced runs, restated per record") + bench_traced.format_traced(traced, plan))
    figures["traced"] = bench_traced.traced_json(traced)
    return bench_traced.verdicts(traced)


def run_sessions_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Many sessions at once against thread and asyncio floors and peers (issue 39)."""
    args = bench_sessions.parse_args(["--quick"] if quick else [])
    args.peers, args.baseline = SESSION_OPTIONS.get("peers"), SESSION_OPTIONS.get("baseline")
    plan = bench_sessions.plan_of(args)
    measured = bench_sessions.measure(plan, args)
    emit(_section("Many sessions at once") + bench_sessions.format_sessions(measured, plan))
    figures["sessions"] = {
        f"{variant} S={count}": row
        for (variant, count), row in bench_sessions.summary(measured).items()
    }
    return bench_sessions.verdicts(measured, plan)


def run_durable_growth_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """A durable agent whose observations accumulate (issue 39, item 2)."""
    plan = bench_durable_growth.QUICK if quick else bench_durable_growth.FULL
    runs = bench_durable_growth.measure(plan, SESSION_OPTIONS.get("peers"))
    emit(_section("Durable, growing state") + bench_durable_growth.format_growth(runs, plan))
    figures["durableGrowth"] = runs
    return bench_durable_growth.verdicts(runs)


SESSION_OPTIONS: dict[str, Any] = {}
"""`--peers` and `--baseline` of the command line, for `run_sessions_bench`."""


def run_events_bench(quick: bool, figures: dict[str, Any]) -> list[Verdict]:
    """Measure and print `pipeline.stream`'s cost per call; return its target (issue 36)."""
    grid = bench_stream_events.QUICK if quick else bench_stream_events.FULL
    samples = bench_stream_events.measure(grid)
    emit(
        _section("Run events: stream and astream")
        + bench_stream_events.format_events(grid, samples)
    )
    figures["events"] = {
        "grid": {"turns": grid.turns, "calls": grid.calls, "repeats": grid.repeats},
        "samplesSeconds": {",".join(map(str, key)): value for key, value in samples.items()},
    }
    return [bench_stream_events.verdict(grid, samples)]


BENCHES = (
    run_agent_bench,
    run_traced_bench,
    run_memory_bench,
    run_state_bench,
    run_sessions_bench,
    run_delegation_bench,
    run_executors_bench,
    run_durable_bench,
    run_deadlines_bench,
    run_durable_growth_bench,
    run_trace_store_bench,
    run_otel_bench,
    run_postgres_bench,
    run_events_bench,
)


def benchmark(quick: bool) -> dict[str, Any]:
    """Run every benchmark, print each section and the verdicts; return the figures."""
    figures: dict[str, Any] = {"quick": quick}
    verdicts: list[Verdict] = []
    for bench in BENCHES:
        verdicts += bench(quick, figures)
    summary = [verdict.line() for verdict in verdicts]
    if quick:
        summary.append("(quick run: smaller N and fewer repetitions; judge on a full run)")
    emit(_section("Targets of issues 7 and 39") + summary)
    figures["verdicts"] = [verdict.to_dict() for verdict in verdicts]
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print the report; write the JSON when asked."""
    args = parse_args(argv)
    SESSION_OPTIONS.update(peers=args.peers, baseline=args.baseline)
    meta = machine()
    emit([f"{key}: {value}" for key, value in meta.items()])
    started = time.perf_counter()
    if args.profile is not None:
        figures: dict[str, Any] = {}
        emit(profile_agent.profile_agent(args.profile, args.profile_sink))
    else:
        figures = benchmark(args.quick)
    meta["finished"] = _now()
    meta["elapsedSeconds"] = round(time.perf_counter() - started, 1)
    emit([f"finished: {meta['finished']} ({meta['elapsedSeconds']} s)"])
    if args.json is not None:
        args.json.write_text(json.dumps({"meta": meta, **figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

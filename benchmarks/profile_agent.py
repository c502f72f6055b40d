"""cProfile one W(N, K) agent run, the tool pool's worker threads included.

`cProfile` sees only the thread that enables it, so every thread started during the run
(the invocation's tool workers) gets its own profiler, enabled from its first profiled
event; the main thread's and the workers' statistics are merged into one file. Figures
are also given per tool call (time / (N * K)); cProfile's own overhead inflates them all.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from bench_agent import build_agent, open_sink, run_agent

PROFILE_TURNS = 800
PROFILE_CALLS = 4
TOP = 30


class WorkerProfiles:
    """Gives every thread started while active its own enabled `cProfile.Profile`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.profiles: list[cProfile.Profile] = []

    def _start(self, frame: FrameType, event: str, arg: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> WorkerProfiles:
        threading.setprofile(self._start)
        return self

    def __exit__(self, *exc_info: object) -> None:
        threading.setprofile(None)


def profiled_run(sink_kind: str) -> tuple[pstats.Stats, float, int]:
    """Run W(800, 4) under cProfile; return merged stats, wall seconds and thread count."""
    agent = build_agent(PROFILE_TURNS, PROFILE_CALLS)
    run_agent(agent)  # warm caches, as the timed benchmark does
    main = cProfile.Profile()
    with tempfile.TemporaryDirectory() as directory:
        sink, close = open_sink(sink_kind, Path(directory))
        context = None if sink is None else {"tracing": sink}
        with WorkerProfiles() as workers:
            started = time.perf_counter()
            main.enable()
            run_agent(agent, context)
            close()
            main.disable()
            elapsed = time.perf_counter() - started
    stats = pstats.Stats(main)
    for profile in workers.profiles:
        stats.add(profile)
    return stats, elapsed, 1 + len(workers.profiles)


def _label(function: tuple[str, int, str]) -> str:
    path, line, name = function
    if not line:
        return name
    parts = Path(path).parts
    for anchor in ("tubeless", "site-packages", "lib"):
        if anchor in parts:
            parts = parts[parts.index(anchor) + (anchor != "tubeless") :]
            return f"{'/'.join(parts)}:{line}({name})"
    return f"{Path(path).name}:{line}({name})"


def top_table(stats: pstats.Stats, sort: str, calls: int) -> list[str]:
    """The `TOP` functions by `sort` ("cumulative" or "tottime"), per tool call."""
    entries = stats.stats  # type: ignore[attr-defined]
    index = 3 if sort == "cumulative" else 2
    ranked = sorted(entries.items(), key=lambda item: item[1][index], reverse=True)[:TOP]
    lines = [
        f"Top {TOP} by {sort}, per tool call (us, and calls per tool call)",
        f"  {'cumulative':>10}  {'own':>8}  {'calls':>6}  function",
    ]
    for function, (_, count, own, cumulative, _) in ranked:
        lines.append(
            f"  {cumulative / calls * 1e6:10.2f}  {own / calls * 1e6:8.2f}"
            f"  {count / calls:6.2f}  {_label(function)}"
        )
    return lines


def profile_agent(out: Path, sink_kind: str = "none") -> list[str]:
    """Profile one run, dump the merged stats to `out`, return the report lines."""
    stats, elapsed, threads = profiled_run(sink_kind)
    stats.dump_stats(out)
    calls = PROFILE_TURNS * PROFILE_CALLS
    lines = [
        f"cProfile of W({PROFILE_TURNS}, {PROFILE_CALLS}), sink {sink_kind}: "
        f"{elapsed:.2f} s wall under the profiler ({elapsed / calls * 1e6:.1f} us/call), "
        f"{threads} threads profiled; stats in {out}",
        "Idle threads count too: queue get and lock acquire are mostly time spent waiting.",
        "",
    ]
    lines += top_table(stats, "cumulative", calls)
    lines.append("")
    lines += top_table(stats, "tottime", calls)
    return lines

"""The cost of committing state that grows: per turn over a long run, and `own_state` alone.

Per turn: W(N, 4) of `bench_agent`, once with the constant-size counting reducer (the
control) and twice with a reducer that appends each turn's outcomes to `observations`,
so state grows by 4 entries a turn: into a new list
(`{"observations": [*state["observations"], *outcomes]}`, whose head the commit matches
by identity) and by `+` on the committed tuple (`state["observations"] + outcomes`, a sum
that is committed state already). `decide` stamps
`time.perf_counter()` on entry, so a turn's cost is the time between one decision and the
next (decide, calls, reduce, commit and the iteration's bookkeeping) less the reducer's own
time (timed inside it: the harness alone, as issue 39 states the target; the growing
reducer copies the list, which is the caller's cost).
The report gives the median turn of the first and of the last window of
turns, each the median over repetitions, the three cases run alternately.

`own_state` alone: a frozen state holding `size` observations, then the state a reducer
returns next: a new list of the old (frozen) entries plus one new one (given the previous
state, as the reduce step gives it, and without); the old tuple itself; the previous
frozen state itself. Timed with `timeit` (gc off while timing).

    python benchmarks/bench_state.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import itertools
import math
import time
import timeit
from collections.abc import Callable
from typing import Any

from _measure import Verdict, format_table, median
from bench_agent import build_agent, count_calls, run_agent

from tubeless.agent import own_state

STATE_CALLS = 4
GROWTH_LIMIT = 1.3
"""The growing state's last window over its first, the harness alone (issue 39)."""


@dataclasses.dataclass(frozen=True, slots=True)
class StatePlan:
    """How long the runs are and how often things are timed."""

    turns: int
    """Turns of each run."""
    window: int
    """Turns in the first and in the last window."""
    repeats: int
    """Runs of each case, and `timeit` samples of each `own_state` case."""
    sizes: tuple[int, ...]
    """Observation counts for the direct `own_state` cost."""
    sample_seconds: float
    """Least time one `timeit` sample should take."""


FULL = StatePlan(
    turns=2000, window=100, repeats=5, sizes=(10, 100, 1000, 10000), sample_seconds=0.2
)
QUICK = StatePlan(
    turns=200, window=20, repeats=3, sizes=(10, 100, 1000, 10000), sample_seconds=0.03
)


def append_outcomes(state: Any, outcomes: Any) -> dict[str, list[Any]]:
    """The growing reducer: keep every outcome as an observation, in a new list."""
    return {"observations": [*state["observations"], *outcomes]}


def add_outcomes(state: Any, outcomes: Any) -> dict[str, Any]:
    """The same, by `+` on the committed tuple (its head needs no look at the commit)."""
    return {"observations": state["observations"] + outcomes}


@dataclasses.dataclass(frozen=True, slots=True)
class StateCase:
    """An agent state shape: its initial state, reducer and committed-call count."""

    name: str
    """Row label."""
    initial_state: Callable[[Any], Any]
    """`initial_state(options)`."""
    reduce: Callable[[Any, Any], Any]
    """The reducer."""
    committed: Callable[[Any], int]
    """Calls the final state accounts for."""


CASES = (
    StateCase("constant {n}", lambda options: {"n": 0}, count_calls, lambda state: state["n"]),
    StateCase(
        "growing observations",
        lambda options: {"observations": []},
        append_outcomes,
        lambda state: len(state["observations"]),
    ),
    StateCase(
        "growing observations, +",
        lambda options: {"observations": []},
        add_outcomes,
        lambda state: len(state["observations"]),
    ),
)


def turn_seconds(case: StateCase, turns: int) -> list[float]:
    """Run W(turns, 4) with `case`'s state and return each turn's duration, in order."""
    stamps: list[float] = []
    reducing: list[float] = []

    def reduce(state: Any, outcomes: Any) -> Any:
        started = time.perf_counter()
        try:
            return case.reduce(state, outcomes)
        finally:
            reducing.append(time.perf_counter() - started)

    agent = build_agent(
        turns,
        STATE_CALLS,
        initial_state=case.initial_state,
        reduce=reduce,
        on_turn=lambda turn: stamps.append(time.perf_counter()),
    )
    gc.collect()
    result = run_agent(agent)
    if case.committed(result) != turns * STATE_CALLS:
        raise RuntimeError(f"{case.name}: committed {case.committed(result)} calls")
    turns_taken = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    return [taken - reduced for taken, reduced in zip(turns_taken, reducing, strict=True)]


@dataclasses.dataclass(frozen=True, slots=True)
class TurnFigure:
    """Median turn duration of the first and last windows of one case."""

    case: str
    """The state shape."""
    early: float
    """Microseconds per turn over the first window."""
    late: float
    """Microseconds per turn over the last window."""


def measure_turns(plan: StatePlan) -> list[TurnFigure]:
    """Run each case `plan.repeats` times, alternating, and reduce to window medians."""
    early: dict[str, list[float]] = {case.name: [] for case in CASES}
    late: dict[str, list[float]] = {case.name: [] for case in CASES}
    for _ in range(plan.repeats):
        for case in CASES:
            durations = turn_seconds(case, plan.turns)
            early[case.name].append(median(durations[: plan.window]))
            late[case.name].append(median(durations[-plan.window :]))
    return [
        TurnFigure(case.name, median(early[case.name]) * 1e6, median(late[case.name]) * 1e6)
        for case in CASES
    ]


def observation(index: int) -> dict[str, Any]:
    """An observation shaped like a successful call's outcome."""
    return {"id": f"c{index}", "tool": "echo", "ok": True, "value": index}


def per_call_seconds(action: Callable[[], Any], plan: StatePlan) -> float:
    """Median seconds per call of `action` over `plan.repeats` samples."""
    single = timeit.timeit(action, number=1)
    number = max(1, math.ceil(plan.sample_seconds / max(single, 1e-9)))
    samples = timeit.repeat(action, number=number, repeat=plan.repeats)
    return median(samples) / number


@dataclasses.dataclass(frozen=True, slots=True)
class OwnStateFigure:
    """Direct `own_state` costs at one observation count, in microseconds."""

    size: int
    """Observations in the previous state."""
    appended: float
    """A new list: the previous frozen entries plus one new observation, given `previous`."""
    appended_alone: float
    """The same list without the previous state (its entries checked by type)."""
    same_tuple: float
    """A new dict around the previous state's (frozen) observation tuple."""
    same_state: float
    """The previous frozen state itself."""


def measure_own_state(plan: StatePlan) -> list[OwnStateFigure]:
    """Time `own_state` on the next states, for each size."""
    figures = []
    for size in plan.sizes:
        previous = own_state({"observations": [observation(i) for i in range(size)]})
        entries = previous["observations"]
        appended = {"observations": [*entries, observation(size)]}
        same_tuple = {"observations": entries}
        actions = (
            functools.partial(own_state, appended, previous=previous),
            functools.partial(own_state, appended),
            functools.partial(own_state, same_tuple, previous=previous),
            functools.partial(own_state, previous, previous=previous),
        )
        costs = [per_call_seconds(action, plan) * 1e6 for action in actions]
        figures.append(OwnStateFigure(size, *costs))
    return figures


def format_state(turns: list[TurnFigure], own: list[OwnStateFigure], plan: StatePlan) -> list[str]:
    """The per-turn window table and the direct `own_state` table."""
    first = f"turns 1-{plan.window}"
    last = f"turns {plan.turns - plan.window + 1}-{plan.turns}"
    lines = format_table(
        f"State commit per turn, W({plan.turns}, {STATE_CALLS}), no sink, reducer excluded: "
        "us/turn",
        "state",
        [first, last, "last / first"],
        [(f.case, [f"{f.early:.1f}", f"{f.late:.1f}", f"{f.late / f.early:.2f}x"]) for f in turns],
    )
    lines.append("")
    lines += format_table(
        "own_state on the next state: us/call",
        "observations",
        ["old + 1 new", "ns/entry", "no previous", "same tuple", "same frozen state"],
        [
            (
                f"{f.size:,}",
                [
                    f"{f.appended:.1f}",
                    f"{f.appended / (f.size + 1) * 1e3:.0f}",
                    f"{f.appended_alone:.1f}",
                    f"{f.same_tuple:.1f}",
                    f"{f.same_state:.1f}",
                ],
            )
            for f in own
        ],
    )
    return lines


def state_json(turns: list[TurnFigure], own: list[OwnStateFigure]) -> dict[str, Any]:
    """The figures as JSON."""
    return {
        "perTurnMicroseconds": [dataclasses.asdict(figure) for figure in turns],
        "ownStateMicroseconds": [dataclasses.asdict(figure) for figure in own],
    }


def state_verdicts(turns: list[TurnFigure]) -> list[Verdict]:
    """Issue 39's target: the growing state's late turn within 1.3x its early one."""
    return [
        Verdict(
            target=f"{figure.case}: late / early turn, harness alone",
            value=figure.late / figure.early,
            limit=GROWTH_LIMIT,
            detail=f"{figure.late:.0f} us vs {figure.early:.0f} us",
        )
        for figure in turns
        if figure.case.startswith("growing")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    plan = QUICK if parser.parse_args().quick else FULL
    turns = measure_turns(plan)
    print("\n".join(format_state(turns, measure_own_state(plan), plan)))
    for verdict in state_verdicts(turns):
        print(verdict.line())


if __name__ == "__main__":
    main()

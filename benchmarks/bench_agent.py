"""Harness overhead per tool call: tubeless agents against two floors, in one process.

Workload W(N, K): a `decide` that, for turns 1..N, continues with K calls of the tool
`echo` (`{"x": integer}` in, the integer out) and then finishes with the final state;
limits allow exactly that (`max_turns = max_decisions = N + 1`, `max_calls = N * K`,
`max_concurrency = K`). State is constant-size: `{"n": 0}` and a reducer that counts
the calls (`{"n": n + len(outcomes)}`), so the finish result proves every call ran.

Floors, timed the same way in the same run: (1) a loop that builds the same call dicts
and submits each batch of K to one `ThreadPoolExecutor(K)` (made and shut down inside the
clock, as an agent run makes and shuts down its own pool), collecting results in order;
(2) the same loop with a precompiled `jsonschema.Draft202012Validator` `validate()` of
each input and each output, inside the task; (3) `inline`: floor (2)'s validated work
done on the calling thread, no pool (steadier than (2), whose thread hand-off has two
speeds on these machines).

Each figure is the median of 5 repetitions (3 with --quick) of the whole run, divided by
N * K (definition built before the clock; sinks opened before it and closed inside it).
A point whose first run is too slow for 5 runs within `Grid.budget` seconds gets 3, or
1: a run of several seconds already averages thousands of calls. The floors and every
sink run interleaved, point by point, in an order that rotates each repetition, so
machine noise hits all of them; `gc.collect()` precedes every measurement.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _measure import Verdict, format_table, median, seconds
from jsonschema import Draft202012Validator

from tubeless.agent import Durability, define_agent, define_tool
from tubeless.pipeline import Pipeline
from tubeless.testing import MemoryTraceSink
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, TraceSink

ECHO_INPUT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}
ECHO_OUTPUT = {"type": "integer"}
SINKS = ("none", "memory", "ndjson", "sqlite")
FLOORS = ("floor1", "floor2", "inline")
VARIANTS = (*FLOORS, *SINKS)
SINK_TITLES = {
    "none": "tubeless, no sink",
    "memory": "tubeless + MemoryTraceSink",
    "ndjson": "tubeless + NdjsonTraceSink",
    "sqlite": "tubeless + SqliteTraceStore",
}
TARGET_CALLS = 4
NO_SINK_LIMIT = 2.5
"""No sink, over the inline floor (issue 19)."""
SINK_LIMITS = {"memory": 2.0, "ndjson": 3.0}
"""Each sink over the no-sink run (issue 19)."""
SQLITE_LIMIT = 1.3
"""The SQLite store over the no-sink run plus raw SQLite of the same rows (issue 19)."""
LINEAR_LIMIT = 1.2

Reducer = Callable[[Any, Any], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Grid:
    """The points measured and how often."""

    turns: tuple[int, ...]
    """Values of N, ascending."""
    calls: tuple[int, ...]
    """Values of K, ascending; must include `TARGET_CALLS`."""
    repeats: int
    """Repetitions of a point (the median is reported), odd."""
    budget: float
    """Seconds one point may take in all: a slower point is repeated 3 times, or once."""

    def repeats_after(self, first: float) -> int:
        """How many runs a point gets, given its first run took `first` seconds.

        A run of many seconds already averages over thousands of calls; repeating it
        would only stretch the whole benchmark past a few minutes.
        """
        for count in (self.repeats, 3):
            if first * count <= self.budget:
                return count
        return 1


FULL = Grid(turns=(50, 200, 800), calls=(1, 4, 16), repeats=5, budget=8.0)
QUICK = Grid(turns=(20, 60), calls=(1, 4, 16), repeats=3, budget=1.0)


def call_batch(calls: int) -> list[dict[str, Any]]:
    """The K calls a continuing turn asks for (also what the floors submit)."""
    return [{"id": f"c{index}", "tool": "echo", "input": {"x": index}} for index in range(calls)]


class Workload:
    """The scripted `decide` of W(N, K); `on_turn(turn)` runs first when given."""

    def __init__(
        self, turns: int, calls: int, on_turn: Callable[[int], None] | None = None
    ) -> None:
        self._turns = turns
        self._calls = calls
        self._on_turn = on_turn

    def __call__(self, state: Any, context: Any) -> dict[str, Any]:
        if self._on_turn is not None:
            self._on_turn(context.turn)
        if context.turn > self._turns:
            return {"kind": "finish", "result": state}
        return {"kind": "continue", "calls": call_batch(self._calls)}


def count_calls(state: Any, outcomes: Any) -> dict[str, int]:
    """The constant-size reducer: count the calls committed so far."""
    return {"n": state["n"] + len(outcomes)}


def echo(value: Any) -> int:
    """The tool's work: return the input's `x`."""
    return int(value["x"])


def build_agent(
    turns: int,
    calls: int,
    *,
    initial_state: Callable[[Any], Any] = lambda options: {"n": 0},
    reduce: Reducer = count_calls,
    on_turn: Callable[[int], None] | None = None,
    durability: Durability | None = None,
) -> Pipeline:
    """Define the W(N, K) agent, limits allowing exactly N turns of K calls."""
    tool = define_tool(
        description="Return x",
        input_schema=ECHO_INPUT,
        output_schema=ECHO_OUTPUT,
        run=lambda value, context: echo(value),
    )
    return define_agent(
        id="bench",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=initial_state,
        decide=Workload(turns, calls, on_turn),
        reduce=reduce,
        tools={"echo": tool},
        limits={
            "max_turns": turns + 1,
            "max_calls": turns * calls,
            "max_decisions": turns + 1,
            "max_concurrency": calls,
        },
        implementation_version=None if durability is None else "bench",
        durability=durability,
    )


def run_agent(agent: Pipeline, context: dict[str, Any] | None = None) -> Any:
    """Run an agent to completion and return its result.

    Raises:
        RuntimeError: when the run did not complete.
    """
    run = agent.run({}, context=context)
    if run.status != "completed":
        raise RuntimeError(f"benchmark agent run {run.status}: {run.errors}")
    return run.value


class ValidatedEcho:
    """Floor (2)'s task: validate the input, echo, validate the output."""

    def __init__(self) -> None:
        self._input = Draft202012Validator(ECHO_INPUT)
        self._output = Draft202012Validator(ECHO_OUTPUT)

    def __call__(self, value: Any) -> int:
        self._input.validate(value)
        result = echo(value)
        self._output.validate(result)
        return result


def floor_seconds(turns: int, calls: int, task: Callable[[Any], int]) -> float:
    """Time the bare loop: N batches of K calls through one reused pool."""
    totals: list[int] = []

    def loop() -> None:
        total = 0
        with concurrent.futures.ThreadPoolExecutor(calls) as pool:
            for _ in range(turns):
                futures = [pool.submit(task, call["input"]) for call in call_batch(calls)]
                total += sum(future.result() for future in futures)
        totals.append(total)

    elapsed = seconds(loop)
    if totals != [turns * calls * (calls - 1) // 2]:
        raise RuntimeError(f"floor computed {totals}")
    return elapsed


def inline_seconds(turns: int, calls: int, task: Callable[[Any], int]) -> float:
    """Time the same N batches of K validated calls on the calling thread, no pool."""
    totals: list[int] = []

    def loop() -> None:
        total = 0
        for _ in range(turns):
            total += sum(task(call["input"]) for call in call_batch(calls))
        totals.append(total)

    elapsed = seconds(loop)
    if totals != [turns * calls * (calls - 1) // 2]:
        raise RuntimeError(f"inline floor computed {totals}")
    return elapsed


def open_sink(kind: str, directory: Path) -> tuple[TraceSink | None, Callable[[], None]]:
    """Open the sink `kind` (files in `directory`) and return it with its closer."""
    if kind == "none":
        return None, lambda: None
    sink: MemoryTraceSink | NdjsonTraceSink | SqliteTraceStore
    if kind == "memory":
        sink = MemoryTraceSink()
    elif kind == "ndjson":
        sink = NdjsonTraceSink(directory / "trace.ndjson")
    else:
        sink = SqliteTraceStore(directory / "trace.sqlite")
    return sink, sink.close


def agent_seconds(agent: Pipeline, kind: str, expected_calls: int) -> float:
    """Time one run of `agent` with the sink `kind`, the sink's close included."""
    results: list[Any] = []
    with tempfile.TemporaryDirectory() as directory:
        sink, close = open_sink(kind, Path(directory))
        context = None if sink is None else {"tracing": sink}

        def run() -> None:
            results.append(run_agent(agent, context))
            close()

        elapsed = seconds(run)
    if results[0]["n"] != expected_calls:
        raise RuntimeError(f"agent committed {results[0]['n']} calls, not {expected_calls}")
    return elapsed


@dataclasses.dataclass(frozen=True, slots=True)
class AgentFigures:
    """Every sample of the grid, in seconds per whole run."""

    grid: Grid
    """The points measured."""
    samples: dict[tuple[str, int, int], list[float]]
    """`(variant, N, K)` -> one duration per repetition."""

    def per_call(self, variant: str, turns: int, calls: int) -> float:
        """Median microseconds per call of `variant` at (N, K)."""
        return median(self.samples_of(variant, turns, calls)) / (turns * calls) * 1e6

    def samples_of(self, variant: str, turns: int, calls: int) -> list[float]:
        """Every duration measured for `variant` at (N, K), in seconds."""
        return self.samples[variant, turns, calls]

    def cell(self, variant: str, turns: int, calls: int) -> str:
        """A table cell: us/call, the ratio to floor (2) for a sink, the repetition marker."""
        text = f"{self.per_call(variant, turns, calls):.1f}"
        if variant not in FLOORS:
            text += f" ({self.ratio(variant, turns, calls):.1f}x)"
        return text + self.marker(variant, turns, calls)

    def marker(self, variant: str, turns: int, calls: int) -> str:
        """`" [n]"` when the point has fewer than the grid's repetitions, else nothing."""
        count = len(self.samples_of(variant, turns, calls))
        return "" if count == self.grid.repeats else f" [{count}]"

    def ratio(self, variant: str, turns: int, calls: int) -> float:
        """Per-call cost of `variant` over floor (2) at (N, K)."""
        return self.per_call(variant, turns, calls) / self.per_call("floor2", turns, calls)

    def growth(self, variant: str, calls: int) -> float:
        """Per-call cost at the largest N over the smallest N."""
        turns = self.grid.turns
        return self.per_call(variant, turns[-1], calls) / self.per_call(variant, turns[0], calls)


class AgentBench:
    """Measures every variant at every grid point; agents are defined once per point."""

    def __init__(self, grid: Grid) -> None:
        self._grid = grid
        self._floor2 = ValidatedEcho()
        self._agents = {
            (turns, calls): build_agent(turns, calls)
            for turns in grid.turns
            for calls in grid.calls
        }

    def measure(self, variant: str, turns: int, calls: int) -> float:
        """Seconds for one whole run of `variant` at (N, K)."""
        if variant == "floor1":
            return floor_seconds(turns, calls, echo)
        if variant == "floor2":
            return floor_seconds(turns, calls, self._floor2)
        if variant == "inline":
            return inline_seconds(turns, calls, self._floor2)
        return agent_seconds(self._agents[turns, calls], variant, turns * calls)

    def run(self) -> AgentFigures:
        """Warm up at the smallest N, then measure every point, interleaved."""
        grid = self._grid
        for calls in grid.calls:
            for variant in VARIANTS:
                self.measure(variant, grid.turns[0], calls)
        samples: dict[tuple[str, int, int], list[float]] = {}
        wanted: dict[tuple[str, int, int], int] = {}
        for repeat in range(grid.repeats):
            shift = repeat % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            for key in self._points(order):
                taken = samples.setdefault(key, [])
                if len(taken) < wanted.get(key, grid.repeats):
                    taken.append(self.measure(*key))
                    wanted.setdefault(key, grid.repeats_after(taken[0]))
        return AgentFigures(grid, samples)

    def _points(self, order: tuple[str, ...]) -> list[tuple[str, int, int]]:
        grid = self._grid
        return [
            (variant, turns, calls)
            for turns in grid.turns
            for calls in grid.calls
            for variant in order
        ]


def _grid_table(figures: AgentFigures, title: str, variant: str) -> list[str]:
    grid = figures.grid
    rows = [
        (f"N={turns}", [figures.cell(variant, turns, calls) for calls in grid.calls])
        for turns in grid.turns
    ]
    return format_table(title, "", [f"K={calls}" for calls in grid.calls], rows)


def _repeats_legend(grid: Grid) -> str:
    legend = f"Median of {grid.repeats} runs per point; [n]: a point run n times, its first run"
    if grid.repeats > 3:
        legend += f" taking over {grid.budget / grid.repeats:.2g} s ([1]: over"
        return legend + f" {grid.budget / 3:.2g} s)"
    return legend + f" taking over {grid.budget / grid.repeats:.2g} s"


def format_agent(figures: AgentFigures) -> list[str]:
    """The per-call tables: floors, each sink with its ratio to floor (2), growth with N."""
    grid = figures.grid
    lines = [_repeats_legend(grid), ""]
    titles = {
        "floor1": "Floor (1), pool only: us/call",
        "floor2": "Floor (2), pool + jsonschema: us/call",
        "inline": "Floor (3), inline jsonschema, no pool: us/call",
        **{sink: f"{SINK_TITLES[sink]}: us/call (x floor 2)" for sink in SINKS},
    }
    for variant in VARIANTS:
        lines += [*_grid_table(figures, titles[variant], variant), ""]
    first, last = figures.grid.turns[0], figures.grid.turns[-1]
    rows = [
        (name, [f"{figures.growth(name, calls):.2f}x" for calls in figures.grid.calls])
        for name in VARIANTS
    ]
    columns = [f"K={calls}" for calls in figures.grid.calls]
    lines += format_table(f"Growth: us/call at N={last} / at N={first}", "", columns, rows)
    return lines


def agent_verdicts(figures: AgentFigures, raw_sqlite_us: float) -> list[Verdict]:
    """The speed and linearity targets of issue 19, judged at the largest N and K=4.

    `raw_sqlite_us` is what building and inserting the run's rows alone costs per call.
    """
    turns = figures.grid.turns[-1]
    point = f"N={turns},K={TARGET_CALLS}"

    def cost(variant: str) -> float:
        return figures.per_call(variant, turns, TARGET_CALLS)

    none, inline = cost("none"), cost("inline")
    verdicts = [
        Verdict(
            target=f"{SINK_TITLES['none']} per call vs the inline floor at {point}",
            value=none / inline,
            limit=NO_SINK_LIMIT,
            detail=f"{none:.1f} us vs {inline:.1f} us",
        )
    ]
    for sink, limit in SINK_LIMITS.items():
        verdicts.append(
            Verdict(
                target=f"{SINK_TITLES[sink]} per call vs no sink at {point}",
                value=cost(sink) / none,
                limit=limit,
                detail=f"{cost(sink):.1f} us vs {none:.1f} us",
            )
        )
    bound = none + raw_sqlite_us
    verdicts.append(
        Verdict(
            target=f"{SINK_TITLES['sqlite']} per call vs no sink + raw SQLite at {point}",
            value=cost("sqlite") / bound,
            limit=SQLITE_LIMIT,
            detail=f"{cost('sqlite'):.1f} us vs {none:.1f} + {raw_sqlite_us:.1f} us",
        )
    )
    first = figures.grid.turns[0]
    for sink in ("none", "sqlite"):
        early = figures.per_call(sink, first, TARGET_CALLS)
        late = figures.per_call(sink, turns, TARGET_CALLS)
        verdicts.append(
            Verdict(
                target=f"linear: {SINK_TITLES[sink]} K={TARGET_CALLS}, N={turns} vs N={first}",
                value=late / early,
                limit=LINEAR_LIMIT,
                detail=f"{late:.1f} us vs {early:.1f} us",
            )
        )
    return verdicts


def agent_json(figures: AgentFigures) -> dict[str, Any]:
    """The figures as JSON: per-call medians, ratios to floor (2) and raw samples."""
    grid = figures.grid

    def by_point(value: Callable[[str, int, int], Any], name: str) -> dict[str, dict[str, Any]]:
        return {
            str(turns): {str(calls): value(name, turns, calls) for calls in grid.calls}
            for turns in grid.turns
        }

    return {
        "grid": dataclasses.asdict(grid),
        "perCallMicroseconds": {name: by_point(figures.per_call, name) for name in VARIANTS},
        "ratioToFloor2": {name: by_point(figures.ratio, name) for name in SINKS},
        "samplesSeconds": {name: by_point(figures.samples_of, name) for name in VARIANTS},
    }

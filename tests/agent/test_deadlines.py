"""Tool deadlines, retries and the run's time budget, with real threads.

Handlers that ignore their deadline are held by events the test controls, so the order of
what happened (not how long it took) shows that a permit was kept or a run drained.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

import tubeless
from tubeless.agent import (
    AgentLimits,
    Durability,
    Retry,
    ToolContext,
    define_agent,
    define_tool,
    pipeline_tool,
    tool_from_function,
)
from tubeless.errors import AgentDefinitionError, AgentLimitError, ToolError
from tubeless.pipeline import Pipeline, PipelineRun
from tubeless.testing import MemoryCheckpointStore, MemoryTraceSink, scripted_decide

TIMED_OUT = "TUBELESS_AGENT_CALL_TIMED_OUT"
ANY: dict[str, Any] = {}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30.0
"""Seconds a held handler would wait if the test never released it (never reached)."""


def _call(tool: str, call_id: str = "c1") -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": call_id, "tool": tool, "input": {}}]}


def _agent(
    tools: dict[str, Any],
    decisions: list[Any],
    *,
    limits: Any = None,
    reduce: Any = None,
    agent_id: str = "deadlines",
    durability: Durability | None = None,
) -> Pipeline:
    return define_agent(
        id=agent_id,
        input_schema=ANY,
        result_schema=ANY,
        initial_state=lambda options: {"outcomes": []},
        decide=scripted_decide(decisions),
        reduce=reduce
        or (lambda state, outcomes: {"outcomes": [*state["outcomes"], *map(dict, outcomes)]}),
        tools=tools,
        limits=limits,
        durability=durability,
        implementation_version="1" if durability is not None else None,
    )


def _tool(run: Any, **options: Any) -> Any:
    return define_tool(description="t", input_schema=ANY, output_schema=ANY, run=run, **options)


def _outcomes(state: Any, context: Any) -> dict[str, Any]:
    return {"kind": "finish", "result": list(state["outcomes"])}


def _error_code(outcome: Any) -> str | None:
    return None if outcome["ok"] else str(outcome["error"]["code"])


def _limit_error(run: PipelineRun) -> AgentLimitError:
    error: BaseException | None = run.first_exception()
    while error is not None and not isinstance(error, AgentLimitError):
        error = error.__cause__
    assert isinstance(error, AgentLimitError), run.errors
    return error


# -- definitions ------------------------------------------------------------------------

BAD_SECONDS = [0, -1, -0.5, math.nan, math.inf, True, False, "1", 1e10]


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_a_bad_timeout_is_a_coded_definition_error(value: Any) -> None:
    """A timeout that is not seconds above zero is refused by every tool maker."""
    with pytest.raises(AgentDefinitionError, match="timeout") as raised:
        _tool(lambda value, context: 1, timeout=value)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    child = tubeless.define_pipeline(
        id="child", steps=[tubeless.create_steps().step("s", run=lambda i, c: 1)]
    )
    with pytest.raises(AgentDefinitionError, match="timeout"):
        pipeline_tool(child, description="c", input_json_schema=ANY, timeout=value)


def typed(n: int) -> int:
    """Return `n`."""
    return n


@pytest.mark.parametrize("value", [0, math.nan, True, "2"])
def test_tool_from_function_refuses_a_bad_timeout(value: Any) -> None:
    """`tool_from_function` checks its timeout as `define_tool` does."""
    pytest.importorskip("pydantic")
    with pytest.raises(AgentDefinitionError, match="timeout"):
        tool_from_function(typed, timeout=value)
    assert tool_from_function(typed, timeout=2).description


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_a_bad_max_seconds_is_a_coded_definition_error(value: Any) -> None:
    """`max_seconds` must be seconds above zero, in a dict or in `AgentLimits`."""
    with pytest.raises(AgentDefinitionError, match="max_seconds") as raised:
        _agent({}, [FINISH], limits={"max_seconds": value})
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    with pytest.raises(AgentDefinitionError, match="max_seconds"):
        _agent({}, [FINISH], limits=AgentLimits(max_seconds=value))


def test_max_seconds_is_on_the_wire_only_when_set() -> None:
    """Limits without `max_seconds` keep their wire form, so identities stay the same."""
    assert "maxSeconds" not in AgentLimits().to_dict()
    assert AgentLimits(max_seconds=2).to_dict()["maxSeconds"] == 2
    plain = _agent({}, [FINISH]).definition.identity
    same = _agent({}, [FINISH], limits=AgentLimits()).definition.identity
    bounded = _agent({}, [FINISH], limits={"max_seconds": 5}).definition.identity
    assert plain == same != bounded


@pytest.mark.parametrize(
    "options",
    [
        {"attempts": 0},
        {"attempts": True},
        {"attempts": 1.5},
        {"backoff": -1},
        {"backoff": math.nan},
        {"max_backoff": "1"},
        {"codes": "BUSY"},
        {"codes": ("",)},
        {"codes": (7,)},
    ],
)
def test_a_bad_retry_is_a_coded_definition_error(options: dict[str, Any]) -> None:
    """Every field of `Retry` is checked when it is made."""
    with pytest.raises(AgentDefinitionError) as raised:
        Retry(**options)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


def test_only_a_safe_tool_may_retry() -> None:
    """`retry=` on a tool that is not `replay="safe"` is a definition error."""
    with pytest.raises(AgentDefinitionError, match="replay='safe'"):
        _tool(lambda value, context: 1, retry=Retry())
    with pytest.raises(AgentDefinitionError, match=r"tubeless\.Retry"):
        _tool(lambda value, context: 1, retry={"attempts": 2}, replay="safe")
    assert _tool(lambda value, context: 1, retry=Retry(), replay="safe").description == "t"


def test_a_subagent_takes_no_timeout() -> None:
    """A subagent is bounded by its own `max_seconds`, not by a tool timeout."""
    child = _agent({}, [FINISH], agent_id="child")
    with pytest.raises(AgentDefinitionError, match="max_seconds"):
        pipeline_tool(child, description="c", timeout=1)


def test_retry_pauses_grow_and_stay_within_their_jitter() -> None:
    """Each pause lies in the upper half of its doubling step, capped by `max_backoff`."""
    retry = Retry(attempts=10, backoff=0.5, max_backoff=3.0)
    steps = [0.5, 1.0, 2.0, 3.0, 3.0]
    for attempt, step in enumerate(steps, start=1):
        assert retry.delay(attempt, lambda: 0.0) == step / 2
        assert retry.delay(attempt, lambda: 1.0) == step
        drawn = [retry.delay(attempt) for _ in range(200)]
        assert all(step / 2 <= pause <= step for pause in drawn)
        assert len(set(drawn)) > 1
    assert Retry(backoff=0).delay(5) == 0
    assert Retry(max_backoff=30).delay(10_000, lambda: 1.0) == 30


# -- deadlines --------------------------------------------------------------------------


def test_a_handler_sees_its_deadline(thread_baseline: int) -> None:
    """`context.deadline` and `context.time_left()` describe the attempt's deadline."""
    seen: list[tuple[Any, Any]] = []

    def look(value: Any, context: ToolContext) -> int:
        seen.append((context.deadline, context.time_left()))
        return 1

    agent = _agent(
        {"bounded": _tool(look, timeout=5), "free": _tool(look)},
        [_call("bounded"), _call("free"), _outcomes],
    )
    before = time.monotonic()
    run = agent.run({})
    assert run.status == "completed", run.errors
    (deadline, left), (none, no_left) = seen
    assert before < deadline <= time.monotonic() + 5
    assert 0 < left <= 5
    assert none is None and no_left is None


def test_a_cooperative_handler_stops_at_its_deadline(thread_baseline: int) -> None:
    """`context.sleep` raises the timed-out `ToolError` at the deadline, not after its time."""
    stopped: list[tuple[float, float]] = []

    def nap(value: Any, context: ToolContext) -> int:
        try:
            context.sleep(WAIT)
        finally:
            assert context.deadline is not None
            stopped.append((context.deadline, time.monotonic()))
        return 1

    agent = _agent({"nap": _tool(nap, timeout=0.05)}, [_call("nap"), _outcomes])
    run = agent.run({})
    assert run.status == "completed", run.errors
    assert [_error_code(outcome) for outcome in run.value] == [TIMED_OUT]
    ((deadline, at),) = stopped
    assert deadline <= at < deadline + WAIT / 2


def test_a_stuck_handler_times_out_but_keeps_its_permit(thread_baseline: int) -> None:
    """The model sees the time-out while the handler runs; the next job waits for its permit."""
    events: list[str] = []
    release = threading.Event()

    def stuck(value: Any, context: Any) -> str:
        release.wait(WAIT)  # ignores the deadline
        time.sleep(0.1)
        events.append("stuck returned")
        return "late value"

    def quick(value: Any, context: Any) -> str:
        events.append("quick ran")
        return "quick"

    def reduce(state: Any, outcomes: Any) -> Any:
        events.append(f"reduced {[_error_code(o) for o in outcomes]}")
        release.set()
        return {"outcomes": [*state["outcomes"], *map(dict, outcomes)]}

    sink = MemoryTraceSink()
    agent = _agent(
        {"stuck": _tool(stuck, timeout=0.05), "quick": _tool(quick)},
        [_call("stuck"), _call("quick", "c2"), _outcomes],
        reduce=reduce,
    )
    run = agent.run({}, context={"tracing": sink})
    assert run.status == "completed", run.errors
    assert events == [f"reduced {[TIMED_OUT]}", "stuck returned", "quick ran", "reduced [None]"]
    first, second = run.value
    assert first["error"]["message"] == "Call timed out after 0.05 s; the call may still complete"
    assert second["value"] == "quick"
    late = [
        record["payload"]["attributes"]
        for record in sink.records
        if record["name"] == "step.attempted"
        and record["payload"]["attributes"].get("agent.late") is True
    ]
    assert [attributes["agent.callId"] for attributes in late] == ["c1"]


def test_the_run_waits_for_a_late_handler(thread_baseline: int) -> None:
    """A run that finishes while a timed-out handler still runs returns only after it."""
    release = threading.Event()
    returned = threading.Event()

    def stuck(value: Any, context: Any) -> str:
        release.wait(WAIT)
        time.sleep(0.2)
        returned.set()
        return "late"

    def finish(state: Any, context: Any) -> Any:
        release.set()
        return {"kind": "finish", "result": [_error_code(o) for o in state["outcomes"]]}

    agent = _agent(
        {"stuck": _tool(stuck, timeout=0.05)},
        [_call("stuck"), finish],
        limits={"max_concurrency": 2},
    )
    run = agent.run({})
    assert run.status == "completed", run.errors
    assert run.value == [TIMED_OUT]
    assert returned.is_set()


def test_a_pipeline_tool_times_out(thread_baseline: int) -> None:
    """An ordinary pipeline tool's run is bounded by its timeout too."""
    release = threading.Event()

    def slow(inputs: Any, context: Any) -> int:
        release.wait(WAIT)
        return 1

    child = tubeless.define_pipeline(
        id="slow", steps=[step := tubeless.create_steps().step("s", run=slow)], finalize=step
    )

    def finish(state: Any, context: Any) -> Any:
        release.set()
        return {"kind": "finish", "result": [_error_code(o) for o in state["outcomes"]]}

    tool = pipeline_tool(child, description="slow", input_json_schema=ANY, timeout=0.05)
    # Two permits: the late run keeps one while the next decision takes the other.
    agent = _agent({"slow": tool}, [_call("slow"), finish], limits={"max_concurrency": 2})
    run = agent.run({})
    assert run.value == [TIMED_OUT], run.errors


# -- retries ----------------------------------------------------------------------------


class Flaky:
    """A handler that fails with `code` on its first `failures` attempts."""

    def __init__(self, failures: int, code: str = "BUSY") -> None:
        self.failures = failures
        self.code = code
        self.seen: list[Any] = []

    def __call__(self, value: Any, context: ToolContext) -> str:
        self.seen.append(context.execution)
        if len(self.seen) <= self.failures:
            raise ToolError(self.code, f"attempt {len(self.seen)}")
        return f"ok after {len(self.seen)}"


def test_a_listed_code_is_retried_with_the_same_ids(thread_baseline: int) -> None:
    """Failed attempts run again, each a traced step attempt, none charged to `max_calls`."""
    flaky = Flaky(2)
    sink = MemoryTraceSink()
    tool = _tool(flaky, replay="safe", retry=Retry(attempts=3, backoff=0.01, codes=("BUSY",)))
    agent = _agent({"flaky": tool}, [_call("flaky"), _outcomes], limits={"max_calls": 1})
    run = agent.run({}, context={"tracing": sink})
    assert run.status == "completed", run.errors
    assert run.value[0]["value"] == "ok after 3"
    assert len(flaky.seen) == 3 and len(set(flaky.seen)) == 1
    attempts = [
        record["payload"]["attempt"]
        for record in sink.records
        if record["name"] == "step.attempted" and record["pipelineId"] == "deadlines/tool/flaky"
    ]
    assert attempts == [1, 2, 3]


def test_the_last_attempt_gives_the_outcome() -> None:
    """When every attempt fails, the outcome is the last attempt's failure."""
    flaky = Flaky(9)
    tool = _tool(flaky, replay="safe", retry=Retry(attempts=3, backoff=0.001, codes=("BUSY",)))
    run = _agent({"flaky": tool}, [_call("flaky"), _outcomes]).run({})
    assert len(flaky.seen) == 3
    assert run.value[0]["error"] == {"code": "BUSY", "message": "attempt 3"}


def test_an_unlisted_code_is_not_retried() -> None:
    """A `ToolError` whose code is not listed ends the call at once."""
    flaky = Flaky(9, code="NOT_FOUND")
    tool = _tool(flaky, replay="safe", retry=Retry(attempts=3, backoff=0.001, codes=("BUSY",)))
    run = _agent({"flaky": tool}, [_call("flaky"), _outcomes]).run({})
    assert len(flaky.seen) == 1
    assert _error_code(run.value[0]) == "NOT_FOUND"


def test_a_timed_out_attempt_is_retried(thread_baseline: int) -> None:
    """An attempt past its timeout is retried like a listed code; the late one is drained."""
    release = threading.Event()
    attempts: list[int] = []

    def first_hangs(value: Any, context: Any) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            release.wait(WAIT)
            return "late"
        release.set()
        return "second"

    tool = _tool(first_hangs, replay="safe", timeout=0.05, retry=Retry(attempts=2, backoff=0.001))
    # The late first attempt keeps its permit: the second needs another one.
    agent = _agent({"t": tool}, [_call("t"), _outcomes], limits={"max_concurrency": 2})
    run = agent.run({})
    assert run.status == "completed", run.errors
    assert run.value[0]["value"] == "second"
    assert attempts == [1, 2]


def test_cancelling_during_a_pause_starts_nothing_more(thread_baseline: int) -> None:
    """A run cancelled while a call waits to retry ends cancelled after one attempt."""
    signal = threading.Event()
    flaky = Flaky(9)
    timers: list[threading.Timer] = []

    def cancel_soon(value: Any, context: ToolContext) -> str:
        timer = threading.Timer(0.05, signal.set)
        timers.append(timer)
        timer.start()
        return flaky(value, context)

    retry = Retry(attempts=5, backoff=WAIT, max_backoff=WAIT, codes=("BUSY",))
    tool = _tool(cancel_soon, replay="safe", retry=retry)
    run = _agent({"t": tool}, [_call("t"), _outcomes]).run({}, context={"signal": signal})
    for timer in timers:
        timer.join()
    assert run.status == "cancelled"
    assert len(flaky.seen) == 1


# -- the run's time budget --------------------------------------------------------------


def test_max_seconds_ends_the_run_with_a_limit_error(thread_baseline: int) -> None:
    """Calls get the run's remaining time as their deadline; then the next decision fails."""
    calls: list[float | None] = []

    def nap(value: Any, context: ToolContext) -> int:
        calls.append(context.deadline)
        context.sleep(WAIT)
        return 1

    decisions = [_call("nap", f"c{turn}") for turn in range(5)]
    run = _agent({"nap": _tool(nap)}, decisions, limits={"max_seconds": 0.5}).run({})
    assert run.status == "failed"
    error = _limit_error(run)
    assert (error.code, error.limit, error.bound, error.scope) == (
        "TUBELESS_AGENT_LIMIT_REACHED",
        "max_seconds",
        0.5,
        run.run_id,
    )
    assert error.consumed >= 0.5
    assert len(calls) == 1 and calls[0] is not None


def test_max_seconds_bounds_a_subagent_tree(thread_baseline: int) -> None:
    """A subagent's remaining time is its ancestors' least; the root's budget is named."""
    seen: list[dict[str, Any]] = []

    def nap(value: Any, context: ToolContext) -> int:
        context.sleep(WAIT)
        return 1

    def child_reduce(state: Any, outcomes: Any) -> Any:
        seen.extend(map(dict, outcomes))
        return state

    child = _agent(
        {"nap": _tool(nap)},
        [_call("nap"), FINISH],
        agent_id="child",
        reduce=child_reduce,
        limits={"max_seconds": 60},
    )
    parent = _agent(
        {"child": pipeline_tool(child, description="a subagent", input_json_schema=ANY)},
        [_call("child"), FINISH],
        limits={"max_seconds": 0.5},
    )
    run = parent.run({})
    assert run.status == "failed"
    assert [_error_code(outcome) for outcome in seen] == [TIMED_OUT]
    error = _limit_error(run)
    assert (error.limit, error.scope) == ("max_seconds", run.run_id)


# -- durability -------------------------------------------------------------------------


@pytest.mark.parametrize(("replay", "runs_again"), [("safe", True), ("unsafe", False)])
def test_a_journaled_time_out_resumes_like_an_interrupted_call(
    replay: str, runs_again: bool
) -> None:
    """On resume a timed-out safe call runs again; an unsafe one stays timed out."""
    store = MemoryCheckpointStore()
    signal = threading.Event()
    started: list[int] = []

    def nap(value: Any, context: ToolContext) -> str:
        started.append(1)
        if len(started) == 1:
            context.sleep(WAIT)
        return "done"

    def reduce(state: Any, outcomes: Any) -> Any:
        signal.set()  # the process "stops" after the outcome was saved
        return {"outcomes": [*state["outcomes"], *map(dict, outcomes)]}

    durability = Durability(store=store, key="k")
    tool = _tool(nap, timeout=0.05, replay=replay)
    first = _agent({"nap": tool}, [_call("nap"), _outcomes], reduce=reduce, durability=durability)
    assert first.run({}, context={"signal": signal}).status == "cancelled"
    again = _agent({"nap": tool}, [_call("nap"), _outcomes], durability=durability)
    run = again.run({})
    assert run.status == "completed", run.errors
    assert len(started) == (2 if runs_again else 1)
    assert _error_code(run.value[0]) == (None if runs_again else TIMED_OUT)


# -- remote handlers --------------------------------------------------------------------


@pytest.mark.slow
def test_a_remote_handler_gets_the_deadline(thread_baseline: int) -> None:
    """A handler in a spawned process sees the time left, and its `sleep` ends at the deadline."""
    import concurrent.futures
    import multiprocessing
    import pathlib
    import sys

    here = str(pathlib.Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import remote_handlers

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        tools = {
            "left": _tool(remote_handlers.time_left, executor=pool, timeout=WAIT),
            "nap": _tool(remote_handlers.nap_until_deadline, executor=pool, timeout=0.5),
            "free": _tool(remote_handlers.time_left, executor=pool),
        }
        decisions = [_call("left"), _call("nap", "c2"), _call("free", "c3"), _outcomes]
        run = _agent(tools, decisions).run({})
    assert run.status == "completed", run.errors
    left, nap, free = run.value
    assert 0 < left["value"] <= WAIT
    assert _error_code(nap) == TIMED_OUT
    assert free["value"] is None

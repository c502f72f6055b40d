"""The agent tree: shared budgets, one permit queue and one signal per root, one trace tree."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.errors import AgentLimitError
from tubeless.pipeline import PipelineRun, create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, scripted_decide
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, compose_sinks, read_ndjson

TEXT = {"type": "string"}
TASK = {"type": "object", "properties": {"task": {"type": "string"}}}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30
"""Seconds before a test gives up on an event that should have been set (never reached)."""


class Handlers:
    """A tool whose handler records what it saw; `block` makes it wait for a release."""

    def __init__(self, run: Any = None) -> None:
        self._lock = threading.Lock()
        self.seen: list[str] = []
        self.signals: list[threading.Event] = []
        self._run = run
        self.tool = define_tool(
            description="Work", input_schema=TEXT, output_schema=TEXT, run=self._handle
        )

    def _handle(self, value: str, context: Any) -> str:
        with self._lock:
            self.seen.append(value)
            self.signals.append(context.signal)
        if self._run is not None:
            self._run(value, context)
        return value


def _calls(tool: str, *ids: str) -> dict[str, Any]:
    inputs = [{"id": i, "tool": tool, "input": i if tool == "work" else {}} for i in ids]
    return {"kind": "continue", "calls": inputs}


def _agent(agent_id: str, tools: dict[str, Any], script: list[Any], **limits: Any) -> Any:
    return define_agent(
        id=agent_id,
        input_schema=TASK,
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(script),
        tools=tools,
        limits=limits or None,
    )


def _sub(agent: Any) -> Any:
    return pipeline_tool(agent, description=f"Delegate to {agent.id}")


def _limit_error(run: PipelineRun) -> AgentLimitError:
    error: BaseException | None = run.first_exception()
    while error is not None and not isinstance(error, AgentLimitError):
        error = error.__cause__
    assert isinstance(error, AgentLimitError), run.errors
    return error


def test_a_parent_budget_of_three_refuses_the_childs_fourth_call() -> None:
    """Delegation is call 1, the child's batch calls 2 and 3; call 4 is refused unrun."""
    work = Handlers()
    child = _agent("child", {"work": work.tool}, [_calls("work", "a", "b"), _calls("work", "c")])
    parent = _agent("parent", {"child": _sub(child)}, [_calls("child", "k"), FINISH], max_calls=3)

    run = parent.run({})

    assert run.status == "failed"
    assert work.seen == ["a", "b"]
    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_calls=3 exceeded (consumed=3, requested=1, scope={run.run_id})"
    )
    assert (error.code, error.scope) == ("TUBELESS_AGENT_LIMIT_REACHED", run.run_id)


def test_decisions_count_across_the_tree() -> None:
    """The child's decisions are charged to the parent's `max_decisions` too."""
    child = _agent("child", {}, [FINISH])
    parent = _agent(
        "parent", {"child": _sub(child)}, [_calls("child", "k"), FINISH], max_decisions=2
    )

    run = parent.run({})

    error = _limit_error(run)
    assert (error.limit, error.consumed, error.requested, error.scope) == (
        "max_decisions",
        2,
        1,
        run.run_id,
    )


@pytest.mark.parametrize("attempt", range(30))
def test_siblings_admitted_together_never_overspend(attempt: int) -> None:
    """Two children admit batches at the same instant; only one fits the shared budget."""
    barrier = threading.Barrier(2, timeout=WAIT)
    work = Handlers()

    def decide_together(state: Any, context: Any) -> Any:
        barrier.wait()
        return _calls("work", f"{context.run_id}-1", f"{context.run_id}-2")

    child = _agent("child", {"work": work.tool}, [decide_together, FINISH])
    parent = _agent(
        "parent",
        {"child": _sub(child)},
        [_calls("child", "x", "y"), FINISH],
        max_calls=4,
        max_concurrency=2,
    )

    run = parent.run({})

    assert run.status == "failed"
    assert len(work.seen) == 2
    error = _limit_error(run)
    assert (error.limit, error.consumed, error.requested, error.scope) == (
        "max_calls",
        4,
        2,
        run.run_id,
    )


def _three_levels(max_depth: int) -> tuple[Any, Handlers]:
    work = Handlers()
    leaf = _agent("leaf", {"work": work.tool}, [_calls("work", "w"), FINISH])
    middle = _agent("middle", {"leaf": _sub(leaf)}, [_calls("leaf", "l"), FINISH])
    root = _agent(
        "root", {"middle": _sub(middle)}, [_calls("middle", "m"), FINISH], max_depth=max_depth
    )
    return root, work


def test_depth_zero_rejects_pipeline_tools_before_dispatch() -> None:
    """`max_depth=0` refuses the root's delegation: nothing below it runs."""
    root, work = _three_levels(0)

    run = root.run({})

    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_depth=0 exceeded (consumed=0, requested=1, scope={run.run_id})"
    )
    assert work.seen == []


def test_depth_one_allows_the_middle_but_not_the_leaf() -> None:
    """`max_depth=1` at the root refuses the middle agent's delegation, naming the root."""
    root, work = _three_levels(1)

    run = root.run({})

    error = _limit_error(run)
    assert (error.limit, error.consumed, error.scope) == ("max_depth", 1, run.run_id)
    assert work.seen == []


def test_depth_two_reaches_the_leaf() -> None:
    """`max_depth=2` at the root lets root -> middle -> leaf complete."""
    root, work = _three_levels(2)

    assert root.run({}).status == "completed"
    assert work.seen == ["w"]


def _child_run_id(run: PipelineRun, error: AgentLimitError) -> str:
    assert error.scope != run.run_id
    assert error.scope.startswith("child:")
    return error.scope


def test_a_childs_tighter_call_bound_applies_and_names_the_child() -> None:
    """A child's own `max_calls=1` refuses its batch of 2 though the parent has room."""
    work = Handlers()
    child = _agent("child", {"work": work.tool}, [_calls("work", "a", "b")], max_calls=1)
    parent = _agent("parent", {"child": _sub(child)}, [_calls("child", "k"), FINISH])

    run = parent.run({})

    error = _limit_error(run)
    _child_run_id(run, error)
    assert (error.limit, error.bound, error.consumed, error.requested) == ("max_calls", 1, 0, 2)
    assert work.seen == []


def test_a_childs_tighter_depth_bound_applies_to_its_subtree() -> None:
    """A middle agent with `max_depth=0` may not delegate, though the root allows 4."""
    work = Handlers()
    leaf = _agent("leaf", {"work": work.tool}, [FINISH])
    middle = _agent("child", {"leaf": _sub(leaf)}, [_calls("leaf", "l")], max_depth=0)
    root = _agent("root", {"middle": _sub(middle)}, [_calls("middle", "m"), FINISH])

    run = root.run({})

    error = _limit_error(run)
    _child_run_id(run, error)
    assert (error.limit, error.bound) == ("max_depth", 0)


def test_max_turns_stays_local() -> None:
    """A child's turns do not count against the parent's `max_turns`."""
    work = Handlers()
    child = _agent("child", {"work": work.tool}, [_calls("work", "a"), _calls("work", "b"), FINISH])
    parent = _agent("parent", {"child": _sub(child)}, [_calls("child", "k"), FINISH], max_turns=2)

    assert parent.run({}).status == "completed"
    assert work.seen == ["a", "b"]


def test_nesting_three_levels_at_concurrency_one_completes(thread_baseline: int) -> None:
    """Root, middle and leaf all at `max_concurrency=1`: waiting calls hold no permit."""
    work = Handlers()
    leaf = _agent("leaf", {"work": work.tool}, [_calls("work", "w1", "w2"), FINISH])
    middle = _agent(
        "middle", {"leaf": _sub(leaf), "work": work.tool}, [_calls("leaf", "l"), FINISH]
    )
    root = _agent("root", {"middle": _sub(middle)}, [_calls("middle", "m1", "m2"), FINISH])

    run = root.run({})

    assert run.status == "completed", run.errors
    assert work.seen == ["w1", "w2", "w1", "w2"]


def test_two_concurrent_roots_keep_separate_counters(thread_baseline: int) -> None:
    """Two invocations of one agent, started together, each spend their own budget."""
    barrier = threading.Barrier(2, timeout=WAIT)
    work = Handlers(lambda value, context: barrier.wait())
    child = _agent("child", {"work": work.tool}, [_calls("work", "a", "b"), FINISH])
    parent = _agent("parent", {"child": _sub(child)}, [_calls("child", "k"), FINISH], max_calls=3)
    runs: list[PipelineRun] = []

    threads = [threading.Thread(target=lambda: runs.append(parent.run({}))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)

    assert [run.status for run in runs] == ["completed", "completed"]
    assert len(work.seen) == 4


def test_a_run_started_by_hand_in_a_handler_is_outside_the_tree() -> None:
    """`child.run(...)` inside a handler has its own budget, not the caller's."""
    work = Handlers()
    child = _agent("child", {"work": work.tool}, [_calls("work", "a", "b", "c"), FINISH])
    runs: list[PipelineRun] = []

    def by_hand(value: str, context: Any) -> str:
        runs.append(child.run({}))
        return value

    manual = define_tool(description="Manual", input_schema=TEXT, output_schema=TEXT, run=by_hand)
    parent = _agent("parent", {"work": manual}, [_calls("work", "x"), FINISH], max_calls=1)

    assert parent.run({}).status == "completed"
    assert runs[0].status == "completed"
    assert runs[0].parent_run_id is None
    assert work.seen == ["a", "b", "c"]


def _work(handler: Any) -> Any:
    return define_tool(description="Work", input_schema=TEXT, output_schema=TEXT, run=handler)


def test_cancelling_the_root_reaches_running_grandchildren(thread_baseline: int) -> None:
    """Running grandchild handlers see the root's own Event; queued ones never start.

    The leaf would run 4 handlers and the middle 3, but the root allows 2 jobs at once.
    """
    signal = threading.Event()
    lock = threading.Lock()
    started: list[str] = []
    seen: list[threading.Event] = []
    both = threading.Barrier(3, timeout=WAIT)

    def block(value: str, context: Any) -> str:
        with lock:
            started.append(value)
            seen.append(context.signal)
        both.wait()
        context.signal.wait(WAIT)
        return value

    leaf = _agent(
        "leaf",
        {"work": _work(block)},
        [_calls("work", "a", "b", "c", "d")],
        max_concurrency=4,
    )
    middle = _agent("middle", {"leaf": _sub(leaf)}, [_calls("leaf", "l")], max_concurrency=3)
    root = _agent("root", {"middle": _sub(middle)}, [_calls("middle", "m")], max_concurrency=2)

    def cancel() -> None:
        both.wait()
        signal.set()

    canceller = threading.Thread(target=cancel)
    canceller.start()
    run = root.run({}, context={"signal": signal})
    canceller.join(WAIT)

    assert run.status == "cancelled"
    assert sorted(started) == ["a", "b"]
    assert len(seen) == 2
    assert all(event is signal for event in seen)


def test_a_fatal_child_failure_drains_its_running_sibling_uncancelled(
    thread_baseline: int,
) -> None:
    """Child A fails while child B's handler runs: B finishes normally, the turn then fails."""
    b_running = threading.Event()
    a_failed = threading.Event()
    finished: list[tuple[str, bool]] = []

    def fail(value: str, context: Any) -> str:
        b_running.wait(WAIT)
        a_failed.set()
        raise RuntimeError("child A broke")

    def slow(value: str, context: Any) -> str:
        b_running.set()
        a_failed.wait(WAIT)
        context.sleep(0.05)
        finished.append((value, context.signal.is_set()))
        return value

    child_a = _agent("a", {"work": _work(fail)}, [_calls("work", "fa"), FINISH])
    child_b = _agent("b", {"work": _work(slow)}, [_calls("work", "sb"), FINISH])
    parent = _agent(
        "parent",
        {"a": _sub(child_a), "b": _sub(child_b)},
        [
            {
                "kind": "continue",
                "calls": [
                    {"id": "ca", "tool": "a", "input": {}},
                    {"id": "cb", "tool": "b", "input": {}},
                ],
            },
            FINISH,
        ],
        max_concurrency=2,
    )

    run = parent.run({})

    assert run.status == "failed"
    assert "child A broke" in repr(run.errors)
    assert finished == [("sb", False)]


def _tree() -> Any:
    def shout(inputs: Any, context: Any) -> str:
        return "HI"

    step = create_steps(TASK).step("shout", run=shout)
    plain = define_pipeline(id="plain", steps=[step], finalize=step)
    work = _work(lambda value, context: value)
    leaf = _agent("leaf", {"work": work}, [_calls("work", "w"), FINISH])
    child = _agent("child", {"leaf": _sub(leaf)}, [_calls("leaf", "l"), FINISH])
    return _agent(
        "root",
        {"child": _sub(child), "plain": pipeline_tool(plain, description="Plain")},
        [
            {
                "kind": "continue",
                "calls": [
                    {"id": "c1", "tool": "child", "input": {}},
                    {"id": "p1", "tool": "plain", "input": {}},
                ],
            },
            FINISH,
        ],
    )


def test_nested_traces_form_one_tree_from_the_records_alone(tmp_path: pathlib.Path) -> None:
    """Every run reaches the root by `parentRunId`; a subagent's run hangs under the turn."""
    memory = MemoryTraceSink()
    ndjson_path = tmp_path / "trace.ndjson"
    ndjson = NdjsonTraceSink(ndjson_path)
    store = SqliteTraceStore(tmp_path / "runs.sqlite")

    run = _tree().run({}, context={"tracing": compose_sinks(memory, ndjson, store)})
    ndjson.close()

    assert run.status == "completed", run.errors
    records = memory.records
    assert read_ndjson(ndjson_path) == records
    assert store.events() == records
    store.close()
    started = {r["runId"]: r for r in records if r["name"] == "pipeline.started"}
    for run_id in started:
        seen = set()
        while started[run_id].get("parentRunId"):
            assert run_id not in seen
            seen.add(run_id)
            run_id = started[run_id]["parentRunId"]
        assert run_id == run.run_id
    child_run = next(r for r in started.values() if r["pipelineId"] == "child")
    parent_turn = started[child_run["parentRunId"]]
    assert parent_turn["pipelineId"] == "root/turn"
    assert child_run["itemKey"] == "c1"
    attempts = [
        r
        for r in records
        if r["name"] == "step.attempted"
        and r["runId"] == child_run["runId"]
        and r["stepId"] == "agent"
    ]
    (attempt,) = attempts
    calls_attempt = next(
        r
        for r in records
        if r["name"] == "step.attempted"
        and r["runId"] == parent_turn["runId"]
        and r["stepId"] == "calls"
    )
    assert attempt["payload"]["attributes"] == {
        "agent.runId": run.run_id,
        "agent.turn": 1,
        "agent.callId": "c1",
        "agent.tool": "child",
        "agent.parentAttemptId": calls_attempt["attemptId"],
    }
    plain_call = next(r for r in started.values() if r["pipelineId"] == "root/tool/plain")
    assert plain_call["itemKey"] == "p1"
    plain_run = next(r for r in started.values() if r["pipelineId"] == "plain")
    assert plain_run["parentRunId"] == plain_call["runId"]
    leaf_run = next(r for r in started.values() if r["pipelineId"] == "leaf")
    assert started[leaf_run["parentRunId"]]["pipelineId"] == "child/turn"


def test_changing_a_child_changes_the_parents_structural_fingerprint() -> None:
    """A child's limits are part of the parent's identity through its capability entry."""

    def parent(child_calls: int) -> Any:
        child = _agent("child", {}, [FINISH], max_calls=child_calls)
        return _agent("parent", {"child": _sub(child)}, [FINISH])

    first, second, same = parent(3), parent(4), parent(3)

    identity = first.definition.identity
    assert identity.structural_fingerprint != second.definition.identity.structural_fingerprint
    assert identity == same.definition.identity


def test_the_plan_shows_the_capability_tree_with_child_limits() -> None:
    """The plan's agent block nests each subagent's limits and own tools."""
    block = _tree().plan().to_dict()["steps"][0]["agent"]

    child = next(c for c in block["capabilities"] if c["name"] == "child")
    assert child["pipeline"] == {"id": "child", "subagent": True}
    assert child["limits"]["maxDepth"] == 4
    (leaf,) = child["capabilities"]
    assert leaf["name"] == "leaf"
    assert [c["name"] for c in leaf["capabilities"]] == ["work"]
    plain = next(c for c in block["capabilities"] if c["name"] == "plain")
    assert plain["pipeline"] == {"id": "plain", "subagent": False}
    assert "limits" not in plain

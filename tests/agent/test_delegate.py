"""Delegation across the tree: one cancellation signal, drains, and one trace tree."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, scripted_decide
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, compose_sinks, read_ndjson

TEXT = {"type": "string"}
TASK = {"type": "object", "properties": {"task": {"type": "string"}}}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30
"""Seconds before a test gives up on an event that should have been set (never reached)."""


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

"""The agent tree of a recorded run, rebuilt from stored records alone."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.errors import ToolError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, scripted_decide
from tubeless.trace import SqliteTraceStore, agent_history, format_agent_history

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}


def _work(value: str, context: Any) -> str:
    if value == "missing":
        raise ToolError("NOT_FOUND", "No such word")
    return value


WORK = define_tool(description="Work", input_schema=TEXT, output_schema=TEXT, run=_work)


def _agent(agent_id: str, tools: dict[str, Any], script: list[Any], **limits: Any) -> Any:
    return define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(script),
        tools=tools,
        limits=limits or None,
    )


def _calls(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {
        "kind": "continue",
        "calls": [{"id": i, "tool": tool, "input": value} for i, tool, value in calls],
    }


def _planner(child_script: list[Any], **limits: Any) -> Any:
    step = create_steps({"type": "object"}).step("only", run=lambda inputs, context: "x")
    plain = define_pipeline(id="plain", steps=[step], finalize=step)
    child = _agent("child", {"work": WORK}, child_script)
    return _agent(
        "planner",
        {
            "ask": pipeline_tool(child, description="Ask"),
            "plain": pipeline_tool(plain, description="Plain"),
        },
        [_calls(("c1", "ask", {}), ("p1", "plain", {})), FINISH],
        **limits,
    )


def _stored(tmp_path: pathlib.Path, agent: Any, **context: Any) -> tuple[Any, list[Any]]:
    with SqliteTraceStore(tmp_path / "runs.sqlite") as store:
        run = agent.run({}, context={"tracing": store, **context})
        return run, store.events()


def test_the_tree_has_agents_turns_calls_and_subagents(tmp_path: pathlib.Path) -> None:
    """Calls carry tool, status, ToolError code and child agents; children their parent call."""
    run, records = _stored(
        tmp_path, _planner([_calls(("w1", "work", "missing"), ("w2", "work", "ok")), FINISH])
    )

    history = agent_history(records, run.run_id)

    assert history is not None
    planner, child = history.agents
    assert (planner.pipeline_id, planner.ended, child.pipeline_id, child.ended) == (
        "planner",
        "finished",
        "child",
        "finished",
    )
    first = planner.turns[0]
    ask, plain = first.calls
    assert (ask.id, ask.tool, ask.status, ask.child_agent_run_ids) == (
        "c1",
        "ask",
        "completed",
        (child.run_id,),
    )
    assert (plain.tool, plain.child_agent_run_ids) == ("plain", ())
    assert child.parent_call == {
        "agentRunId": run.run_id,
        "turnRunId": first.run_id,
        "callId": "c1",
        "tool": "ask",
    }
    missing, ok = child.turns[0].calls
    assert (missing.status, missing.tool_error_code, ok.status, ok.tool_error_code) == (
        "failed",
        "NOT_FOUND",
        "completed",
        None,
    )
    assert all(call.duration_ms is not None for call in (missing, ok, ask, plain))
    data = history.to_dict()
    assert data["agents"][0]["turns"][0]["calls"][0]["childAgentRunIds"] == [child.run_id]
    assert data["agents"][1]["parentCall"]["callId"] == "c1"
    text = format_agent_history(history)
    assert text.splitlines()[:4] == [
        f"agent planner  {run.run_id}  finished  {int(planner.duration_ms or 0)}ms",
        "  turn 1  completed",
        f"    call c1  ask  completed  {int(ask.duration_ms or 0)}ms",
        f"      agent child  {child.run_id}  finished  {int(child.duration_ms or 0)}ms",
    ]
    assert "          call w1  work  failed  NOT_FOUND" in text


def test_how_each_agent_ended(tmp_path: pathlib.Path) -> None:
    """A limit hit in the child reads `limit` for both; a plain failure reads `failed`."""
    run, records = _stored(tmp_path, _planner([_calls(("w", "work", "a"))], max_calls=2))

    history = agent_history(records, run.run_id)

    assert history is not None
    assert [agent.ended for agent in history.agents] == ["limit", "limit"]


def test_a_cancelled_tree_reads_cancelled(tmp_path: pathlib.Path) -> None:
    """Cancelling the root shows every agent as cancelled."""
    signal = threading.Event()

    def stop(state: Any, context: Any) -> Any:
        signal.set()
        return FINISH

    run, records = _stored(tmp_path, _planner([stop]), signal=signal)

    history = agent_history(records, run.run_id)

    assert history is not None
    assert {agent.ended for agent in history.agents} == {"cancelled"}


def test_a_run_without_agents_has_no_tree() -> None:
    """A plain pipeline's records give no agent history; an unknown run neither."""
    step = create_steps().step("only", run=lambda inputs, context: 1)
    sink = MemoryTraceSink()
    run = define_pipeline(id="plain", steps=[step]).run({}, context={"tracing": sink})

    assert agent_history(sink.records, run.run_id) is None
    assert agent_history(sink.records, "nope") is None


def test_a_timed_out_call_shows_its_time_out_and_retries_show_once() -> None:
    """A late handler's call reads as timed out; a retried call is one row with its attempts."""
    from tubeless.agent import Retry
    from tubeless.trace import failed_call_counts

    release = threading.Event()
    tries: list[int] = []

    def stuck(value: Any, context: Any) -> str:
        release.wait(30)
        return "late"

    def flaky(value: Any, context: Any) -> str:
        tries.append(1)
        if len(tries) < 2:
            raise ToolError("BUSY", "again")
        return "ok"

    def finish(state: Any, context: Any) -> Any:
        release.set()
        return FINISH

    tools = {
        "stuck": define_tool(
            description="s", input_schema={}, output_schema={}, run=stuck, timeout=0.05
        ),
        "flaky": define_tool(
            description="f",
            input_schema={},
            output_schema={},
            run=flaky,
            replay="safe",
            retry=Retry(attempts=3, backoff=0.001, codes=("BUSY",)),
        ),
    }
    script = [_calls(("c1", "stuck", {}), ("c2", "flaky", {})), finish]
    sink = MemoryTraceSink()
    run = _agent("h", tools, script, max_concurrency=2).run({}, context={"tracing": sink})
    history = agent_history(sink.records, run.run_id)
    assert history is not None
    # Calls are listed in start order, which two concurrent calls do not fix: look them up.
    calls = {call.id: call for call in history.agents[0].turns[0].calls}
    c1, c2 = calls["c1"], calls["c2"]
    assert (c1.status, c1.tool_error_code, c1.attempts) == (
        "failed",
        "TUBELESS_AGENT_CALL_TIMED_OUT",
        1,
    )
    assert (c2.status, c2.attempts, c2.to_dict()["attempts"]) == ("completed", 2, 2)
    assert "c2  flaky  completed  2 attempts" in format_agent_history(history)
    assert failed_call_counts(sink.records) == {run.run_id: 1}

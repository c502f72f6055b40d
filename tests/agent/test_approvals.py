"""Human approval of tool calls: a batch waits between admission and dispatch.

Every test keeps its journal in a real SQLite checkpoint file. A handler that runs
records its call id, so "nothing started" and "nothing ran twice" are counted, not
assumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import tubeless
from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool, pipeline_tool
from tubeless._frozen import thaw
from tubeless.agent import AgentTool, PendingApproval
from tubeless.errors import AgentDefinitionError, AgentError
from tubeless.pipeline import Pipeline, PipelineRun
from tubeless.testing import scripted_decide

KEY = "job-1"
ROOT = Path(__file__).resolve().parents[2]
THREE_CALLS = {
    "kind": "continue",
    "calls": [
        {"id": "a", "tool": "add", "input": {"x": 1}},
        {"id": "b", "tool": "send", "input": {"x": 2}},
        {"id": "c", "tool": "add", "input": {"x": 3}},
    ],
}
X_INPUT = {
    "type": "object",
    "properties": {"x": {"type": "integer", "minimum": 0}},
    "required": ["x"],
    "additionalProperties": False,
}


class Ran:
    """The call ids (and inputs) of every handler that ran, across runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, int]] = []

    def handler(self, value: Any, context: Any) -> int:
        with self.lock:
            self.calls.append((context.execution.call, value["x"]))
        return int(value["x"])

    def tool(self, needs_approval: Any = False) -> AgentTool:
        return define_tool(
            description="Use x",
            input_schema=X_INPUT,
            output_schema={"type": "integer"},
            run=self.handler,
            needs_approval=needs_approval,
        )


def _reduce(state: Any, outcomes: Any) -> dict[str, Any]:
    seen = [
        o["value"] if o["ok"] else f"{o['error']['code']}: {o['error']['message']}"
        for o in outcomes
    ]
    return {"seen": [*state["seen"], *seen]}


def _finish(state: Any, context: Any) -> dict[str, Any]:
    return {"kind": "finish", "result": {"seen": list(state["seen"])}}


def build(
    store: SqliteCheckpointStore,
    ran: Ran,
    *,
    decisions: list[Any] | None = None,
    tools: dict[str, AgentTool] | None = None,
    agent_id: str = "approving",
    concurrency: int = 2,
) -> Pipeline:
    return define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": []},
        decide=scripted_decide(decisions if decisions is not None else [THREE_CALLS, _finish]),
        reduce=_reduce,
        tools=tools or {"add": ran.tool(), "send": ran.tool(needs_approval=True)},
        limits={"max_concurrency": concurrency},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


@pytest.fixture
def store(tmp_path: Path) -> SqliteCheckpointStore:
    return SqliteCheckpointStore(tmp_path / "checkpoints.db")


def codes(run: PipelineRun) -> list[str]:
    """Every code in the first error's chain (the run's, then its causes')."""
    found: list[str] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        found += [link[key] for key in ("code", "sourceCode") if isinstance(link.get(key), str)]
        link = link.get("cause")
    return found


def waits(agent: Pipeline, context: dict[str, Any] | None = None) -> PipelineRun:
    run = agent.run({}, context=context)
    assert run.status == "failed"
    assert "TUBELESS_AGENT_APPROVAL_REQUIRED" in codes(run)
    return run


# -- definitions ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 1, "yes"])
def test_needs_approval_is_a_bool_or_a_predicate(value: Any) -> None:
    with pytest.raises(AgentDefinitionError, match="needs_approval"):
        Ran().tool(needs_approval=value)
    child = define_agent(
        id="c",
        input_schema={"type": "object"},
        result_schema={},
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": 1},
    )
    with pytest.raises(AgentDefinitionError, match="needs_approval"):
        pipeline_tool(child, description="d", needs_approval=value)


def test_an_agent_with_approval_tools_must_be_durable() -> None:
    with pytest.raises(AgentDefinitionError, match="needs a durable agent") as raised:
        define_agent(
            id="loose",
            input_schema={"type": "object"},
            result_schema={},
            initial_state=lambda options: {},
            decide=lambda state, context: {"kind": "finish", "result": 1},
            tools={"send": Ran().tool(needs_approval=True)},
        )
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


def test_a_subagent_with_approval_tools_needs_a_durable_caller(
    store: SqliteCheckpointStore,
) -> None:
    child = build(store, Ran(), agent_id="child")
    with pytest.raises(AgentDefinitionError, match="tool research has calls that need approval"):
        define_agent(
            id="parent",
            input_schema={"type": "object"},
            result_schema={},
            initial_state=lambda options: {},
            decide=lambda state, context: {"kind": "finish", "result": 1},
            tools={"research": pipeline_tool(child, description="Research")},
        )


# -- a batch of three calls, one needing approval ---------------------------------------


def test_nothing_of_the_batch_starts_before_the_decision(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    agent = build(store, ran)
    run = waits(agent)
    assert ran.calls == []
    expected = PendingApproval(
        call_id="b",
        tool="send",
        input={"x": 2},
        turn=1,
        agent_run_id=run.pending_approvals[0].agent_run_id,
        agent="approving",
    )
    assert run.pending_approvals == (expected,)
    assert expected.agent_run_id.startswith("approving:")
    assert store.pending_approvals(KEY) == (expected,)
    assert expected.to_dict() == {
        "callId": "b",
        "tool": "send",
        "input": {"x": 2},
        "turn": 1,
        "agentRunId": expected.agent_run_id,
        "agent": "approving",
    }
    # The execution stays resumable: no terminal failure is saved.
    document = json.loads(store.read(KEY) or "")
    assert "failure" not in document["agent"]


def test_a_resume_without_decisions_waits_again_and_runs_nothing(
    store: SqliteCheckpointStore,
) -> None:
    ran = Ran()
    agent = build(store, ran)
    first = waits(agent)
    again = waits(agent)
    assert ran.calls == []
    assert [p.call_id for p in again.pending_approvals] == ["b"]
    assert again.pending_approvals[0].agent_run_id != first.pending_approvals[0].agent_run_id
    assert store.pending_approvals(KEY)[0].agent_run_id == again.run_id


def test_approve_runs_the_whole_batch_once(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    agent = build(store, ran)
    waits(agent)
    run = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert run.status == "completed", run.errors
    assert run.value == {"seen": [1, 2, 3]}
    assert sorted(ran.calls) == [("a", 1), ("b", 2), ("c", 3)]
    assert run.pending_approvals == ()
    assert store.pending_approvals(KEY) == ()
    # A finished execution returns its result; the same decisions again change nothing.
    again = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert again.value == run.value
    assert len(ran.calls) == 3


def test_reject_becomes_a_recoverable_outcome(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    agent = build(store, ran)
    waits(agent)
    run = agent.run({}, context={"approvals": {"b": tubeless.reject("not to that address")}})
    assert run.status == "completed", run.errors
    assert run.value == {"seen": [1, "TUBELESS_AGENT_CALL_REJECTED: not to that address", 3]}
    assert sorted(ran.calls) == [("a", 1), ("c", 3)]


def test_edit_runs_the_call_with_its_new_validated_input(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    agent = build(store, ran)
    waits(agent)
    run = agent.run({}, context={"approvals": {"b": tubeless.edit({"x": 20})}})
    assert run.status == "completed", run.errors
    assert run.value == {"seen": [1, 20, 3]}
    assert sorted(ran.calls) == [("a", 1), ("b", 20), ("c", 3)]
    entry = json.loads(store.read(KEY) or "")
    assert entry["agent"]["turn"]["calls"] == []  # the finish turn holds no calls


def test_a_bad_edit_dispatches_nothing_and_stays_resumable(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    agent = build(store, ran)
    waits(agent)
    for bad in ({"x": -1}, {"y": 1}, {"x": float("nan")}):
        run = agent.run({}, context={"approvals": {"b": tubeless.edit(bad)}})
        assert run.status == "failed"
        assert "TUBELESS_AGENT_APPROVAL_INVALID_EDIT" in codes(run)
    assert ran.calls == []
    assert [p.call_id for p in store.pending_approvals(KEY)] == ["b"]
    run = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert run.status == "completed"
    assert len(ran.calls) == 3


def test_a_predicate_sees_the_validated_input_and_the_decision_context(
    store: SqliteCheckpointStore,
) -> None:
    ran = Ran()
    seen: list[tuple[Any, int]] = []

    def big(value: Any, context: Any) -> bool:
        seen.append((value, context.turn))
        return bool(value["x"] >= 2)

    tools = {"add": ran.tool(), "send": ran.tool(needs_approval=big)}
    agent = build(store, ran, tools=tools)
    run = waits(agent)
    assert seen == [({"x": 2}, 1)]
    assert [p.call_id for p in run.pending_approvals] == ["b"]
    run = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert run.status == "completed"
    assert seen == [({"x": 2}, 1)]  # the saved batch is not prepared again


def test_a_predicate_must_return_a_bool(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    tools = {"add": ran.tool(), "send": ran.tool(needs_approval=lambda value, context: 1)}
    run = build(store, ran, tools=tools).run({})
    assert "TUBELESS_AGENT_APPROVAL_INVALID" in codes(run)
    assert ran.calls == []


# -- decisions that do not fit ----------------------------------------------------------


@pytest.mark.parametrize(
    ("approvals", "code"),
    [
        ({"nope": tubeless.approve()}, "TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL"),
        ({"b": tubeless.approve(), "a": tubeless.approve()}, "TUBELESS_AGENT_APPROVAL_NOT_NEEDED"),
        ({"b": "yes"}, "TUBELESS_AGENT_APPROVAL_INVALID"),
    ],
)
def test_decisions_that_do_not_fit_dispatch_nothing(
    store: SqliteCheckpointStore, approvals: dict[str, Any], code: str
) -> None:
    ran = Ran()
    agent = build(store, ran)
    waits(agent)
    run = agent.run({}, context={"approvals": approvals})
    assert run.status == "failed"
    assert code in codes(run)
    assert ran.calls == []
    assert [p.call_id for p in store.pending_approvals(KEY)] == ["b"]


def test_a_missing_decision_dispatches_nothing(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    two = {
        "kind": "continue",
        "calls": [
            {"id": "a", "tool": "send", "input": {"x": 1}},
            {"id": "b", "tool": "send", "input": {"x": 2}},
        ],
    }
    agent = build(store, ran, decisions=[two, _finish])
    assert [p.call_id for p in waits(agent).pending_approvals] == ["a", "b"]
    run = agent.run({}, context={"approvals": {"a": tubeless.approve()}})
    assert "TUBELESS_AGENT_APPROVAL_MISSING" in codes(run)
    assert ran.calls == []
    run = agent.run(
        {}, context={"approvals": {"a": tubeless.approve(), "b": tubeless.reject("no")}}
    )
    assert run.value == {"seen": [1, "TUBELESS_AGENT_CALL_REJECTED: no"]}


@pytest.mark.parametrize("message", ["", "  ", "x" * 4097, 3])
def test_reject_needs_a_message(message: Any) -> None:
    with pytest.raises(AgentError) as raised:
        tubeless.reject(message)
    assert raised.value.code == "TUBELESS_AGENT_APPROVAL_INVALID"


def test_the_context_approvals_must_be_a_mapping(store: SqliteCheckpointStore) -> None:
    with pytest.raises(TypeError, match="approvals must be a mapping"):
        build(store, Ran()).run({}, context={"approvals": ["b"]})


# -- subagents --------------------------------------------------------------------------


def test_a_subagents_waiting_call_surfaces_on_the_root_and_is_approved_there(
    store: SqliteCheckpointStore,
) -> None:
    ran = Ran()
    child = build(store, ran, agent_id="child")
    delegate = {
        "kind": "continue",
        "calls": [
            {"id": "r1", "tool": "research", "input": {}},
            {"id": "n", "tool": "add", "input": {"x": 7}},
        ],
    }
    root = build(
        store,
        ran,
        agent_id="root",
        decisions=[delegate, _finish],
        tools={"research": pipeline_tool(child, description="Research"), "add": ran.tool()},
        concurrency=1,
    )
    run = waits(root)
    assert ran.calls == []
    (pending,) = run.pending_approvals
    assert (pending.call_id, pending.tool, pending.agent, pending.turn) == (
        "b",
        "send",
        "root/1/r1",
        1,
    )
    assert pending.agent_run_id.startswith("child:")
    assert store.pending_approvals(KEY) == run.pending_approvals
    run = root.run({}, context={"approvals": {"b": tubeless.edit({"x": 5})}})
    assert run.status == "completed", run.errors
    assert thaw(run.value) == {"seen": [{"seen": [1, 5, 3]}, 7]}
    assert sorted(ran.calls) == [("a", 1), ("b", 5), ("c", 3), ("n", 7)]


# -- a real process killed while it waits -----------------------------------------------

_WAITER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[2])
    from test_approvals import Ran, build
    from tubeless import SqliteCheckpointStore
    run = build(SqliteCheckpointStore(sys.argv[1]), Ran()).run({})
    print(json.dumps([p.to_dict() for p in run.pending_approvals]), flush=True)
    time.sleep(120)  # a host waiting for a person, until it is killed
    """
)


def test_a_process_killed_while_waiting_resumes_into_the_same_pending_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.db"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", _WAITER, str(path), str(Path(__file__).parent)],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = json.loads(process.stdout.readline())
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    assert [p["callId"] for p in printed] == ["b"]
    store = SqliteCheckpointStore(path)
    assert [p.to_dict() for p in store.pending_approvals(KEY)] == printed
    ran = Ran()
    agent = build(store, ran)
    again = waits(agent)  # the killed process's lease died with it
    assert [p.call_id for p in again.pending_approvals] == ["b"]
    assert ran.calls == []
    run = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert run.status == "completed"
    assert sorted(ran.calls) == [("a", 1), ("b", 2), ("c", 3)]


def test_a_pipeline_tool_call_can_wait_and_be_edited(store: SqliteCheckpointStore) -> None:
    ran = Ran()
    steps = tubeless.create_steps(X_INPUT)
    double = steps.step("double", run=lambda inputs, context: context.options["x"] * 2)
    child = tubeless.define_pipeline(id="double", steps=[double], finalize=double)
    call = {"kind": "continue", "calls": [{"id": "d", "tool": "double", "input": {"x": 4}}]}
    tools = {"double": pipeline_tool(child, description="Double x", needs_approval=True)}
    agent = build(store, ran, decisions=[call, _finish], tools=tools)
    assert [(p.call_id, p.input) for p in waits(agent).pending_approvals] == [("d", {"x": 4})]
    bad = agent.run({}, context={"approvals": {"d": tubeless.edit({"x": "four"})}})
    assert "TUBELESS_AGENT_APPROVAL_INVALID_EDIT" in codes(bad)
    run = agent.run({}, context={"approvals": {"d": tubeless.edit({"x": 5})}})
    assert run.value == {"seen": [10]}


def test_a_checkpoint_that_is_not_one_is_refused() -> None:
    assert tubeless.agent.checkpoint_pending_approvals(None) == ()
    for text in ("{", "[]", '{"format": "other"}'):
        with pytest.raises(AgentError) as raised:
            tubeless.agent.checkpoint_pending_approvals(text)
        assert raised.value.code == "TUBELESS_AGENT_CHECKPOINT_INVALID"


def test_the_cli_exit_code_of_a_waiting_run_is_8(store: SqliteCheckpointStore) -> None:
    from tubeless.cli._exit import ExitCode, exit_code_for
    from tubeless.errors import PipelineExecutionError

    run = waits(build(store, Ran()))
    assert exit_code_for(PipelineExecutionError(run)) == ExitCode.APPROVAL == 8


def test_history_shows_a_waiting_agent_and_a_rejected_call(store: SqliteCheckpointStore) -> None:
    from tubeless.testing import MemoryTraceSink
    from tubeless.trace import agent_history

    agent = build(store, Ran())
    sink = MemoryTraceSink()
    waiting = waits(agent, {"tracing": sink})
    decided = agent.run({}, context={"tracing": sink, "approvals": {"b": tubeless.reject("no")}})
    records = sink.records
    (first,) = agent_history(records, waiting.run_id).agents
    assert first.ended == "waiting"
    (second,) = agent_history(records, decided.run_id).agents
    calls = {call.id: call for call in second.turns[0].calls}
    assert calls["b"].replay == "rejected"
    assert calls["a"].replay is None


def test_a_call_id_waiting_in_two_subagents_cannot_be_decided_by_id() -> None:
    from tubeless.agent._approvals import check_against
    from tubeless.agent._journal_document import Checkpoint

    def node(agent: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "agent": agent,
            "spent": {"calls": len(calls), "decisions": 1},
            "turn": {"index": 1, "phase": "decided", "calls": calls},
        }

    def waiting_call(call_id: str) -> dict[str, Any]:
        approval = {"agentRunId": "r"}
        return {
            "id": call_id,
            "tool": "send",
            "input": {},
            "status": "pending",
            "approval": approval,
        }

    children = [
        {"id": name, "tool": "research", "input": {}, "status": "running", "child": child}
        for name, child in (
            ("r1", node("child", [waiting_call("b")])),
            ("r2", node("child", [waiting_call("b")])),
        )
    ]
    document = Checkpoint.from_dict(
        {
            "format": "tubeless.agent-checkpoint",
            "version": 1,
            "id": "e",
            "agent": node("root", children),
        }
    )
    with pytest.raises(AgentError, match="waits in several agents") as raised:
        check_against(document, {"b": tubeless.approve()})
    assert raised.value.code == "TUBELESS_AGENT_APPROVAL_INVALID"


def test_run_or_raise_on_a_waiting_run_raises_a_waiting_error(
    store: SqliteCheckpointStore,
) -> None:
    """A waiting run is `waiting` in Python and `run_or_raise` raises `PipelineWaitingError`."""
    from tubeless.errors import PipelineExecutionError, PipelineWaitingError

    agent = build(store, Ran())
    run = waits(agent)
    assert run.waiting
    assert run.to_dict()["status"] == "failed"  # the reference's wire form
    with pytest.raises(PipelineWaitingError) as raised:
        agent.run_or_raise({})
    error = raised.value
    assert isinstance(error, PipelineExecutionError)
    assert error.code == "TUBELESS_AGENT_APPROVAL_REQUIRED"
    assert [call.call_id for call in error.pending_approvals] == ["b"]
    assert str(error) == "Pipeline approving is waiting for approval of 1 call(s): b (send)"
    assert error.result.waiting
    done = agent.run({}, context={"approvals": {"b": tubeless.approve()}})
    assert done.status == "completed"
    assert not done.waiting

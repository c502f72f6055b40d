"""Durable agents: the journal, the restart table, and what a resume may and may not repeat.

A `MemoryCheckpointStore(fail_after=N)` stands in for a process that died right after its
N-th durable write: the write N+1 fails, the run stops, and the next run (with writes
allowed again) reads only what was really saved.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from tubeless import Durability, define_agent, define_tool, pipeline_tool
from tubeless.agent import AgentTool, ExecutionIds
from tubeless.agent._journal_writer import Journal
from tubeless.errors import AgentDefinitionError, AgentError
from tubeless.pipeline import Pipeline, RunControls
from tubeless.schema import validator
from tubeless.testing import MemoryCheckpointStore, MemoryTraceSink, scripted_decide

KEY = "job-1"
TWO_CALLS = {
    "kind": "continue",
    "calls": [
        {"id": "a", "tool": "add", "input": {"x": 1}},
        {"id": "b", "tool": "add", "input": {"x": 2}},
    ],
}


class Tools:
    """Counts what handlers and transforms did, across runs."""

    def __init__(self, replay: str = "unsafe") -> None:
        self.lock = threading.Lock()
        self.ran: list[tuple[int, ExecutionIds | None]] = []
        self.transforms = 0
        self.replay = replay

    def add(self, value: Any, context: Any) -> int:
        with self.lock:
            self.ran.append((value["x"], context.execution))
        return int(value["x"])

    def counted(self, value: Any) -> Any:
        with self.lock:
            self.transforms += 1
        return value

    def tool(self) -> AgentTool:
        return define_tool(
            description="Add x",
            input_schema=validator(self.counted, json_schema={"type": "object"}),
            output_schema={"type": "integer"},
            run=self.add,
            replay=self.replay,  # type: ignore[arg-type]
        )


def _sum(state: Any, outcomes: Any) -> dict[str, Any]:
    seen = [outcome["value"] if outcome["ok"] else outcome["error"]["code"] for outcome in outcomes]
    return {"n": state["n"] + sum(x for x in seen if isinstance(x, int)), "seen": [*seen]}


def _finish(state: Any, context: Any) -> dict[str, Any]:
    return {"kind": "finish", "result": {"n": state["n"], "seen": list(state["seen"])}}


def build(
    store: MemoryCheckpointStore,
    tools: Tools,
    *,
    decisions: list[Any] | None = None,
    version: str = "1",
    limits: dict[str, int] | None = None,
    key: Any = KEY,
    tool_map: dict[str, AgentTool] | None = None,
) -> tuple[Pipeline, Any]:
    decide = scripted_decide(decisions if decisions is not None else [TWO_CALLS, _finish])
    agent = define_agent(
        id="durable",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0, "seen": []},
        decide=decide,
        reduce=_sum,
        tools=tool_map if tool_map is not None else {"add": tools.tool()},
        limits=limits,
        implementation_version=version,
        durability=Durability(store=store, key=key),
    )
    return agent, decide


def saved(store: MemoryCheckpointStore, key: str = KEY) -> dict[str, Any]:
    text = store.checkpoint(key)
    assert text is not None
    document: dict[str, Any] = json.loads(text)
    return document


def codes(run: Any) -> list[str]:
    """Every code in the first error's chain (the run's, then its causes')."""
    found: list[str] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        found += [link[key] for key in ("code", "sourceCode") if isinstance(link.get(key), str)]
        link = link.get("cause")
    return found


def crash_after(store: MemoryCheckpointStore, writes: int, agent: Pipeline) -> None:
    """Run until write `writes + 1` fails, as if the process died right after `writes`."""
    store.fail_after = writes
    run = agent.run({})
    assert run.status == "failed"
    assert "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED" in codes(run)
    store.fail_after = None


# -- the API ----------------------------------------------------------------------------


def test_a_durable_agent_needs_an_implementation_version() -> None:
    with pytest.raises(AgentDefinitionError, match="implementation_version"):
        define_agent(
            id="a",
            input_schema={"type": "object"},
            result_schema={"type": "object"},
            initial_state=lambda options: {},
            decide=lambda state, context: {"kind": "finish", "result": {}},
            durability=Durability(store=MemoryCheckpointStore(), key="k"),
        )


@pytest.mark.parametrize("key", ["", "   ", "x" * 4097, 7])
def test_a_literal_key_must_be_a_nonblank_bounded_string(key: Any) -> None:
    with pytest.raises(AgentError) as raised:
        Durability(store=MemoryCheckpointStore(), key=key)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY"


def test_a_key_function_gets_the_validated_options_and_is_checked() -> None:
    store = MemoryCheckpointStore()
    agent, _ = build(store, Tools(), key=lambda options: options.get("job", " "))
    assert agent.run({"job": "j7"}).status == "completed"
    assert store.checkpoint("j7") is not None
    run = agent.run({})
    assert "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY" in codes(run)


def test_a_store_must_have_acquire() -> None:
    with pytest.raises(AgentDefinitionError, match="acquire"):
        Durability(store=object(), key="k")  # type: ignore[arg-type]


@pytest.mark.parametrize("replay", ["maybe", None])
def test_define_tool_checks_replay(replay: Any) -> None:
    with pytest.raises(AgentDefinitionError, match="replay must be"):
        define_tool(
            description="d",
            input_schema={"type": "object"},
            output_schema={},
            run=lambda value, context: 1,
            replay=replay,
        )


def test_handlers_see_stable_execution_ids() -> None:
    store = MemoryCheckpointStore()
    tools = Tools()
    agent, _ = build(store, tools)
    assert agent.run({}).status == "completed"
    execution_id = saved(store)["id"]
    assert [ids for _, ids in tools.ran] == [
        ExecutionIds(execution_id, "durable", 1, "a"),
        ExecutionIds(execution_id, "durable", 1, "b"),
    ]


def test_plans_and_dry_runs_never_open_the_store() -> None:
    class Refusing:
        def acquire(self, key: str) -> Any:
            raise AssertionError("storage opened")

    agent = define_agent(
        id="dry",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": {}},
        dry_run=lambda state, context: {"kind": "finish", "result": {}},
        implementation_version="1",
        durability=Durability(store=Refusing(), key="k"),  # type: ignore[arg-type]
    )
    assert agent.plan().ok
    assert agent.run({}, controls=RunControls(dry_run=True)).status == "completed"


# -- what each write saves, and how a resume reads it back ------------------------------
#
# With max_concurrency=1 the writes of TWO_CALLS then finish are: 1 reservation (turn 1),
# 2 decision + admission + intent a (the call that starts at once), 3 outcome a,
# 4 intent b, 5 outcome b, 6 reduced state + reservation (turn 2), 7 finish result.


def test_the_reservation_is_saved_and_not_charged_again() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    agent, decide = build(store, tools)
    crash_after(store, 1, agent)
    node = saved(store)["agent"]
    assert node["turn"] == {"index": 1, "phase": "reserved", "calls": []}
    assert node["spent"] == {"calls": 0, "decisions": 1}
    assert node["execution"]["state"] == {"n": 0, "seen": []}

    run = agent.run({})
    assert run.status == "completed"
    assert [turn for turn, _ in decide.seen] == [1, 1, 2]  # the model is asked again
    assert saved(store)["agent"]["spent"] == {"calls": 2, "decisions": 2}


def test_the_decision_and_its_prepared_inputs_are_saved_and_not_repeated() -> None:
    store, tools = MemoryCheckpointStore(), Tools("safe")
    agent, decide = build(store, tools)
    crash_after(store, 2, agent)
    node = saved(store)["agent"]
    assert node["turn"]["phase"] == "decided"
    assert [(c["id"], c["tool"], c["input"], c["status"]) for c in node["turn"]["calls"]] == [
        ("a", "add", {"x": 1}, "running"),
        ("b", "add", {"x": 2}, "pending"),
    ]
    assert node["spent"] == {"calls": 2, "decisions": 1}
    assert tools.transforms == 2

    run = agent.run({})
    assert run.status == "completed"
    assert [turn for turn, _ in decide.seen] == [1, 2]  # turn 1 is not decided again
    assert tools.transforms == 2  # argument transforms are not repeated
    assert [x for x, _ in tools.ran] == [1, 1, 2]  # a (safe) again, b (pending) once


def test_the_admission_survives_a_restart_at_the_limit() -> None:
    """Budgets are restored: an admitted batch is not charged again, the next one is."""
    store, tools = MemoryCheckpointStore(), Tools("safe")
    again = {"kind": "continue", "calls": [{"id": "c", "tool": "add", "input": {"x": 5}}]}
    agent, _ = build(store, tools, decisions=[TWO_CALLS, again, _finish], limits={"max_calls": 2})
    crash_after(store, 2, agent)
    run = agent.run({})
    assert run.status == "failed"
    assert "TUBELESS_AGENT_LIMIT_REACHED" in codes(run)
    assert "consumed=2, requested=1" in str(run.errors[0].to_dict())
    assert [x for x, _ in tools.ran] == [1, 1, 2]


@pytest.mark.parametrize("replay", ["unsafe", "safe"])
def test_a_running_call_is_interrupted_or_rerun_by_its_replay_mode(replay: str) -> None:
    store, tools = MemoryCheckpointStore(), Tools(replay)
    agent, _ = build(store, tools)
    crash_after(store, 2, agent)
    assert [c["status"] for c in saved(store)["agent"]["turn"]["calls"]] == ["running", "pending"]

    tools.ran.clear()
    run = agent.run({})
    assert run.status == "completed"
    execution_id = saved(store)["id"]
    if replay == "unsafe":
        assert run.value == {"n": 2, "seen": ["TUBELESS_AGENT_CALL_INTERRUPTED", 2]}
        assert [x for x, _ in tools.ran] == [2]
    else:
        assert run.value == {"n": 3, "seen": [1, 2]}
        assert tools.ran[0] == (1, ExecutionIds(execution_id, "durable", 1, "a"))


def test_a_completed_outcome_is_reused_never_dispatched_again() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    agent, _ = build(store, tools)
    crash_after(store, 3, agent)
    entry = saved(store)["agent"]["turn"]["calls"][0]
    assert entry["status"] == "completed"
    assert entry["outcome"] == {"id": "a", "tool": "add", "ok": True, "value": 1}

    run = agent.run({})
    assert run.value == {"n": 3, "seen": [1, 2]}
    assert [x for x, _ in tools.ran] == [1, 2]  # a ran once, in the first process


def test_a_tool_error_outcome_is_reused_as_it_was() -> None:
    store = MemoryCheckpointStore()
    failures: list[int] = []

    def refuse(value: Any, context: Any) -> int:
        from tubeless import ToolError

        failures.append(1)
        raise ToolError("NOPE", "refused")

    tool = define_tool(
        description="Refuse", input_schema={"type": "object"}, output_schema={}, run=refuse
    )
    agent, _ = build(store, Tools(), tool_map={"add": tool})
    crash_after(store, 5, agent)
    run = agent.run({})
    assert run.value == {"n": 0, "seen": ["NOPE", "NOPE"]}
    assert len(failures) == 2


def test_the_reduced_state_is_saved_before_the_next_decision() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    reductions: list[int] = []

    def reduce(state: Any, outcomes: Any) -> Any:
        reductions.append(1)
        return _sum(state, outcomes)

    agent = define_agent(
        id="durable",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0, "seen": []},
        decide=scripted_decide([TWO_CALLS, _finish]),
        reduce=reduce,
        tools={"add": tools.tool()},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )
    crash_after(store, 6, agent)
    node = saved(store)["agent"]
    assert node["execution"] == {
        "state": {"n": 3, "seen": [1, 2]},
        "turn": 2,
        "stateVersion": 1,
        "calls": 2,
    }
    assert node["turn"] == {"index": 2, "phase": "reserved", "calls": []}
    assert node["spent"] == {"calls": 2, "decisions": 2}
    assert agent.run({}).value == {"n": 3, "seen": [1, 2]}
    assert len(reductions) == 1


def test_a_completed_execution_returns_its_saved_result_without_deciding() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    transformed: list[Any] = []

    def result_transform(value: Any) -> Any:
        transformed.append(value)
        return {**value, "checked": True}

    agent = define_agent(
        id="durable",
        input_schema={"type": "object"},
        result_schema=validator(result_transform, json_schema={"type": "object"}),
        initial_state=lambda options: {"n": 0, "seen": []},
        decide=scripted_decide([TWO_CALLS, _finish]),
        reduce=_sum,
        tools={"add": tools.tool()},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )
    first = agent.run({})
    assert saved(store)["agent"]["result"] == {"n": 3, "seen": [1, 2], "checked": True}
    second = agent.run({})
    assert second.value == first.value
    assert len(transformed) == 1  # the finish transform is not repeated


def test_a_terminal_failure_is_raised_again_without_rerunning_the_callback() -> None:
    store = MemoryCheckpointStore()
    attempts: list[int] = []

    def broken(state: Any, context: Any) -> Any:
        attempts.append(1)
        raise ValueError("broken decide")

    agent, _ = build(store, Tools(), decisions=[broken])
    first = agent.run({})
    assert first.status == "failed"
    assert saved(store)["agent"]["failure"]["message"].endswith("broken decide")
    second = agent.run({})
    assert second.status == "failed"
    assert "broken decide" in second.errors[0].message
    assert len(attempts) == 1


def test_a_limit_failure_is_saved_with_its_code() -> None:
    store = MemoryCheckpointStore()
    agent, _ = build(store, Tools(), limits={"max_calls": 1})
    assert "TUBELESS_AGENT_LIMIT_REACHED" in codes(agent.run({}))
    assert saved(store)["agent"]["failure"]["code"] == "TUBELESS_AGENT_LIMIT_REACHED"
    assert "TUBELESS_AGENT_LIMIT_REACHED" in codes(agent.run({}))


def test_a_cancelled_execution_stays_resumable() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    signal = threading.Event()

    def cancel(state: Any, context: Any) -> Any:
        signal.set()
        return TWO_CALLS

    agent, _ = build(store, tools, decisions=[cancel, _finish])
    assert agent.run({}, context={"signal": signal}).status == "cancelled"
    assert "failure" not in saved(store)["agent"]
    resumed, _ = build(store, tools)
    assert resumed.run({}).value == {"n": 3, "seen": [1, 2]}


# -- refusing a checkpoint --------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": "2"}, "definitionId"),
        ({"limits": {"max_turns": 7}}, "definitionId"),  # limits are in the structure too
        ({"replay": "safe"}, "tools"),
        ({"options": {"other": 1}}, "options"),
    ],
)
def test_a_checkpoint_of_another_definition_is_a_mismatch(
    change: dict[str, Any], field: str
) -> None:
    store = MemoryCheckpointStore()
    agent, _ = build(store, Tools())
    crash_after(store, 3, agent)
    before = store.checkpoint(KEY)
    tools = Tools(change.get("replay", "unsafe"))
    other, decide = build(
        store, tools, version=change.get("version", "1"), limits=change.get("limits")
    )
    run = other.run(change.get("options", {}))
    assert "TUBELESS_AGENT_CHECKPOINT_MISMATCH" in codes(run)
    assert field in run.errors[0].message and "new execution key" in run.errors[0].message
    assert decide.seen == [] and tools.ran == []
    assert store.checkpoint(KEY) == before


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"format": "tubeless.agent-checkpoint", "version": 2, "id": "x"}),
        json.dumps({"format": "tubeless.agent-checkpoint", "version": 1, "id": "x", "agent": 3}),
        json.dumps(
            {
                "format": "tubeless.agent-checkpoint",
                "version": 1,
                "id": "x",
                "agent": {"spent": {"calls": -1, "decisions": 0}, "turn": None},
            }
        ),
    ],
)
def test_a_corrupt_or_unknown_checkpoint_fails_before_any_callback(text: str) -> None:
    store = MemoryCheckpointStore()
    store.put(KEY, text)
    started: list[int] = []
    agent = define_agent(
        id="durable",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: started.append(1) or {},
        decide=lambda state, context: {"kind": "finish", "result": {}},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )
    run = agent.run({})
    assert "TUBELESS_AGENT_CHECKPOINT_INVALID" in codes(run)
    assert started == []
    assert store.checkpoint(KEY) == text


def test_a_second_owner_of_the_key_is_busy() -> None:
    store = MemoryCheckpointStore()
    agent, decide = build(store, Tools())
    lease = store.acquire(KEY)
    try:
        run = agent.run({})
        assert "TUBELESS_AGENT_EXECUTION_BUSY" in codes(run)
        assert decide.seen == []
    finally:
        lease.close()
    assert agent.run({}).status == "completed"


def test_after_a_failed_write_the_run_stops_and_the_next_run_reads_what_was_saved() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    agent, _ = build(store, tools)
    store.fail_after = 3
    run = agent.run({})
    assert run.status == "failed"
    assert [x for x, _ in tools.ran] == [1]  # the intent of b was never saved: b never ran
    assert store.writes == 3
    store.fail_after = None
    assert agent.run({}).value == {"n": 3, "seen": [1, 2]}
    assert [x for x, _ in tools.ran] == [1, 2]


def test_a_non_json_output_is_a_terminal_failure() -> None:
    store = MemoryCheckpointStore()
    tool = define_tool(
        description="Set",
        input_schema={"type": "object"},
        output_schema=validator(lambda value: value, json_schema={}),
        run=lambda v, c: {1},
    )
    agent, _ = build(store, Tools(), tool_map={"add": tool})
    run = agent.run({})
    assert "TUBELESS_AGENT_INVALID_STATE" in codes(run)
    assert "JSON" in saved(store)["agent"]["failure"]["message"]


# -- order, traces and subagents --------------------------------------------------------


class RecordingStore:
    """A memory store that also keeps every text written, in write order."""

    def __init__(self) -> None:
        self.inner = MemoryCheckpointStore()
        self.texts: list[dict[str, Any]] = []

    def acquire(self, key: str) -> Any:
        lease = self.inner.acquire(key)
        texts = self.texts

        class Lease:
            def read(self) -> str | None:
                return lease.read()

            def write(self, text: str) -> None:
                lease.write(text)
                texts.append(json.loads(text))

            def close(self) -> None:
                lease.close()

        return Lease()


def _reverse_agent(store: Any, order: list[str], reduced: list[list[str]]) -> Pipeline:
    done = {name: threading.Event() for name in "abc"}

    def run(value: Any, context: Any) -> str:
        name = value["name"]
        following = {"a": "b", "b": "c"}.get(name)
        if following is not None:
            assert done[following].wait(10)
        order.append(name)
        done[name].set()
        return str(name)

    tool = define_tool(
        description="Name", input_schema={"type": "object"}, output_schema={}, run=run
    )
    three = {
        "kind": "continue",
        "calls": [{"id": n, "tool": "add", "input": {"name": n}} for n in "abc"],
    }

    def reduce(state: Any, outcomes: Any) -> Any:
        reduced.append([outcome["value"] for outcome in outcomes])
        return state

    return define_agent(
        id="durable",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {},
        decide=scripted_decide([three, lambda s, c: {"kind": "finish", "result": {}}]),
        reduce=reduce,
        tools={"add": tool},
        limits={"max_concurrency": 3},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


def test_outcomes_keep_decision_order_whatever_order_they_are_saved_in() -> None:
    recording = RecordingStore()
    order: list[str] = []
    reduced: list[list[str]] = []
    assert _reverse_agent(recording, order, reduced).run({}).status == "completed"
    assert order == ["c", "b", "a"]
    assert reduced == [["a", "b", "c"]]
    decided = next(d["agent"]["turn"] for d in recording.texts if d["agent"]["turn"]["calls"])
    assert [entry["status"] for entry in decided["calls"]] == ["running"] * 3  # one write
    completed: list[str] = []
    for document in recording.texts:
        turn = document["agent"]["turn"]
        if turn is None or turn["phase"] != "decided":
            continue
        assert [entry["id"] for entry in turn["calls"]] == ["a", "b", "c"]
        completed += [
            entry["id"]
            for entry in turn["calls"]
            if entry["status"] == "completed" and entry["id"] not in completed
        ]
    assert completed == ["c", "b", "a"]

    # Resumed after every outcome was saved: reused, in decision order, never run again.
    last_outcome = next(
        index
        for index, document in enumerate(recording.texts)
        if document["agent"]["execution"]["turn"] == 2
    )
    store = MemoryCheckpointStore()
    order.clear()
    reduced.clear()
    crash_after(store, last_outcome, _reverse_agent(store, order, reduced))
    assert order == ["c", "b", "a"] and reduced == [["a", "b", "c"]]
    reduced.clear()
    assert _reverse_agent(store, order, reduced).run({}).status == "completed"
    assert order == ["c", "b", "a"] and reduced == [["a", "b", "c"]]


def test_traces_mark_reused_and_interrupted_calls() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    agent, _ = build(store, tools)
    crash_after(store, 4, agent)  # a completed, b running
    sink = MemoryTraceSink()
    assert agent.run({}, context={"tracing": sink}).status == "completed"
    attributes = [
        record["payload"]["attributes"]
        for record in sink.records
        if record["name"] == "step.attempted"
        and "agent.callId" in (record["payload"].get("attributes") or {})
    ]
    assert {a["agent.callId"]: a.get("agent.replayed") for a in attributes} == {
        "a": True,
        "b": None,
    }
    assert [a["agent.callId"] for a in attributes if a.get("agent.interrupted")] == ["b"]


def _child(store: MemoryCheckpointStore, tools: Tools) -> Pipeline:
    return define_agent(
        id="child",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0, "seen": []},
        decide=scripted_decide([TWO_CALLS, _finish]),
        reduce=_sum,
        tools={"add": tools.tool()},
        implementation_version="1",
        durability=Durability(store=store, key="child-own-key"),
    )


def test_a_durable_subagent_joins_its_parents_journal_and_resumes_inside_it() -> None:
    store, tools = MemoryCheckpointStore(), Tools()
    delegate = {"kind": "continue", "calls": [{"id": "d", "tool": "child", "input": {}}]}

    def finish(state: Any, context: Any) -> Any:
        return {"kind": "finish", "result": {"child": state["seen"][0]}}

    def reduce(state: Any, outcomes: Any) -> Any:
        return {"seen": [outcomes[0]["value"]]}

    def parent() -> tuple[Pipeline, Any]:
        decide = scripted_decide([delegate, finish])
        agent = define_agent(
            id="parent",
            input_schema={"type": "object"},
            result_schema={"type": "object"},
            initial_state=lambda options: {"seen": []},
            decide=decide,
            reduce=reduce,
            tools={"child": pipeline_tool(_child(store, tools), description="Child")},
            implementation_version="1",
            durability=Durability(store=store, key=KEY),
        )
        return agent, decide

    agent, _ = parent()
    # Parent: reservation, decision with intent d; child: reservation, decision with
    # intent a, outcome a; then the child's intent b fails.
    crash_after(store, 5, agent)
    child = saved(store)["agent"]["turn"]["calls"][0]["child"]
    assert [c["status"] for c in child["turn"]["calls"]] == ["completed", "pending"]
    assert saved(store)["agent"]["spent"]["decisions"] == 1
    agent, _ = parent()
    run = agent.run({})
    assert run.status == "completed"
    assert run.value == {"child": {"n": 3, "seen": (1, 2)}}  # an outcome value, read-only
    assert [x for x, _ in tools.ran] == [1, 2]
    assert store.checkpoint("child-own-key") is None  # the child used its parent's journal
    execution_id = saved(store)["id"]
    assert tools.ran[1][1] == ExecutionIds(execution_id, "parent/1/d", 1, "b")
    node = saved(store)["agent"]
    assert node["spent"] == {"calls": 3, "decisions": 4}


def test_what_a_non_durable_subagent_spent_is_saved_with_its_outcome() -> None:
    """A plain subagent's charges survive the parent's restart (saved as `consumed`)."""
    store, tools = MemoryCheckpointStore(), Tools()
    child = define_agent(
        id="plain-child",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0, "seen": []},
        decide=scripted_decide([TWO_CALLS, _finish]),
        reduce=_sum,
        tools={"add": tools.tool()},
    )
    delegate = {
        "kind": "continue",
        "calls": [
            {"id": "d", "tool": "child", "input": {}},
            {"id": "e", "tool": "add", "input": {"x": 5}},
        ],
    }
    agent, _ = build(
        store,
        tools,
        decisions=[delegate, _finish],
        tool_map={"child": pipeline_tool(child, description="Child"), "add": tools.tool()},
    )
    crash_after(store, 3, agent)  # reservation, decision with intent d, outcome d
    entry = saved(store)["agent"]["turn"]["calls"][0]
    assert entry["status"] == "completed"
    assert entry["consumed"] == {"calls": 2, "decisions": 2}
    run = agent.run({})
    assert run.status == "completed"
    assert [x for x, _ in tools.ran] == [1, 2, 5]  # the child ran once
    assert saved(store)["agent"]["spent"] == {"calls": 4, "decisions": 4}


def test_changes_waiting_on_a_write_share_the_next_one() -> None:
    """Group commit: two outcomes arriving during a write are saved together, once each."""
    release = threading.Event()
    texts: list[dict[str, Any]] = []

    class GatedLease:
        def read(self) -> str | None:
            return None

        def write(self, text: str) -> None:
            if not texts:
                assert release.wait(10)
            texts.append(json.loads(text))

        def close(self) -> None:
            pass

    journal = Journal(GatedLease(), {"outcomes": []})
    outcomes: list[str] = journal.document["outcomes"]

    def arrive(name: str) -> None:
        journal.change(lambda: outcomes.append(name))

    first = threading.Thread(target=arrive, args=("c",))
    first.start()
    deadline = time.monotonic() + 10
    while not journal.writing and time.monotonic() < deadline:
        time.sleep(0.001)
    others = [threading.Thread(target=arrive, args=(name,)) for name in "ba"]
    for thread in others:
        thread.start()
    while len(outcomes) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    release.set()
    for thread in (first, *others):
        thread.join(10)
    assert texts[0] == {"outcomes": ["c"]}
    assert [sorted(text["outcomes"]) for text in texts[1:]] == [["a", "b", "c"]]
    assert journal.writes == 2

"""Trace records of an agent run: run topology, first-attempt attributes, no payload values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool
from tubeless.errors import SchemaIssues, ToolError
from tubeless.schema import validator
from tubeless.testing import MemoryTraceSink, scripted_decide
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, read_ndjson

SECRET = "s3cr3t-value-never-recorded"


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise SchemaIssues(["Expected text"])
    return value


TEXT = validator(_text, json_schema={"type": "string"})


def _options(value: Any) -> Any:
    if not isinstance(value, dict):
        raise SchemaIssues(["Expected an object"])
    return {"question": value.get("question", "hello tubeless")}


def _upper(word: str, context: Any) -> str:
    if word == "missing":
        raise ToolError("NOT_FOUND", "Word unavailable")
    return word.upper()


def _decide(state: Any, context: Any) -> Any:
    if state["observations"]:
        return {"kind": "finish", "result": "; ".join(state["observations"])}
    calls = [{"id": "length", "tool": "count", "input": state["question"]}]
    calls += [
        {"id": f"word-{index}", "tool": "uppercase", "input": word}
        for index, word in enumerate(state["question"].split())
    ]
    return {"kind": "continue", "calls": calls}


def _reduce(state: Any, outcomes: Any) -> Any:
    observations = []
    for outcome in outcomes:
        if not outcome["ok"]:
            error = outcome["error"]
            observations.append(f"Observed {error['code']}: {error['message']}")
        elif outcome["tool"] == "count":
            observations.append(f"{outcome['value']} characters")
        else:
            observations.append(outcome["value"])
    return {"question": state["question"], "observations": observations}


def _scripted_agent() -> Any:
    tools = {
        "uppercase": define_tool(
            description="Uppercase a word",
            input_schema=TEXT,
            output_schema=TEXT,
            run=_upper,
            dry_run=_upper,
        ),
        "count": define_tool(
            description="Count characters",
            input_schema=TEXT,
            output_schema={"type": "number"},
            run=lambda text, context: len(text),
            dry_run=lambda text, context: len(text),
        ),
    }
    return define_agent(
        id="scripted-agent",
        name="Scripted agent",
        input_schema=validator(_options, json_schema={"type": "object"}),
        result_schema=validator(
            lambda value: {"answer": _text(value)}, json_schema={"type": "string"}
        ),
        initial_state=lambda options: {"question": options["question"], "observations": []},
        decide=_decide,
        dry_run=_decide,
        reduce=_reduce,
        tools=tools,
        limits={"max_turns": 3, "max_calls": 100, "max_decisions": 3, "max_concurrency": 2},
    )


def _completed(sink: MemoryTraceSink, suffix: str) -> list[dict[str, Any]]:
    return [
        r
        for r in sink.records
        if r["name"] == "pipeline.completed" and r["pipelineId"].endswith(suffix)
    ]


def _attempts(sink: MemoryTraceSink, step_id: str) -> list[dict[str, Any]]:
    return [r for r in sink.records if r["name"] == "step.attempted" and r["stepId"] == step_id]


@pytest.mark.parametrize(
    ("options", "controls", "answer"),
    [
        ({}, None, "14 characters; HELLO; TUBELESS"),
        (
            {"question": "missing word"},
            None,
            "12 characters; Observed NOT_FOUND: Word unavailable; WORD",
        ),
        ({"question": "preview"}, {"dry_run": True}, "7 characters; PREVIEW"),
        ({"question": ""}, None, "0 characters"),
    ],
)
def test_the_scripted_example_answers(options: Any, controls: Any, answer: str) -> None:
    """The scripted recipe recovers from a domain error and transforms the final answer."""
    run = _scripted_agent().run(options, controls=controls)

    assert run.status == "completed"
    assert run.value == {"answer": answer}


def test_run_topology(sink: MemoryTraceSink) -> None:
    """One child run per turn and one per dispatched call, linked to their parents."""
    run = _scripted_agent().run({}, context={"tracing": sink})
    assert run.status == "completed"

    [root] = _completed(sink, "scripted-agent")
    assert root["runId"] == run.run_id
    assert "parentRunId" not in root
    turns = _completed(sink, "/turn")
    assert [t["itemKey"] for t in turns] == ["iteration-1", "iteration-2"]
    [agent_running] = [
        r
        for r in sink.records
        if r["runId"] == run.run_id
        and r["name"] == "step.running"
        and "progress" not in r["payload"]
    ]
    for index, turn in enumerate(turns, start=1):
        assert turn["parentRunId"] == run.run_id
        assert turn["iteration"] == {
            "runId": run.run_id,
            "stepId": "agent",
            "attemptId": agent_running["attemptId"],
            "index": index,
        }
    tools = [
        r for r in sink.records if r["name"] == "pipeline.started" and "/tool/" in r["pipelineId"]
    ]
    assert sorted((r["pipelineId"], r["itemKey"]) for r in tools) == [
        ("scripted-agent/tool/count", "length"),
        ("scripted-agent/tool/uppercase", "word-0"),
        ("scripted-agent/tool/uppercase", "word-1"),
    ]
    first_turn = turns[0]["runId"]
    assert all(r["parentRunId"] == first_turn for r in tools)
    assert all("iteration" not in r for r in tools)


def test_a_recoverable_tool_error_leaves_a_failed_tool_run(sink: MemoryTraceSink) -> None:
    """The `missing` word's tool run fails while the agent completes."""
    run = _scripted_agent().run({"question": "missing word"}, context={"tracing": sink})

    assert run.status == "completed"
    statuses = {r["itemKey"]: r["payload"]["status"] for r in _completed(sink, "/tool/uppercase")}
    assert statuses == {"word-0": "failed", "word-1": "completed"}


def test_first_attempt_attributes(sink: MemoryTraceSink) -> None:
    """decide, calls, reduce and tool steps record exactly the reference's attributes."""
    run = _scripted_agent().run({}, context={"tracing": sink})
    root = run.run_id

    decides = _attempts(sink, "decide")
    assert [r["payload"] for r in decides] == [
        {
            "attempt": 1,
            "attributes": {
                "agent.runId": root,
                "agent.turn": 1,
                "agent.stateVersion": 0,
                "agent.callsAdmitted": 0,
                "agent.decision": "continue",
                "agent.callCount": 3,
            },
        },
        {
            "attempt": 1,
            "attributes": {
                "agent.runId": root,
                "agent.turn": 2,
                "agent.stateVersion": 1,
                "agent.callsAdmitted": 3,
                "agent.decision": "finish",
                "agent.callCount": 0,
            },
        },
    ]
    [calls] = _attempts(sink, "calls")
    assert calls["payload"] == {
        "attempt": 1,
        "attributes": {
            "agent.runId": root,
            "agent.turn": 1,
            "agent.callsAdmitted": 3,
            "agent.callCount": 3,
        },
    }
    [reduce] = _attempts(sink, "reduce")
    assert reduce["payload"]["attributes"] == {
        "agent.runId": root,
        "agent.turn": 1,
        "agent.stateVersion": 1,
        "agent.callsAdmitted": 3,
    }
    tools = sorted(_attempts(sink, "tool"), key=lambda r: r["itemKey"])
    assert [r["payload"]["attributes"] for r in tools] == [
        {
            "agent.runId": root,
            "agent.turn": 1,
            "agent.callId": call_id,
            "agent.tool": tool,
            "agent.parentAttemptId": calls["attemptId"],
        }
        for call_id, tool in (("length", "count"), ("word-0", "uppercase"), ("word-1", "uppercase"))
    ]


def test_calls_rejected_before_dispatch_leave_no_tool_run(sink: MemoryTraceSink) -> None:
    """A bad argument stops the batch in `decide`: no tool run record at all."""
    decide_records = scripted_decide(
        [
            {
                "kind": "continue",
                "calls": [
                    {"id": "ok", "tool": "uppercase", "input": "fine"},
                    {"id": "bad", "tool": "count", "input": 42},
                ],
            }
        ]
    )
    rejecting = define_agent(
        id="rejecting",
        input_schema={"type": "object"},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide_records,
        tools={
            "uppercase": define_tool(
                description="Up", input_schema=TEXT, output_schema=TEXT, run=_upper
            ),
            "count": define_tool(
                description="Count", input_schema=TEXT, output_schema=TEXT, run=_upper
            ),
        },
    )

    run = rejecting.run({}, context={"tracing": sink})

    assert run.status == "failed"
    assert not [r for r in sink.records if "/tool/" in r["pipelineId"]]
    [decide] = _attempts(sink, "decide")
    assert decide["payload"]["attributes"]["agent.callCount"] == 2


def test_a_malformed_envelope_records_no_decision_attempt(sink: MemoryTraceSink) -> None:
    """Decision attributes are emitted only after a well-formed envelope."""
    agent = define_agent(
        id="malformed",
        input_schema={"type": "object"},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=scripted_decide([{"kind": "continue", "calls": []}]),
    )

    assert agent.run({}, context={"tracing": sink}).status == "failed"
    assert _attempts(sink, "decide") == []


def test_state_prompts_inputs_and_outputs_are_never_recorded(
    sink: MemoryTraceSink, tmp_path: Path
) -> None:
    """A secret in options, state, decisions, inputs, outputs and the result stays out of
    every record."""
    ndjson = tmp_path / "trace.ndjson"
    store = SqliteTraceStore(tmp_path / "trace.db")

    class Fanout:
        def export(self, record: dict[str, Any]) -> None:
            for target in (sink, file_sink, store):
                target.export(record)

    with open(ndjson, "w", encoding="utf-8") as stream:
        file_sink = NdjsonTraceSink(stream)
        run = _scripted_agent().run({"question": f"{SECRET} word"}, context={"tracing": Fanout()})

    assert run.status == "completed"
    assert SECRET.upper() in run.value["answer"]
    text = json.dumps(sink.records)
    assert SECRET not in text
    assert SECRET.upper() not in text
    assert "WORD" not in text
    assert read_ndjson(ndjson) == sink.records
    assert store.events() == sink.records
    store.close()

"""One turn: the `decide -> calls -> reduce` child run and what `decide` receives."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tubeless._frozen import FrozenDict
from tubeless.agent import DecisionContext, define_agent, define_tool
from tubeless.errors import SchemaIssues
from tubeless.schema import validator
from tubeless.testing import MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}


def _options(value: Any) -> Any:
    if not isinstance(value, dict):
        raise SchemaIssues(["Expected an object"])
    return {"question": value.get("question", "default question")}


OPTIONS = validator(
    _options, json_schema={"type": "object", "properties": {"question": {"type": "string"}}}
)


def _tools() -> dict[str, Any]:
    echo = define_tool(
        description="Echo text",
        input_schema={"type": "string", "description": "Text"},
        output_schema=TEXT,
        run=lambda value, context: value,
    )
    count = define_tool(
        description="Count characters",
        input_schema={"type": "string"},
        output_schema={"type": "integer"},
        run=lambda value, context: len(value),
    )
    return {"echo": echo, "count": count}


def test_decide_gets_state_and_the_decision_context() -> None:
    """The context carries validated options, counters, descriptors and step services."""
    seen: list[dict[str, Any]] = []
    signal = threading.Event()

    def decide(state: Any, context: DecisionContext) -> Any:
        seen.append(
            {
                "state": state,
                "options": context.options,
                "turn": context.turn,
                "state_version": context.state_version,
                "capabilities": context.capabilities,
                "result_json_schema": context.result_json_schema,
                "dry_run": context.dry_run,
                "signal": context.signal,
                "run_id": context.run_id,
                "parent_run_id": context.parent_run_id,
                "attempt_id": context.attempt_id,
                "now": context.now(),
            }
        )
        return FINISH

    agent = define_agent(
        id="ctx",
        input_schema=OPTIONS,
        result_schema=validator(lambda value: value, json_schema={"type": "string"}),
        initial_state=lambda options: {"question": options["question"]},
        decide=decide,
        tools=_tools(),
    )

    run = agent.run({}, context={"signal": signal, "now": lambda: 1234})

    assert run.status == "completed"
    [entry] = seen
    assert entry["state"] == {"question": "default question"}
    assert entry["options"] == {"question": "default question"}
    assert (entry["turn"], entry["state_version"], entry["dry_run"]) == (1, 0, False)
    assert entry["capabilities"] == (
        {
            "name": "count",
            "description": "Count characters",
            "inputJsonSchema": {"type": "string"},
        },
        {
            "name": "echo",
            "description": "Echo text",
            "inputJsonSchema": {"description": "Text", "type": "string"},
        },
    )
    assert all(isinstance(capability, FrozenDict) for capability in entry["capabilities"])
    assert list(entry["capabilities"][0]) == ["name", "description", "inputJsonSchema"]
    assert entry["result_json_schema"] == {"type": "string"}
    assert isinstance(entry["result_json_schema"], FrozenDict)
    assert entry["signal"] is signal
    assert entry["run_id"].startswith("ctx/turn:")
    assert entry["parent_run_id"] == run.run_id
    assert entry["attempt_id"].startswith(entry["run_id"] + ":attempt:")
    assert entry["now"] == 1234


def test_the_decision_context_exposes_no_handlers_and_is_read_only() -> None:
    """Capabilities are descriptors only and cannot be changed by `decide`."""
    failures: list[str] = []

    def decide(state: Any, context: DecisionContext) -> Any:
        capability = context.capabilities[0]
        if set(capability) != {"name", "description", "inputJsonSchema"}:
            failures.append("unexpected capability keys")
        for mutate in (
            lambda: capability.__setitem__("name", "other"),
            lambda: capability["inputJsonSchema"].__setitem__("type", "number"),
            lambda: context.result_json_schema.__setitem__("type", "number"),
        ):
            with pytest.raises(TypeError):
                mutate()
        if hasattr(context, "tools"):
            failures.append("tools exposed")
        return FINISH

    agent = define_agent(
        id="read-only",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools=_tools(),
    )

    assert agent.run({}).status == "completed"
    assert failures == []


def test_each_turn_is_a_child_run_of_the_turn_pipeline(sink: MemoryTraceSink) -> None:
    """Every turn runs `<id>/turn` with steps decide, calls and reduce, all completed."""
    decide = scripted_decide(
        [
            {"kind": "continue", "calls": [{"id": "a", "tool": "echo", "input": "x"}]},
            FINISH,
        ]
    )
    agent = define_agent(
        id="turns",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools=_tools(),
    )

    run = agent.run({}, context={"tracing": sink})

    assert run.status == "completed"
    assert [step.id for step in run.steps] == ["agent"]
    turn_steps = [
        (r["itemKey"], r["stepId"], r["name"])
        for r in sink.records
        if r["pipelineId"] == "turns/turn" and r["name"] in ("step.complete", "step.planned")
    ]
    expected = []
    for turn in ("iteration-1", "iteration-2"):
        expected += [(turn, step, "step.planned") for step in ("decide", "calls", "reduce")]
        expected += [(turn, step, "step.complete") for step in ("decide", "calls", "reduce")]
    assert turn_steps == expected
    planned = [
        r["payload"]
        for r in sink.records
        if r["pipelineId"] == "turns/turn" and r["name"] == "step.planned"
    ][:3]
    assert [p["dependencies"] for p in planned] == [[], ["decide"], ["decide", "calls"]]


def test_a_finish_turn_dispatches_no_calls(sink: MemoryTraceSink) -> None:
    """On finish, `calls` publishes nothing to run and `reduce` publishes the result."""
    reduced: list[Any] = []
    agent = define_agent(
        id="finish-only",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide([FINISH]),
        tools=_tools(),
        reduce=lambda state, outcomes: reduced.append(outcomes),
    )

    run = agent.run({}, context={"tracing": sink})

    assert run.value == "done"
    assert reduced == []
    assert not [r for r in sink.records if "/tool/" in r["pipelineId"]]


def test_options_are_validated_once_at_entry() -> None:
    """The options schema runs once per invocation; bad options never reach initial_state."""
    checks: list[Any] = []
    initialised: list[Any] = []

    def check(value: Any) -> Any:
        checks.append(value)
        return _options(value)

    agent = define_agent(
        id="options",
        input_schema=validator(check, json_schema={"type": "object"}),
        result_schema=TEXT,
        initial_state=lambda options: initialised.append(options) or {},
        decide=scripted_decide(
            [
                {"kind": "continue", "calls": [{"id": "a", "tool": "echo", "input": "x"}]},
                FINISH,
            ]
        ),
        tools=_tools(),
    )

    assert agent.run({"question": "q"}).status == "completed"
    assert checks == [{"question": "q"}]
    assert initialised == [{"question": "q"}]

    bad = agent.run(["not", "an", "object"])
    assert bad.status == "failed"
    assert bad.errors[0].code == "TUBELESS_OPTIONS_VALIDATION_FAILED"
    assert initialised == [{"question": "q"}]


def test_the_result_schema_transforms_the_finish_result() -> None:
    """The raw result is validated once and its transformed value is the run's value."""
    agent = define_agent(
        id="answer",
        input_schema={"type": "object"},
        result_schema=validator(lambda value: {"answer": value}, json_schema=TEXT),
        initial_state=lambda options: {},
        decide=scripted_decide([{"kind": "finish", "result": "42"}]),
    )

    assert agent.run({}).value == {"answer": "42"}
    assert agent.run_or_raise({}) == {"answer": "42"}


def test_a_failing_decide_fails_the_turn_before_any_tool(sink: MemoryTraceSink) -> None:
    """An exception from `decide` is fatal: step decide fails and no tool runs."""

    def decide(state: Any, context: Any) -> Any:
        raise RuntimeError("model unavailable")

    agent = define_agent(
        id="broken",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools=_tools(),
    )

    run = agent.run({}, context={"tracing": sink})

    assert run.status == "failed"
    assert run.errors[0].code == "TUBELESS_CHILD_FAILED"
    assert "model unavailable" in run.errors[0].message
    [failed] = [r for r in sink.records if r["name"] == "step.failed" and r["stepId"] == "decide"]
    assert failed["error"]["code"] == "TUBELESS_STEP_FAILED"
    assert not [r for r in sink.records if "/tool/" in r["pipelineId"]]

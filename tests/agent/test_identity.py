"""Planning, graphs and definition identity of agents."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool
from tubeless.errors import DefinitionIdentityError, SchemaIssues
from tubeless.pipeline import decode_snapshot, fingerprint, render_plan
from tubeless.schema import validator

TEXT = {"type": "string"}


class Spy:
    """Callbacks, validators and handlers that record any call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def validator(self, name: str, schema: dict[str, Any]) -> Any:
        def check(value: Any) -> Any:
            self.calls.append(name)
            if not isinstance(value, str):
                raise SchemaIssues(["Expected text"])
            return value

        return validator(check, json_schema=schema)

    def callback(self, name: str, value: Any = None) -> Any:
        def called(*args: Any) -> Any:
            self.calls.append(name)
            return value

        return called


def _agent(
    spy: Spy | None = None,
    *,
    limits: Any = None,
    word_schema: dict[str, Any] | None = None,
    version: str | None = None,
    agent_id: str = "scripted-agent",
) -> Any:
    spy = spy or Spy()
    uppercase = define_tool(
        description="Uppercase a word",
        input_schema=spy.validator("uppercase input", TEXT),
        input_json_schema=word_schema,
        output_schema=spy.validator("uppercase output", TEXT),
        run=spy.callback("uppercase run", "X"),
        dry_run=spy.callback("uppercase preview", "X"),
    )
    count = define_tool(
        description="Count characters",
        input_schema=spy.validator("count input", TEXT),
        output_schema={"type": "number"},
        run=spy.callback("count run", 1),
    )
    return define_agent(
        id=agent_id,
        name="Scripted agent",
        input_schema=spy.validator("options", {"type": "object"}),
        result_schema=spy.validator("result", TEXT),
        initial_state=spy.callback("initial_state", {}),
        decide=spy.callback("decide"),
        dry_run=spy.callback("dry_run"),
        reduce=spy.callback("reduce"),
        tools={"uppercase": uppercase, "count": count},
        limits=limits
        or {"max_turns": 3, "max_calls": 100, "max_decisions": 3, "max_concurrency": 2},
        implementation_version=version,
    )


def test_planning_calls_nothing() -> None:
    """Plans, graphs and definitions never call state, decisions, validators or tools."""
    spy = Spy()
    agent = _agent(spy)

    plan = agent.plan()
    agent.plan({"dry_run": True})
    agent.plan({"step_ids": ["agent"]})
    agent.to_mermaid()
    agent.definition.to_dict()
    render_plan(plan)

    assert plan.ok
    assert spy.calls == []


def test_the_plan_carries_the_agent_block_of_the_definition() -> None:
    """`plan().to_dict()`'s agent block is the definition snapshot's, with fingerprints."""
    agent = _agent()

    planned = agent.plan().to_dict()["steps"][0]
    defined = agent.definition.to_dict()["steps"][0]

    assert planned["agent"] == defined["agent"]
    block = planned["agent"]
    assert list(block) == ["limits", "resultSchemaFingerprint", "capabilities"]
    assert block["limits"] == {
        "maxTurns": 3,
        "maxCalls": 100,
        "maxDecisions": 3,
        "maxDepth": 4,
        "maxConcurrency": 2,
    }
    assert block["resultSchemaFingerprint"] == fingerprint({"type": "string"})
    assert [c["name"] for c in block["capabilities"]] == ["count", "uppercase"]
    count = block["capabilities"][0]
    assert count["description"] == "Count characters"
    assert count["inputSchemaFingerprint"] == fingerprint({"type": "string"})
    assert count["identity"]["version"] == 1
    assert count["identity"]["structuralFingerprint"].startswith("sha256:")
    json.dumps(block)


def test_capability_identity_is_the_tool_pipeline_identity() -> None:
    """Each capability's identity matches its `<id>/tool/<name>` pipeline in traces."""
    from tubeless.testing import MemoryTraceSink

    spy = Spy()
    agent = define_agent(
        id="one-tool",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=lambda state, context: (
            {"kind": "continue", "calls": [{"id": "a", "tool": "echo", "input": "x"}]}
            if context.turn == 1
            else {"kind": "finish", "result": "done"}
        ),
        tools={
            "echo": define_tool(
                description="Echo",
                input_schema=TEXT,
                output_schema=TEXT,
                run=spy.callback("echo", "x"),
            )
        },
    )
    sink = MemoryTraceSink()

    assert agent.run({}, context={"tracing": sink}).status == "completed"

    [started] = [
        r
        for r in sink.records
        if r["name"] == "pipeline.started" and r["pipelineId"] == "one-tool/tool/echo"
    ]
    capability = agent.definition.to_dict()["steps"][0]["agent"]["capabilities"][0]
    assert capability["identity"] == started["payload"]["definitionIdentity"]


def test_the_plan_nests_the_bounded_turn_pipeline() -> None:
    """Step `agent` iterates `<id>/turn` (decide, calls, reduce) at most `max_turns` times."""
    agent = _agent()

    assert agent.id == "scripted-agent"
    assert agent.step_ids == ("agent",)
    assert agent.target_ids == ("agent",)
    nested = agent.plan().to_dict()["steps"][0]["nestedPipeline"]
    assert nested["mode"] == "iterate"
    assert nested["maxIterations"] == 3
    assert nested["pipelineId"] == "scripted-agent/turn"
    assert nested["stepIds"] == ["decide", "calls", "reduce"]


def test_plan_text_and_mermaid() -> None:
    """The plan text and the Mermaid node match the reference's rendering."""
    agent = _agent()

    assert render_plan(agent.plan(), explain=False) == (
        "Pipeline scripted-agent: plan (ok=true, dryRun=false, steps=1)\n"
        "  - agent: run -> iteration (at most 3) pipeline scripted-agent/turn (3 declared steps)"
    )
    assert agent.to_mermaid() == 'flowchart TD\n  step0["agent (at most 3 iterations)"]\n'


def test_runtime_call_ids_are_not_steps() -> None:
    """Selecting a call id as a step is a planning error, not a run of that call."""
    plan = _agent().plan({"step_ids": ["one"]})

    assert not plan.ok
    assert [error.code for error in plan.errors] == ["TUBELESS_PLANNING_STEP_UNKNOWN"]
    run = _agent().run({}, controls={"step_ids": ["one"]})
    assert run.status == "failed"
    assert run.errors[0].code == "TUBELESS_PLANNING_STEP_UNKNOWN"


def _identity(agent: Any) -> dict[str, Any]:
    return dict(agent.definition.identity.to_dict())


def test_agents_use_identity_version_2() -> None:
    """Iteration makes the agent's identity version 2."""
    identity = _identity(_agent())

    assert identity["version"] == 2
    assert identity["structuralFingerprint"].startswith("sha256:")
    assert identity["definitionId"].startswith("sha256:")
    assert "implementationVersion" not in identity


@pytest.mark.parametrize(
    "limits",
    [
        {"max_turns": 4, "max_calls": 100, "max_decisions": 3, "max_concurrency": 2},
        {"max_turns": 3, "max_calls": 101, "max_decisions": 3, "max_concurrency": 2},
        {"max_turns": 3, "max_calls": 100, "max_decisions": 4, "max_concurrency": 2},
        {"max_turns": 3, "max_calls": 100, "max_decisions": 3, "max_concurrency": 1},
    ],
)
def test_any_limit_change_changes_the_structure(limits: dict[str, int]) -> None:
    """Each limit is part of the structural fingerprint."""
    base = _identity(_agent())
    changed = _identity(_agent(limits=limits))

    assert changed["structuralFingerprint"] != base["structuralFingerprint"]
    assert changed["definitionId"] != base["definitionId"]


def test_a_descriptor_change_changes_the_structure() -> None:
    """A different tool input descriptor changes the structural fingerprint."""
    plain = _identity(_agent(word_schema={"type": "string"}))
    described = _identity(_agent(word_schema={"type": "string", "minLength": 1}))

    assert plain["structuralFingerprint"] != described["structuralFingerprint"]


def test_descriptor_key_order_is_irrelevant() -> None:
    """Equal descriptors written in different key orders give the same identity."""
    forward = {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}
    backward = {"properties": {"a": {"minLength": 1, "type": "string"}}, "type": "object"}

    assert _identity(_agent(word_schema=forward)) == _identity(_agent(word_schema=backward))


def test_implementation_version_changes_only_the_definition_id() -> None:
    """The author's version keeps the structure and changes `definitionId`."""
    base = _identity(_agent())
    first = _identity(_agent(version="prompt-v1"))
    second = _identity(_agent(version="prompt-v2"))

    assert base["structuralFingerprint"] == first["structuralFingerprint"]
    assert first["structuralFingerprint"] == second["structuralFingerprint"]
    assert len({base["definitionId"], first["definitionId"], second["definitionId"]}) == 3
    assert first["implementationVersion"] == "prompt-v1"


def test_identity_does_not_depend_on_closures_or_runs() -> None:
    """Separately built agents with other callbacks are the same definition, before and after
    a run."""
    first = _agent(Spy())
    before = _identity(first)

    first.run({})

    assert _identity(first) == before
    assert _identity(_agent(Spy())) == before


def test_a_stored_snapshot_decodes_and_an_edited_one_is_rejected() -> None:
    """Decoding checks the fingerprints; editing agent metadata breaks the structure."""
    stored = json.loads(json.dumps(_agent().definition.to_dict()))

    assert decode_snapshot(stored).identity == _agent().definition.identity

    edited = copy.deepcopy(stored)
    edited["steps"][0]["agent"]["limits"]["maxCalls"] += 1
    with pytest.raises(DefinitionIdentityError, match="structural fingerprint"):
        decode_snapshot(edited)

    renamed = copy.deepcopy(stored)
    renamed["steps"][0]["agent"]["capabilities"][0]["description"] = "Count words"
    with pytest.raises(DefinitionIdentityError, match="structural fingerprint"):
        decode_snapshot(renamed)


def test_a_result_descriptor_change_changes_the_structure() -> None:
    """The raw-result descriptor's fingerprint is part of the structure."""

    def agent(result_schema: dict[str, Any]) -> Any:
        return define_agent(
            id="result",
            input_schema={"type": "object"},
            result_schema=result_schema,
            initial_state=lambda options: {},
            decide=lambda state, context: {"kind": "finish", "result": "x"},
        )

    plain = _identity(agent({"type": "string"}))
    bounded = _identity(agent({"type": "string", "maxLength": 10}))

    assert plain["structuralFingerprint"] != bounded["structuralFingerprint"]


def test_a_tool_description_change_changes_the_structure() -> None:
    """Capability descriptions are part of the structure too."""
    spy = Spy()

    def agent(description: str) -> Any:
        tool = define_tool(
            description=description,
            input_schema=TEXT,
            output_schema=TEXT,
            run=spy.callback("run"),
        )
        return define_agent(
            id="described",
            input_schema={"type": "object"},
            result_schema=TEXT,
            initial_state=lambda options: {},
            decide=lambda state, context: {"kind": "finish", "result": "x"},
            tools={"tool": tool},
        )

    assert (
        _identity(agent("Search the web"))["structuralFingerprint"]
        != _identity(agent("Search the files"))["structuralFingerprint"]
    )

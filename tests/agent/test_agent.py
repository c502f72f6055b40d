"""`define_agent`: definition checks and the compiled pipeline, alone and nested."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool
from tubeless.errors import AgentDefinitionError, PipelineDefinitionError
from tubeless.pipeline import Pipeline, create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}


class _NoDescriptor:
    """A validator without a JSON Schema converter."""

    def validate(self, value: Any) -> Any:
        return value


def _fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": "checked",
        "input_schema": {"type": "object"},
        "result_schema": TEXT,
        "initial_state": lambda options: {},
        "decide": lambda state, context: FINISH,
    }
    fields.update(overrides)
    return fields


def _words_agent(agent_id: str = "words") -> Pipeline:
    upper = define_tool(
        description="Uppercase a word",
        input_schema=TEXT,
        output_schema=TEXT,
        run=lambda word, context: word.upper(),
    )

    def decide(state: Any, context: Any) -> Any:
        if state["done"]:
            return {"kind": "finish", "result": " ".join(state["done"])}
        words = context.options["text"].split()
        calls = [{"id": f"w{i}", "tool": "upper", "input": w} for i, w in enumerate(words)]
        return {"kind": "continue", "calls": calls}

    return define_agent(
        id=agent_id,
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        result_schema=TEXT,
        initial_state=lambda options: {"done": []},
        decide=decide,
        reduce=lambda state, outcomes: {"done": [o["value"] for o in outcomes]},
        tools={"upper": upper},
        limits={"max_concurrency": 2},
    )


def test_define_agent_returns_an_ordinary_pipeline() -> None:
    """One step `agent`, the only target and the finalizer; name and description kept."""
    agent = define_agent(**_fields(name="Checked agent", description="Checks things"))

    assert isinstance(agent, Pipeline)
    assert agent.id == "checked"
    assert agent.name == "Checked agent"
    assert agent.description == "Checks things"
    assert agent.step_ids == ("agent",)
    assert agent.target_ids == ("agent",)
    assert agent.run({}).value == "done"


def test_the_agent_runs_end_to_end() -> None:
    """A two-turn agent uppercases words in one batch and finishes."""
    agent = _words_agent()

    assert agent.run_or_raise({"text": "red blue green"}) == "RED BLUE GREEN"


def test_the_input_schema_is_checked_first() -> None:
    """With every field wrong, the agent input schema error wins."""
    with pytest.raises(AgentDefinitionError, match="Agent input requires a schema validator"):
        define_agent(**_fields(input_schema=1, initial_state=None, decide=None, limits={"bad": 1}))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"initial_state": None}, "initial_state and decide"),
        ({"decide": "decide"}, "initial_state and decide"),
        ({"reduce": 3}, "reduce must be callable"),
        ({"dry_run": "skip"}, "dry_run must be callable"),
    ],
)
def test_callbacks_are_checked_second(overrides: dict[str, Any], message: str) -> None:
    """Callbacks are checked before limits and schemas that are also wrong."""
    with pytest.raises(AgentDefinitionError, match=message) as raised:
        define_agent(**_fields(limits={"bad": 1}, result_schema=2, **overrides))

    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


def test_limits_are_checked_before_the_result_schema() -> None:
    """A bad limit is reported before a bad result schema."""
    with pytest.raises(AgentDefinitionError, match="Unsupported agent limit: bad"):
        define_agent(**_fields(limits={"bad": 1}, result_schema=2))


def test_the_result_needs_a_schema_and_a_descriptor() -> None:
    """The result schema must be a validator with a converter or an explicit descriptor."""
    with pytest.raises(AgentDefinitionError, match="Agent result requires a schema validator"):
        define_agent(**_fields(result_schema=2))
    with pytest.raises(AgentDefinitionError, match="descriptor") as raised:
        define_agent(**_fields(result_schema=_NoDescriptor(), tools={"x": object()}))
    assert "Agent result requires a JSON Schema input descriptor or explicit fallback" in str(
        raised.value
    )


def test_an_explicit_result_descriptor_is_used() -> None:
    """`result_json_schema` supplies the raw-result descriptor the decision context shows."""
    seen: list[Any] = []

    def decide(state: Any, context: Any) -> Any:
        seen.append(context.result_json_schema)
        return FINISH

    agent = define_agent(
        **_fields(
            result_schema=_NoDescriptor(),
            result_json_schema={"type": "string", "description": "The answer"},
            decide=decide,
        )
    )

    assert agent.run({}).value == "done"
    assert seen == [{"description": "The answer", "type": "string"}]


def test_the_result_descriptor_is_checked_before_tools() -> None:
    """A bad result descriptor is reported before unregistered tools."""
    with pytest.raises(AgentDefinitionError, match="descriptor"):
        define_agent(**_fields(result_json_schema=["not", "an", "object"], tools={"x": 1}))


def test_a_blank_id_is_a_pipeline_definition_error() -> None:
    """Pipeline-level mistakes surface as the pipeline's own definition errors."""
    with pytest.raises(PipelineDefinitionError):
        define_agent(**_fields(id=""))


def test_an_agent_runs_as_a_child_pipeline() -> None:
    """`from_pipeline` runs the agent with mapped options and uses its transformed result."""
    agent = _words_agent()
    sink = MemoryTraceSink()
    steps = create_steps()
    source = steps.step("source", run=lambda inputs, context: "one two")
    shout = steps.from_pipeline(
        "shout",
        pipeline=agent,
        depends_on=[source],
        map_options=lambda inputs, context: {"text": inputs["source"]},
    )
    parent = define_pipeline(id="parent", steps=[source, shout], finalize=shout)

    run = parent.run(None, context={"tracing": sink})

    assert run.status == "completed"
    assert run.value == "ONE TWO"
    [agent_run] = [
        r for r in sink.records if r["name"] == "pipeline.started" and r["pipelineId"] == "words"
    ]
    assert agent_run["parentRunId"] == run.run_id
    decide = next(
        r for r in sink.records if r["name"] == "step.attempted" and r["stepId"] == "decide"
    )
    assert decide["payload"]["attributes"]["agent.runId"] == agent_run["runId"]
    nested = parent.plan().to_dict()["steps"][1]["nestedPipeline"]
    assert nested["pipelineId"] == "words"
    assert nested["identity"] == agent.definition.identity.to_dict()


def test_a_failing_agent_fails_its_parent_with_the_agent_code() -> None:
    """The agent's error code survives the child-error wrapping of the parent."""
    agent = define_agent(
        **_fields(id="failing", decide=scripted_decide([{"kind": "continue", "calls": []}]))
    )
    steps = create_steps()
    wrapped = steps.from_pipeline("wrapped", pipeline=agent)
    parent = define_pipeline(id="parent", steps=[wrapped], finalize=wrapped)

    run = parent.run({})

    assert run.status == "failed"
    assert "TUBELESS_AGENT_INVALID_DECISION" in json.dumps([e.to_dict() for e in run.errors])


def test_one_agent_serves_concurrent_parent_items() -> None:
    """Fan-out children run the same agent concurrently with independent invocations."""
    agent = _words_agent()
    both = threading.Barrier(2, timeout=30)

    def text(item: str, index: int, inputs: Any, context: Any) -> Any:
        both.wait()
        return {"text": item}

    steps = create_steps()
    each = steps.for_each_pipeline(
        "each",
        pipeline=agent,
        items=lambda inputs, context: ["a b", "c d e"],
        key=lambda item, index: f"item-{index}",
        map_options=text,
        concurrency=2,
    )
    parent = define_pipeline(id="fan", steps=[each], finalize=each)

    assert parent.run_or_raise({}) == ["A B", "C D E"]

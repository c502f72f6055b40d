"""The scripted agent example, run in process: answers, turns, limits, plan and graph."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from tubeless.pipeline import render_plan
from tubeless.testing import MemoryTraceSink

ANSWERS = [
    pytest.param({}, False, "14 characters; HELLO; TUBELESS", id="default-question"),
    pytest.param(
        {"question": "hello tubeless"}, False, "14 characters; HELLO; TUBELESS", id="hello"
    ),
    pytest.param(
        {"question": "missing word"},
        False,
        "12 characters; Observed NOT_FOUND: Word unavailable; WORD",
        id="tool-error",
    ),
    pytest.param({"question": "preview"}, True, "7 characters; PREVIEW", id="dry-run"),
]


def traced_run(module: ModuleType, options: Any, dry_run: bool = False) -> tuple[Any, list[Any]]:
    """Run the scripted agent with an in-memory trace; return the report and the records."""
    sink = MemoryTraceSink()
    run = module.agent.run(options, controls={"dry_run": dry_run}, context={"tracing": sink})
    return run, sink.records


def started(records: list[Any], pipeline_id: str) -> list[Any]:
    """The `pipeline.started` records of runs of `pipeline_id`."""
    return [
        record
        for record in records
        if record["name"] == "pipeline.started" and record["pipelineId"] == pipeline_id
    ]


@pytest.mark.parametrize(("options", "dry_run", "answer"), ANSWERS)
def test_answers_in_two_turns(
    scripted_example: ModuleType, options: Any, dry_run: bool, answer: str
) -> None:
    """Each documented question is answered after exactly two turns (one batch, one finish)."""
    run, records = traced_run(scripted_example, options, dry_run)

    assert run.status == "completed"
    assert run.value == {"answer": answer}
    assert len(started(records, "scripted-agent/turn")) == 2


def test_runs_one_count_and_one_uppercase_call_per_word(scripted_example: ModuleType) -> None:
    """Turn 1 schedules `length` (count) and one `word-<n>` uppercase call per word."""
    _, records = traced_run(scripted_example, {"question": "missing word"})

    counted = started(records, "scripted-agent/tool/count")
    uppercased = started(records, "scripted-agent/tool/uppercase")
    assert [record["itemKey"] for record in counted] == ["length"]
    assert sorted(record["itemKey"] for record in uppercased) == ["word-0", "word-1"]


def test_an_empty_question_counts_zero_characters(scripted_example: ModuleType) -> None:
    """An empty question schedules only the count call and answers `0 characters`."""
    assert scripted_example.agent.run_or_raise({"question": ""}) == {"answer": "0 characters"}


def test_more_than_99_words_exceed_max_calls(scripted_example: ModuleType) -> None:
    """100 words plus the count call exceed `max_calls=100`: the batch is refused whole."""
    run, records = traced_run(scripted_example, {"question": " ".join(["word"] * 100)})

    assert run.status == "failed"
    errors = json.dumps(run.to_dict()["errors"])
    assert "TUBELESS_AGENT_LIMIT_REACHED" in errors
    assert "consumed=0, requested=101" in errors
    assert [record for record in records if "/tool/" in record["pipelineId"]] == []


def test_99_words_fit_max_calls(scripted_example: ModuleType) -> None:
    """99 words plus the count call use exactly the 100 calls allowed."""
    value = scripted_example.agent.run_or_raise({"question": " ".join(["word"] * 99)})

    assert value["answer"].startswith("494 characters; WORD; ")


def test_rejects_a_question_that_is_not_text(scripted_example: ModuleType) -> None:
    """Options validation refuses a non-text question before the agent starts."""
    run = scripted_example.agent.run({"question": 42})

    assert run.status == "failed"
    assert "Expected question text" in json.dumps(run.to_dict()["errors"])


@pytest.mark.parametrize("dry_run", [False, True])
def test_plan_text_is_the_reference_plan(scripted_example: ModuleType, dry_run: bool) -> None:
    """The plan shows one agent step iterating the turn pipeline at most three times."""
    plan = scripted_example.agent.plan({"dry_run": dry_run})

    assert render_plan(plan, explain=False) == (
        f"Pipeline scripted-agent: plan (ok=true, dryRun={str(dry_run).lower()}, steps=1)\n"
        "  - agent: run -> iteration (at most 3) pipeline scripted-agent/turn (3 declared steps)"
    )


def test_plan_carries_limits_and_capabilities(scripted_example: ModuleType) -> None:
    """The plan's agent block has the example's limits and both tools, sorted by name."""
    agent_block = scripted_example.agent.plan().to_dict()["steps"][0]["agent"]

    assert agent_block["limits"] == {
        "maxTurns": 3,
        "maxCalls": 100,
        "maxDecisions": 3,
        "maxDepth": 4,
        "maxConcurrency": 2,
    }
    assert [tool["name"] for tool in agent_block["capabilities"]] == ["count", "uppercase"]


def test_graph_is_one_bounded_agent_step(scripted_example: ModuleType) -> None:
    """The Mermaid graph is the single agent step with its iteration bound."""
    assert scripted_example.agent.to_mermaid() == (
        'flowchart TD\n  step0["agent (at most 3 iterations)"]\n'
    )

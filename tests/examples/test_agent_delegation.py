"""The delegation example: a planner, a researcher subagent and a plain pipeline tool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tubeless.testing import MemoryTraceSink

ROOT = Path(__file__).resolve().parents[2]
TOPIC = ("--", "--topic", "pipelines")


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m tubeless ARGUMENTS` from the checkout."""
    return subprocess.run(
        [sys.executable, "-m", "tubeless", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("topic", "answer"),
    [
        ("pipelines", "pipelines: 2 facts, 11 words"),
        ("agents", "agents: 1 fact, 5 words"),
        ("unknown", "unknown: 1 fact, 2 words"),
    ],
)
def test_the_planner_answers_through_both_tools(
    delegation_example: ModuleType, topic: str, answer: str
) -> None:
    """Research runs as a subagent under the planner's turn; summarizing as a tool run."""
    example = delegation_example
    sink = MemoryTraceSink()

    run = example.planner.run({"topic": topic}, context={"tracing": sink})

    assert run.status == "completed", run.errors
    assert run.value == {"answer": answer}
    started = {r["runId"]: r for r in sink.records if r["name"] == "pipeline.started"}
    researcher = next(r for r in started.values() if r["pipelineId"] == "researcher")
    assert started[researcher["parentRunId"]]["pipelineId"] == "planner/turn"
    assert researcher["itemKey"] == "research-1"
    summarizer = next(r for r in started.values() if r["pipelineId"] == "summarizer")
    assert started[summarizer["parentRunId"]]["pipelineId"] == "planner/tool/summarize"


def test_the_planner_budget_covers_the_researcher(delegation_example: ModuleType) -> None:
    """With `max_calls=1` the researcher's lookup is the tree's second call: refused."""
    example = delegation_example
    tight = example.define_agent(
        id="tight-planner",
        input_schema=example.topic_options,
        result_schema=example.text_answer,
        tools={"research": example.planner_tools["research"]},
        limits={"max_calls": 1},
        initial_state=lambda options: {"topic": options["topic"], "notes": []},
        decide=example.plan_work,
    )

    run = tight.run({})

    assert run.status == "failed"
    assert "Agent max_calls=1 exceeded (consumed=1, requested=1" in repr(run.errors)


@pytest.mark.slow
def test_runs_from_the_cli() -> None:
    """`python -m tubeless run examples/agent_delegation.py -- --topic pipelines` prints it."""
    result = _cli("run", "examples/agent_delegation.py", *TOPIC)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "pipelines: 2 facts, 11 words\n"


def test_plan_explain_shows_the_capability_tree() -> None:
    """`tubeless plan --explain` lists each tool, the subagent with its limits and tools."""
    result = _cli("plan", "--explain", "examples/agent_delegation.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2:] == [
        "      limits: max_turns=3 max_calls=6 max_decisions=100 max_depth=1 max_concurrency=2",
        "      tool research: subagent researcher (max_turns=2 max_calls=2 max_decisions=100"
        " max_depth=4 max_concurrency=1)",
        "        tool lookup",
        "      tool summarize: pipeline summarizer",
    ]

"""Agents are ordinary pipelines for projects and command-line programs."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool
from tubeless.cli._commands._command import define_pipeline_command
from tubeless.cli._project import define_project
from tubeless.errors import SchemaIssues
from tubeless.schema import validator

TEXT = {"type": "string"}


def _options(value: Any) -> Any:
    if not isinstance(value, dict):
        raise SchemaIssues(["Expected an object"])
    question = value.get("question", "hello tubeless")
    if not isinstance(question, str):
        raise SchemaIssues([{"message": "Expected text", "path": ["question"]}])
    return {"question": question}


def _agent() -> Any:
    count = define_tool(
        description="Count characters",
        input_schema=TEXT,
        output_schema={"type": "number"},
        run=lambda text, context: len(text),
    )

    def decide(state: Any, context: Any) -> Any:
        if state["observations"]:
            return {"kind": "finish", "result": state["observations"][0]}
        return {
            "kind": "continue",
            "calls": [{"id": "length", "tool": "count", "input": state["question"]}],
        }

    return define_agent(
        id="counting-agent",
        name="Counting agent",
        input_schema=validator(
            _options,
            json_schema={
                "type": "object",
                "properties": {"question": {"type": "string", "description": "What to count"}},
            },
        ),
        result_schema=validator(lambda value: {"answer": value}, json_schema=TEXT),
        initial_state=lambda options: {"question": options["question"], "observations": []},
        decide=decide,
        reduce=lambda state, outcomes: {
            "question": state["question"],
            "observations": [f"{outcomes[0]['value']} characters"],
        },
        tools={"count": count},
    )


def test_a_project_registers_an_agent_by_its_id() -> None:
    """`define_project` finds the agent by its literal id."""
    agent = _agent()

    project = define_project("demo", [agent])

    assert project.get("counting-agent") is agent


def test_a_command_infers_flags_from_the_agent_options(capsys: pytest.CaptureFixture[str]) -> None:
    """`define_pipeline_command` derives `--question` and prints the summarized answer."""
    command = define_pipeline_command(
        _agent(), reporter=False, summarize=lambda value, values: [value["answer"]]
    )

    assert command.name == "Counting agent"
    assert command.run(["--question", "hello tubeless"]) == {"answer": "14 characters"}
    assert capsys.readouterr().out == "14 characters\n"
    assert command.main(["--question", "abc"]) == 0
    assert capsys.readouterr().out == "3 characters\n"


def test_a_command_dry_run_without_preview_source_fails(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a preview decision source `--dry-run` skips the agent and fails finalization."""
    command = define_pipeline_command(_agent(), reporter=False)

    code = command.main(["--dry-run"])

    assert code == 6
    assert "TUBELESS_REQUIRED_OUTPUTS_MISSING" in capsys.readouterr().err

"""Tests for `tubeless list`, `inspect`, `plan` and `graph`, through the real CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PROJECT_MODULE = """
from tubeless.cli import define_project
from tubeless.pipeline import create_steps, define_pipeline

steps = create_steps()
work = steps.step("work", run=lambda inputs, context: "done")
other = steps.step("other", run=lambda inputs, context: "done")
project = define_project(
    "jobs",
    [define_pipeline(id="work-job", name="Work job", steps=[work]),
     define_pipeline(id="other-job", steps=[other])],
    description="Example jobs.",
)
"""


def test_inspect_prints_identity_and_the_plan_without_explanations(cli: Any) -> None:
    """`inspect` prints pipeline, targets, exact steps and the plan rendered without reasons."""
    cli.write_fixture("pipeline")
    result = cli("inspect", "pipeline.py")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == (
        "Pipeline fixture\n"
        "Targets: publish\n"
        "Exact steps: load, publish\n"
        "Pipeline fixture: plan (ok=true, dryRun=false, steps=2)\n"
        "  - Load Rows [load]: run - Read source rows.\n"
        "  - publish: run - Publish output.\n"
    )


def test_inspect_json_has_ids_and_the_whole_plan(cli: Any) -> None:
    """`inspect --json` gives pipelineId, targetIds, stepIds and the plan's wire form."""
    cli.write_fixture("pipeline")
    result = cli("inspect", "--json", "pipeline.py")
    document = json.loads(result.stdout)
    assert result.code == 0
    assert document["pipelineId"] == "fixture"
    assert document["targetIds"] == ["publish"]
    assert document["stepIds"] == ["load", "publish"]
    assert "commandId" not in document
    steps = document["plan"]["steps"]
    assert [(step["id"], step["dryRun"], step["runtimeSkipPossible"]) for step in steps] == [
        ("load", "run", False),
        ("publish", "skip", True),
    ]


def test_plan_explains_target_selection_only_when_asked(cli: Any) -> None:
    """`plan --target` prints bare dispositions, and the selection reasons with `--explain`."""
    cli.write_fixture("planning", "pipeline.py")
    compact = cli("plan", "pipeline.py", "--target", "publish")
    explained = cli("plan", "pipeline.py", "--target", "publish", "--explain")
    assert compact.stdout == (
        "Pipeline planning-fixture: plan (ok=true, dryRun=false, steps=3)\n"
        "  - load: run\n"
        "  - hint: skip: filtered\n"
        "  - publish: run\n"
    )
    assert explained.stdout == (
        "Pipeline planning-fixture: plan (ok=true, dryRun=false, steps=3)\n"
        "  - load: run (required by publish for target publish)\n"
        "  - hint: skip: filtered (optional-only input to publish for target publish)\n"
        "  - publish: run (target publish)\n"
    )
    assert (compact.code, explained.code) == (0, 0)


def test_plan_json_is_the_complete_dry_run_plan(cli: Any) -> None:
    """`plan --dry-run --json` prints the full plan with dry-run skip reasons."""
    cli.write_fixture("planning", "pipeline.py")
    result = cli("plan", "--target", "publish", "--dry-run", "--json", "pipeline.py")
    plan = json.loads(result.stdout)
    assert result.code == 0
    assert (plan["dryRun"], plan["ok"], plan["errors"]) == (True, True, [])
    by_id = {step["id"]: step for step in plan["steps"]}
    assert by_id["publish"]["skipReason"] == "dry-run"
    assert by_id["hint"]["skipReason"] == "filtered"
    assert by_id["load"]["selectionReasons"] == [
        {"kind": "required-dependency", "dependentId": "publish", "targetId": "publish"}
    ]


def test_plan_errors_exit_5(cli: Any) -> None:
    """An unknown target and `--step` with `--target` are planning errors, exit code 5."""
    cli.write_fixture("planning", "pipeline.py")
    unknown = cli("plan", "pipeline.py", "--target", "missing", "--json")
    conflict = cli("plan", "pipeline.py", "--target", "publish", "--step", "load")
    assert unknown.code == 5
    error = json.loads(unknown.stdout)["errors"][0]
    assert (error["code"], error["kind"], error["phase"]) == (
        "TUBELESS_PLANNING_TARGET_UNKNOWN",
        "selection",
        "planning",
    )
    assert conflict.code == 5
    assert "TUBELESS_PLANNING_SELECTION_CONFLICT" in conflict.stdout
    assert "  ! planning [TUBELESS_PLANNING_SELECTION_CONFLICT]" in conflict.stdout


def test_graph_prints_mermaid_ending_in_one_newline(cli: Any) -> None:
    """`graph` prints the flowchart; `--markdown` fences it; both end in one newline."""
    cli.write_fixture("pipeline")
    raw = cli("graph", "--direction", "LR", "--descriptions", "pipeline.py")
    fenced = cli("graph", "pipeline.py", "--markdown")
    assert raw.stdout == (
        "flowchart LR\n"
        '  step0["Load Rows — Read source rows."]\n'
        '  step1["publish — Publish output."]\n'
        "\n"
        "  step0 --> step1\n"
    )
    assert fenced.stdout == (
        "```mermaid\n"
        "flowchart TD\n"
        '  step0["Load Rows"]\n'
        '  step1["publish"]\n'
        "\n"
        "  step0 --> step1\n"
        "```\n"
    )


def test_graph_rejects_an_unknown_direction_as_a_usage_error(cli: Any) -> None:
    """`--direction XY` exits 1 without loading the module."""
    cli.write("pipeline.py", "raise RuntimeError('must not be imported')\n")
    result = cli("graph", "-d", "XY", "pipeline.py")
    assert result.code == 1
    assert result.stderr.startswith("Error: Argument -d/--direction: invalid choice")
    assert "XY" in result.stderr.splitlines()[0]
    assert "must not be imported" not in result.stderr


def test_a_command_export_wins_over_its_pipeline(cli: Any) -> None:
    """A module exporting a command and its pipeline is planned through the command."""
    cli.write_fixture("greet")
    result = cli("plan", "greet.py")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout.startswith("Pipeline greet: plan (ok=true, dryRun=false, steps=2)\n")


def test_several_candidates_need_an_export_name(cli: Any) -> None:
    """Two pipelines (aliases count once) exit 2 with a hint; `--export` picks one."""
    cli.write(
        "two.py",
        cli.source("pipeline")
        + "alias = pipeline\nsecond = define_pipeline(id='second', steps=[load])\n",
    )
    ambiguous = cli("plan", "two.py")
    chosen = cli("plan", "two.py", "--export", "second")
    assert ambiguous.code == 2
    assert ambiguous.stderr == (
        "Error: Module exports multiple pipelines (pipeline, second); pass --export <name>.\n"
    )
    assert chosen.code == 0
    assert chosen.stdout.startswith("Pipeline second: plan")


def test_export_must_name_a_pipeline_or_command(cli: Any) -> None:
    """`--export` naming nothing, or something else, is a load error."""
    cli.write("pipeline.py", cli.source("pipeline") + "number = 3\n")
    missing = cli("inspect", "-e", "nothing", "pipeline.py")
    wrong = cli("inspect", "-e", "number", "pipeline.py")
    assert (missing.code, missing.stderr) == (2, 'Error: Module does not export "nothing".\n')
    assert wrong.code == 2
    assert wrong.stderr == (
        'Error: Export "number" is not a tubeless pipeline or pipeline command.\n'
    )


def test_registered_ids_come_from_the_project_file(cli: Any) -> None:
    """A bare id is looked up in ./tubeless_project.py; inspect names the registration."""
    cli.write("tubeless_project.py", PROJECT_MODULE)
    inspected = cli("inspect", "work-job")
    graph = cli("graph", "other-job")
    assert inspected.code == 0
    assert inspected.stdout.splitlines()[:2] == ["Command work-job", "Pipeline work-job"]
    assert json.loads(cli("inspect", "--json", "work-job").stdout)["commandId"] == "work-job"
    assert graph.stdout == 'flowchart TD\n  step0["other"]\n'


def test_an_explicit_project_file_and_unknown_ids(cli: Any) -> None:
    """`-p` forces an id lookup; an unregistered id and a missing project file exit 2."""
    project = cli.write("config/project.py", PROJECT_MODULE)
    found = cli("plan", "-p", "config/project.py", "work-job")
    unknown = cli("plan", "-p", "config/project.py", "nope")
    missing = cli("plan", "-p", "absent.py", "work-job")
    assert found.code == 0
    assert unknown.code == 2
    assert unknown.stderr == f'Error: Project file {project} does not register pipeline "nope".\n'
    assert missing.code == 2
    assert "Project file not found" in missing.stderr


def test_export_with_project_is_a_usage_error(cli: Any) -> None:
    """`--export` together with `--project` exits 1 with the command's usage."""
    cli.write("tubeless_project.py", PROJECT_MODULE)
    for command in ("inspect", "plan", "graph", "run"):
        result = cli(command, "-e", "x", "-p", "tubeless_project.py", "work-job")
        assert result.code == 1
        assert result.stderr.startswith(
            "Error: --export cannot be combined with --project; the project file owns export "
            "selection.\n\nusage: tubeless " + command
        )


def test_list_prints_the_project_pipelines(cli: Any) -> None:
    """`list` prints one id (and name) per line; `--json` prints the project."""
    path = cli.write("tubeless_project.py", PROJECT_MODULE)
    text = cli("list")
    document = json.loads(cli("list", "--json").stdout)
    assert (text.code, text.stdout) == (0, "work-job\tWork job\nother-job\n")
    assert document == {
        "id": "jobs",
        "name": "jobs",
        "description": "Example jobs.",
        "pipelines": ["work-job", "other-job"],
        "project": str(path),
    }


def test_list_without_a_project_file_is_a_load_error(cli: Any) -> None:
    """`list` with no project file exits 2."""
    result = cli("list")
    assert result.code == 2
    assert result.stderr.startswith("Error: Project file not found: ")

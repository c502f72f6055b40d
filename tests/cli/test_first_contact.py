"""What a new user meets first on the real CLI: version, printed results, errors, history.

Each test runs `python -m tubeless` in a subprocess on an agent module written to a
temporary directory: one weather tool that fails with `UNKNOWN_CITY` for Atlantis and
divides by zero for Zero, and no `summarize=`.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

AGENT_MODULE = """
from tubeless import ToolError, define_agent, define_pipeline_command, define_tool

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def weather(value, context):
    if value["city"] == "Atlantis":
        raise ToolError("UNKNOWN_CITY", "No city " + value["city"])
    if value["city"] == "Zero":
        return 1 / 0
    return {"city": value["city"], "temp": 20}


def decide(state, context):
    if state["seen"]:
        return {"kind": "finish", "result": {"temps": state["seen"]}}
    calls = [
        {"id": f"c{index}", "tool": "weather", "input": {"city": city}}
        for index, city in enumerate(state["cities"])
    ]
    return {"kind": "continue", "calls": calls}


def reduce(state, outcomes):
    seen = [o["value"]["temp"] if o["ok"] else o["error"]["code"] for o in outcomes]
    return {**state, "seen": seen}


OPTIONS = {
    "type": "object",
    "properties": {"cities": {"type": "array", "items": {"type": "string"}}},
    "required": ["cities"],
}
agent = define_agent(
    id="weather",
    input_schema=OPTIONS,
    result_schema={},
    tools={
        "weather": define_tool(
            description="Weather.", input_schema=CITY, output_schema={}, run=weather
        )
    },
    initial_state=lambda options: {"cities": list(options["cities"]), "seen": []},
    decide=decide,
    reduce=reduce,
)
command = define_pipeline_command(agent, reporter={"mode": "plain"})
"""

TEXT_MODULE = """
from tubeless.cli import define_pipeline_command
from tubeless.pipeline import create_steps, define_pipeline

steps = create_steps()
say = steps.step("say", run=lambda inputs, context: "plain text, not JSON")
pipeline = define_pipeline(id="say", steps=[say])
command = define_pipeline_command(pipeline, reporter=False)
"""


def _bug_line(path: Any) -> int:
    """The line of the division by zero in the written module."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if "1 / 0" in line)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def test_version_prints_the_distribution_and_its_version(cli: Any) -> None:
    """`tubeless --version` and `-V` print `tubeless-pipelines <metadata version>`."""
    expected = f"tubeless-pipelines {metadata.version('tubeless-pipelines')}\n"
    for flag in ("--version", "-V"):
        result = cli(flag)
        assert (result.code, result.stdout, result.stderr) == (0, expected, "")
    assert "--version" in cli("--help").stdout


def test_a_command_without_summarize_prints_its_value(cli: Any) -> None:
    """The finalized value goes to stdout: JSON for data, a string as it is."""
    cli.write("agent.py", AGENT_MODULE)
    cli.write("say.py", TEXT_MODULE)
    data = cli("run", "agent.py", "--", "--cities", "Paris", "--cities", "Atlantis")
    assert data.code == 0, data.stderr
    assert json.loads(data.stdout) == {"temps": [20, "UNKNOWN_CITY"]}
    text = cli("run", "say.py")
    assert (text.code, text.stdout) == (0, "plain text, not JSON\n")


def test_a_tool_bug_prints_its_root_cause_once_with_path_and_place(cli: Any) -> None:
    """One `Error:` line with the root's own code and step path, then where it was raised."""
    path = cli.write("agent.py", AGENT_MODULE)
    result = cli("run", "agent.py", "--", "--cities", "Zero")
    assert result.code == 6
    assert _errors(result.stderr) == [
        "Error: execution at step agent > calls > c0 > tool [TUBELESS_STEP_FAILED] "
        "(ZeroDivisionError): division by zero"
    ]
    assert result.stderr.count("TUBELESS_CHILD_FAILED") == 0
    assert "(status=failed, steps=1, errors=1, failed calls=1)" in result.stderr
    assert f"  raised at {path}:{_bug_line(path)} in weather\n" in result.stderr
    assert "--traceback or TUBELESS_TRACEBACK=1 shows the traceback" in result.stderr
    assert "Traceback" not in result.stderr
    # The progress lines name the root cause once too, not each wrapping child run.
    assert "Child pipeline" not in result.stderr
    assert result.stderr.count("ZeroDivisionError: division by zero") == 2  # call and agent


def test_traceback_flag_and_environment_show_the_original_traceback(cli: Any) -> None:
    """`--traceback` and `TUBELESS_TRACEBACK=1` print the tool's own traceback."""
    path = cli.write("agent.py", AGENT_MODULE)
    flagged = cli("run", "--traceback", "agent.py", "--", "--cities", "Zero")
    by_env = cli("run", "agent.py", "--", "--cities", "Zero", env={"TUBELESS_TRACEBACK": "1"})
    for result in (flagged, by_env):
        assert result.code == 6
        assert "Traceback (most recent call last):" in result.stderr
        assert f'File "{path}", line {_bug_line(path)}, in weather' in result.stderr
        assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
        assert "shows the traceback" not in result.stderr


def test_history_shows_tool_codes_failed_calls_newest_first_and_a_limit(cli: Any) -> None:
    """The list is newest first by run tree, counts failed calls, and `--limit` cuts it."""
    cli.write("agent.py", AGENT_MODULE)
    first = cli("run", "--store", "runs.db", "agent.py", "--", "--cities", "Paris")
    three = ["--cities", "Atlantis"] * 3
    second = cli("run", "--store", "runs.db", "agent.py", "--", *three)
    assert (first.code, second.code) == (0, 0)
    assert "errors=0, failed calls=3)" in second.stderr
    listed = cli("history", "--store", "runs.db").stdout.splitlines()
    roots = [line for line in listed if line.startswith("weather:")]
    assert len(roots) == 2
    assert roots[0].endswith("  3 failed calls")  # the second run, listed first
    assert not roots[1].endswith("failed calls")
    assert listed[0] == roots[0]
    latest = cli("history", "--store", "runs.db", "--limit", "1").stdout.splitlines()
    assert latest[0] == roots[0]
    assert [line for line in latest if line.startswith("weather:")] == roots[:1]
    assert len(latest) == 1 + 2 + 3  # the agent, its two turns and three tool calls
    as_json = json.loads(cli("history", "--store", "runs.db", "--json", "--limit", "1").stdout)
    assert as_json["runs"][0]["failedCalls"] == 3
    tool_run = next(line for line in latest if line.startswith("weather/tool/weather:"))
    detail = cli("history", "--store", "runs.db", tool_run.split()[0]).stdout
    assert detail.endswith("Error:\n  UNKNOWN_CITY  No city Atlantis\n")
    rejected = cli("history", "--store", "runs.db", "--limit", "0")
    assert rejected.code == 1
    assert rejected.stderr.startswith("Error: Argument --limit: must be at least 1, got '0'.")


def test_run_without_arguments_names_only_the_required_positional(cli: Any) -> None:
    """`run` alone exits 1 saying FILE|ID is required; APP-ARG is optional and not named."""
    result = cli("run")
    assert result.code == 1
    first = result.stderr.splitlines()[0]
    assert first == (
        "Error: The following arguments are required: FILE|ID. Application flags belong after --."
    )


def test_run_prints_the_run_id_and_history_takes_it_bare(cli: Any) -> None:
    """`run` ends with `Run id: ...` on stderr; `history` finds the run by its UUID alone."""
    cli.write("agent.py", AGENT_MODULE)
    result = cli("run", "--store", "runs.db", "agent.py", "--", "--cities", "Paris")
    assert result.code == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("Run id: ")]
    run_id = line.split()[2]
    bare = run_id.split(":", 1)[1]
    assert line == f"Run id: {run_id} (tubeless history --store runs.db {bare})"
    detail = cli("history", "--store", "runs.db", bare)
    assert detail.code == 0, detail.stderr
    assert detail.stdout.startswith(f"Run {run_id}\nPipeline weather\nStatus completed\n")
    failed = cli("run", "agent.py", "--", "--cities", "Zero")
    assert failed.stderr.count("Run id: weather:") == 1  # a failed run names itself too


def test_history_of_an_empty_store_says_so(cli: Any) -> None:
    """An empty store prints a line saying no runs are recorded, not nothing."""
    from tubeless.trace import SqliteTraceStore

    SqliteTraceStore(cli.directory / "empty.db").close()
    result = cli("history", "--store", "empty.db")
    assert (result.code, result.stdout) == (0, "No runs recorded in empty.db.\n")
    assert json.loads(cli("history", "--store", "empty.db", "--json").stdout) == {"runs": []}


def test_a_dry_run_of_an_agent_without_preview_says_why_it_fails(cli: Any) -> None:
    """The finalization error names the missing dry-run preview (`dry_run=`)."""
    cli.write("agent.py", AGENT_MODULE)
    result = cli("run", "agent.py", "--", "--cities", "Paris", "--dry-run")
    assert result.code == 6
    assert _errors(result.stderr) == [
        "Error: finalization at step __finalize__ [TUBELESS_REQUIRED_OUTPUTS_MISSING]: "
        "Pipeline weather finalizer requires outputs that were not published: "
        "agent (skipped by the dry run: it has no dry-run preview, dry_run=)"
    ]


def test_an_agent_commands_help_explains_the_run_controls(cli: Any) -> None:
    """`-- --help` of an agent says what `--step`, `--dry-run` and `--max-concurrency` do."""
    cli.write(
        "agent.py",
        AGENT_MODULE.replace(
            "    reduce=reduce,\n", "    reduce=reduce,\n    limits={'max_concurrency': 2},\n"
        ),
    )
    result = cli("run", "agent.py", "--", "--help")
    assert result.code == 0
    text = " ".join(result.stdout.split())
    assert "This command runs an agent: one step, agent," in text
    assert "--dry-run skips it, as it has no dry_run= preview, so the run fails" in text
    assert "--step and --target can only name that step, so they run the whole agent" in text
    assert "the agent runs at most 2 tool call(s) at once (its max_concurrency limit)" in text


def test_run_help_says_trace_replaces_and_store_appends(cli: Any) -> None:
    """`run --help` says a `--trace` file is replaced and a `--store` keeps earlier runs."""
    text = " ".join(cli("run", "--help").stdout.split())
    assert "(a file already there is replaced)" in text
    assert "(created when missing; earlier runs are kept)" in text


SUBAGENT_MODULE = """
from tubeless import define_agent, define_pipeline_command, pipeline_tool


def bad_decide(state, context):
    raise RuntimeError("the model is down")


researcher = define_agent(
    id="researcher", input_schema={"type": "object"}, result_schema={},
    initial_state=lambda options: {}, decide=bad_decide,
)


def decide(state, context):
    if context.options.get("solo"):
        raise RuntimeError("no decision")
    return {"kind": "continue", "calls": [{"id": "ask-1", "tool": "research", "input": {}}]}


planner = define_agent(
    id="planner",
    input_schema={"type": "object", "properties": {"solo": {"type": "boolean"}}},
    result_schema={},
    initial_state=lambda options: {},
    decide=decide,
    tools={"research": pipeline_tool(researcher, description="Research.")},
)
command = define_pipeline_command(planner, reporter={"mode": "plain"})
"""


def test_a_subagent_failure_names_the_call_and_the_subagent(cli: Any) -> None:
    """The error's path goes through the call id and the subagent's id."""
    cli.write("planner.py", SUBAGENT_MODULE)
    result = cli("run", "planner.py")
    assert result.code == 6
    assert _errors(result.stderr) == [
        "Error: execution at step agent > calls > ask-1 > researcher > agent > decide "
        "[TUBELESS_STEP_FAILED] (RuntimeError): the model is down"
    ]


def test_a_decide_failure_counts_no_failed_calls(cli: Any) -> None:
    """When `decide` fails no tool ran, so the summary has no `failed calls`."""
    cli.write("planner.py", SUBAGENT_MODULE)
    result = cli("run", "planner.py", "--", "--solo")
    assert result.code == 6
    assert "(status=failed, steps=1, errors=1)" in result.stderr
    assert "failed calls" not in result.stderr

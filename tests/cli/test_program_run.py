"""Tests for `tubeless run`, through the real CLI in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tubeless.trace import SqliteTraceStore, read_ndjson, validate_record

pytestmark = pytest.mark.slow

PROJECT_MODULE = """
from tubeless.cli import define_project
from tubeless.pipeline import create_steps, define_pipeline

typed = create_steps(
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
)
echo = typed.step("echo", run=lambda inputs, context: context.options["message"].upper())
untyped = create_steps().step("work", run=lambda inputs, context: 1)
project = define_project(
    "jobs",
    [define_pipeline(id="echo", steps=[echo]), define_pipeline(id="untyped", steps=[untyped])],
)
"""


def test_a_run_prints_progress_on_stderr_and_the_summary_on_stdout(cli: Any) -> None:
    """Progress and logs go to stderr; stdout holds only the summary lines."""
    cli.write_fixture("greet")
    result = cli("run", "greet.py", "--", "--name", "Ada")
    assert result.code == 0
    assert result.stdout == "summary: hello Ada\n"
    assert "Pipeline greet: starting (2 steps, dryRun=false)" in result.stderr
    assert "greeting Ada" in result.stderr
    assert "Pipeline greet: done in" in result.stderr


def test_every_kind_of_inferred_flag_reaches_the_options(cli: Any) -> None:
    """Strings, bounded integers, booleans, repeatable arrays and choices are parsed."""
    cli.write_fixture("greet")
    result = cli(
        "run", "greet.py", "--", "--name", "Ada", "--times", "2", "--shout",
        "--tags", "a", "--tags", "b", "--style", "fancy",
    )  # fmt: skip
    assert (result.code, result.stdout) == (0, "summary: HELLO ADA HELLO ADA #a #b\n")


@pytest.mark.parametrize(
    ("app_args", "message"),
    [
        (["--name", "x", "--times", "9"], "Error: Argument --times: must be at most 3, got '9'"),
        (["--name", "x", "--times", "1.5"], "Error: Argument --times: must be an integer"),
        (["--name", "x", "--style", "odd"], "Error: Argument --style: invalid choice"),
        ([], "Error: The following arguments are required: --name"),
        (["--name", "x", "--bogus"], "Error: Unrecognized arguments: --bogus"),
        (["--name", "x", "--step", "greet", "--target", "polish"], "Error: --step and --target"),
    ],
)
def test_bad_application_arguments_exit_4_with_the_help(
    cli: Any, app_args: list[str], message: str
) -> None:
    """A rejected argument after `--` prints `Error:` lines then the command help; exit 4."""
    cli.write_fixture("greet")
    result = cli("run", "greet.py", "--", *app_args)
    assert result.code == 4
    assert result.stderr.startswith(message)
    assert "\n\nusage: greet" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def test_environment_defaults_apply_and_are_never_echoed(cli: Any) -> None:
    """An env-backed flag reads its variable; a bad value is reported without the value."""
    cli.write_fixture("greet")
    used = cli("run", "greet.py", "--", "--name", "Ada", env={"GREET_TIMES": "2"})
    overridden = cli(
        "run", "greet.py", "--", "--name", "Ada", "--times", "1", env={"GREET_TIMES": "2"}
    )
    rejected = cli("run", "greet.py", "--", "--name", "Ada", env={"GREET_TIMES": "s3cr3t-token"})
    assert used.stdout == "summary: hello Ada hello Ada\n"
    assert overridden.stdout == "summary: hello Ada\n"
    assert rejected.code == 4
    assert rejected.stderr.startswith("Error: Environment variable GREET_TIMES must be a number.")
    assert "s3cr3t-token" not in rejected.stderr + rejected.stdout


def test_command_help_after_the_dashes_exits_0(cli: Any) -> None:
    """`run FILE -- --help` prints the command's own help on stdout."""
    cli.write_fixture("greet")
    result = cli("run", "greet.py", "--", "--help")
    assert result.code == 0
    assert result.stdout.startswith("usage: greet [-h] --name NAME")
    assert "Who to greet (required)." in result.stdout
    assert "--max-concurrency N" in result.stdout


def test_application_flags_before_the_dashes_are_a_usage_error(cli: Any) -> None:
    """An unknown flag of the program exits 1 and says where application flags belong."""
    cli.write_fixture("greet")
    result = cli("run", "greet.py", "--name", "Ada")
    assert result.code == 1
    assert result.stderr.splitlines()[0] == (
        "Error: Unrecognized arguments: --name Ada. Application flags belong after --."
    )


def test_a_failed_run_prints_each_run_error_and_exits_6(cli: Any) -> None:
    """A failing step gives one formatted `Error:` line per run error and exit 6."""
    cli.write_fixture("greet")
    result = cli("run", "greet.py", "--", "--name", "x", "--fail")
    assert result.code == 6
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: execution at step greet [TUBELESS_STEP_FAILED] (RuntimeError): greeting refused"
    ]
    assert "Traceback" not in result.stderr


def test_trace_to_stdout_keeps_stdout_pure_ndjson(cli: Any) -> None:
    """With `--trace -` every stdout line is a valid record; everything else is on stderr."""
    cli.write_fixture("greet")
    result = cli("run", "--trace", "-", "greet.py", "--", "--name", "Ada")
    assert result.code == 0
    lines = result.stdout.splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        validate_record(record)
    assert records[0]["name"] == "pipeline.started"
    assert records[-1]["name"] == "pipeline.completed"
    assert "summary: hello Ada" in result.stderr
    assert "Pipeline greet: starting" in result.stderr


def test_trace_to_a_file_and_store_together(cli: Any) -> None:
    """`--trace FILE --store DB` writes the same records to both."""
    cli.write_fixture("greet")
    result = cli(
        "run", "--trace", "out/trace.ndjson", "--store", "runs.sqlite", "greet.py",
        "--", "--name", "Ada",
    )  # fmt: skip
    assert (result.code, result.stdout) == (0, "summary: hello Ada\n")
    written = read_ndjson(cli.directory / "out/trace.ndjson")
    with SqliteTraceStore(cli.directory / "runs.sqlite", read_only=True) as store:
        assert store.events() == written
    assert [record["name"] for record in written][-1] == "pipeline.completed"


def _store_with_one_run(cli: Any) -> Path:
    cli.write_fixture("greet")
    assert cli("run", "--store", "runs.sqlite", "greet.py", "--", "--name", "A").code == 0
    return Path(cli.directory / "runs.sqlite")


@pytest.mark.parametrize(
    ("store", "trace"),
    [
        ("runs.sqlite", "runs.sqlite"),
        ("runs.sqlite", "./sub/../runs.sqlite"),
        ("runs.sqlite", "runs.sqlite-wal"),
        ("runs.sqlite", "runs.sqlite-journal"),
        ("runs.sqlite", "link.sqlite"),
        ("runs.sqlite", "hard.sqlite"),
        ("link.sqlite", "runs.sqlite-shm"),
        ("link.sqlite", "link.sqlite-wal"),
    ],
)
def test_store_and_trace_on_one_file_are_refused(cli: Any, store: str, trace: str) -> None:
    """The same path, a sidecar, a symlink or a hard link is a usage error; nothing is written."""
    database = _store_with_one_run(cli)
    (cli.directory / "sub").mkdir()
    (cli.directory / "link.sqlite").symlink_to(database)
    os.link(database, cli.directory / "hard.sqlite")
    before = database.read_bytes()
    result = cli("run", "--store", store, "--trace", trace, "greet.py", "--", "--name", "B")
    assert result.code == 1
    assert result.stderr.startswith("Error: --store and --trace cannot write to the same file.")
    assert database.read_bytes() == before
    assert not (cli.directory / "runs.sqlite-journal").exists()


def test_store_and_trace_on_different_files_are_accepted(cli: Any) -> None:
    """Distinct files, even with similar names, are composed."""
    _store_with_one_run(cli)
    result = cli(
        "run", "--store", "runs.sqlite", "--trace", "runs.sqlite.ndjson", "greet.py",
        "--", "--name", "B",
    )  # fmt: skip
    assert result.code == 0


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.02)


def test_sigint_cancels_the_run_records_it_and_exits_7(cli: Any) -> None:
    """The first SIGINT sets the run's signal, prints one line; the run ends cancelled, exit 7."""
    cli.write_fixture("blocked")
    marker = cli.directory / "started"
    process = cli.spawn("run", "--store", "runs.sqlite", "blocked.py", "--", "--marker", "started")
    try:
        _wait_for(marker, process)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 7
    assert stderr.count("SIGINT received; cancelling pipeline work.\n") == 1
    assert "Error: execution at step block [TUBELESS_RUN_CANCELLED]" in stderr
    assert stdout == ""
    history = json.loads(cli("history", "--store", "runs.sqlite", "--json").stdout)
    assert [run["status"] for run in history["runs"]] == ["cancelled"]


STUCK_MODULE = """
import pathlib
import threading

from tubeless.cli import define_pipeline_command
from tubeless.pipeline import create_steps, define_pipeline


def stuck(inputs, context):
    pathlib.Path("started").write_text("yes")
    threading.Event().wait()  # ignores the run's signal on purpose


step = create_steps().step("stuck", run=stuck)
command = define_pipeline_command(define_pipeline(id="stuck", steps=[step]))
"""


def test_a_second_sigint_kills_a_run_that_ignores_cancellation(cli: Any) -> None:
    """After the first SIGINT default handling is back, so a second one ends the process."""
    cli.write("stuck.py", STUCK_MODULE)
    process = cli.spawn("run", "stuck.py")
    try:
        _wait_for(cli.directory / "started", process)
        process.send_signal(signal.SIGINT)
        assert process.stderr is not None
        for line in process.stderr:
            if line == "SIGINT received; cancelling pipeline work.\n":
                break
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGINT


def test_definition_errors_at_import_exit_3(cli: Any) -> None:
    """A `PipelineDefinitionError` raised while importing the module exits 3."""
    cli.write(
        "broken.py",
        """
        from tubeless.pipeline import create_steps, define_pipeline
        steps = create_steps()
        a = steps.step("a", run=lambda i, c: 1)
        pipeline = define_pipeline(id="broken", steps=[a, steps.step("a", run=lambda i, c: 2)])
        """,
    )
    for command in ("run", "plan"):
        result = cli(command, "broken.py")
        assert result.code == 3
        assert result.stderr.startswith("Error: Invalid pipeline broken: definition")
        assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n", "Error: Cannot import {path}: "),
        ("import not_a_module_anywhere\n", "Error: Cannot import {path}: No module named"),
        ("raise SystemExit(3)\n", "Error: Cannot import {path}: 3"),
    ],
)
def test_import_failures_exit_2_with_one_line(cli: Any, source: str, message: str) -> None:
    """A module that cannot be imported gives one `Error:` line and exit 2, no traceback."""
    path = cli.write("bad.py", source)
    result = cli("run", "bad.py")
    assert result.code == 2
    assert result.stderr.startswith(message.format(path=path))
    assert len(result.stderr.splitlines()) == 1


def test_missing_files_and_missing_commands_exit_2(cli: Any) -> None:
    """A missing file, and a module that exports only a pipeline, cannot be run."""
    cli.write_fixture("pipeline")
    missing = cli("run", "absent.py")
    bare = cli("run", "absent")
    pipeline_only = cli("run", "pipeline.py")
    assert (missing.code, bare.code, pipeline_only.code) == (2, 2, 2)
    assert missing.stderr == f"Error: Module file not found: {cli.directory / 'absent.py'}\n"
    assert "no tubeless_project.py" in bare.stderr
    assert pipeline_only.stderr == (
        "Error: Module does not export a tubeless pipeline command (it exports a pipeline: "
        "wrap it with define_pipeline_command to run it).\n"
    )


def test_uninferable_options_surface_as_a_load_error(cli: Any) -> None:
    """A command whose options schema has a union fails at import with exit 2."""
    cli.write(
        "union.py",
        """
        from tubeless.cli import define_pipeline_command
        from tubeless.pipeline import create_steps, define_pipeline
        schema = {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}]}}}
        steps = create_steps(schema)
        command = define_pipeline_command(
            define_pipeline(id="u", steps=[steps.step("s", run=lambda i, c: 1)])
        )
        """,
    )
    result = cli("run", "union.py")
    assert result.code == 2
    assert "Cannot infer CLI flags for v: union and conditional schemas need an explicit" in (
        result.stderr
    )


def test_project_pipelines_run_with_inferred_flags(cli: Any) -> None:
    """A registered pipeline with an options schema gets an automatic command."""
    cli.write("tubeless_project.py", PROJECT_MODULE)
    result = cli("run", "echo", "--", "--message", "hi")
    untyped = cli("run", "untyped")
    # No summarize=: the finalized value is printed.
    assert (result.code, result.stdout) == (0, "HI\n")
    assert "Pipeline echo: done in" in result.stderr
    assert untyped.code == 2
    assert untyped.stderr.startswith('Error: Cannot derive a CLI for project pipeline "untyped"')


def test_the_interactive_reporter_draws_a_final_frame_on_a_terminal(cli: Any) -> None:
    """On a pseudo-terminal the run redraws one frame whose final form shows every step done."""
    pexpect = pytest.importorskip("pexpect")
    cli.write_fixture("greet")
    environment = cli.environment({"TERM": "xterm-256color", "LANG": "C.UTF-8"})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "tubeless", "run", "greet.py", "--", "--name", "Ada"],
        cwd=str(cli.directory),
        env=environment,
        encoding="utf-8",
        dimensions=(24, 100),
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    output = _without_escapes(child.before or "")
    assert child.exitstatus == 0
    final = output[output.rindex("Pipeline greet (2 steps") :]  # the last frame drawn
    assert "(status=completed, steps=2, errors=0)" in final
    assert final.index("✓ greet") < final.index("✓ polish") < final.index("done in")
    assert "summary: hello Ada" in output


def _without_escapes(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", text)

"""Shared fixtures for the CLI tests: small pipeline modules and a runner for the real CLI."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

# The plan/inspect/graph fixture of the reference's program tests.
PIPELINE_MODULE = """
from tubeless.pipeline import create_steps, define_pipeline

steps = create_steps()
load = steps.step("load", name="Load Rows", description="Read source rows.", run=lambda i, c: 1)
publish = steps.step(
    "publish",
    description="Publish output.",
    depends_on=[load],
    dry_run="skip",
    skip=lambda inputs, context: None,
    run=lambda inputs, context: 2,
)
pipeline = define_pipeline(id="fixture", steps=[load, publish])
"""

# Target selection with an optional-only input.
PLANNING_MODULE = """
from tubeless.pipeline import create_steps, define_pipeline

steps = create_steps()
load = steps.step("load", run=lambda i, c: 1)
hint = steps.step("hint", run=lambda i, c: 2)
publish = steps.step(
    "publish", depends_on=[load], optional_depends_on=[hint], dry_run="skip", run=lambda i, c: 3
)
pipeline = define_pipeline(id="planning-fixture", steps=[load, hint, publish], targets=[publish])
"""

# A pipeline command with one flag of every kind.
GREET_MODULE = """
from tubeless.cli import define_pipeline_command
from tubeless.pipeline import create_steps, define_pipeline

OPTIONS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Who to greet"},
        "times": {"type": "integer", "minimum": 1, "maximum": 3, "default": 1},
        "shout": {"type": "boolean", "description": "Greet in capitals"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "style": {"enum": ["plain", "fancy"], "default": "plain"},
        "fail": {"type": "boolean"},
    },
    "required": ["name"],
}
steps = create_steps(OPTIONS)


def greet(inputs, context):
    options = context.options
    if options["fail"]:
        raise RuntimeError("greeting refused")
    context.log.info(f"greeting {options['name']}")
    text = " ".join([f"hello {options['name']}"] * options["times"])
    return text.upper() if options["shout"] else text


def polish(inputs, context):
    tags = "".join(f" #{tag}" for tag in context.options.get("tags", []))
    return inputs["greet"] + tags


greet_step = steps.step("greet", run=greet)
polish_step = steps.step("polish", depends_on=[greet_step], run=polish)
pipeline = define_pipeline(id="greet", steps=[greet_step, polish_step])
command = define_pipeline_command(
    pipeline,
    overrides={"times": {"env": "GREET_TIMES"}},
    summarize=lambda value, values: [f"summary: {value}"],
)
"""

# A run that blocks until its signal is set, after writing a marker file.
BLOCKED_MODULE = """
import pathlib

from tubeless.cli import define_pipeline_command
from tubeless.errors import RunCancelledError
from tubeless.pipeline import create_steps, define_pipeline

steps = create_steps(
    {"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]}
)


def wait(inputs, context):
    pathlib.Path(context.options["marker"]).write_text("started")
    context.signal.wait()
    raise RunCancelledError("stopped by the run's signal")


block = steps.step("block", run=wait)
after = steps.step("after", depends_on=[block], run=lambda inputs, context: 1)
command = define_pipeline_command(define_pipeline(id="blocked", steps=[block, after]))
"""


FIXTURE_MODULES = {
    "pipeline": PIPELINE_MODULE,
    "planning": PLANNING_MODULE,
    "greet": GREET_MODULE,
    "blocked": BLOCKED_MODULE,
}


@dataclasses.dataclass(frozen=True)
class CliResult:
    """What one CLI process did."""

    code: int
    stdout: str
    stderr: str


def cli_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: no colour forcing, no CI, no stray flags."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("FORCE_COLOR", "NO_COLOR", "CI", "GREET_TIMES", "COLUMNS")
    }
    environment["PYTHONIOENCODING"] = "utf-8"
    environment.update(extra or {})
    return environment


class Cli:
    """Runs `python -m tubeless` in a directory and writes modules there."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, name: str, source: str) -> Path:
        """Write `source` (dedented) to `name` in the directory."""
        path = self.directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment CLI subprocesses get, plus `extra`."""
        return cli_environment(extra)

    def source(self, fixture: str) -> str:
        """The source of a fixture module: `pipeline`, `planning`, `greet` or `blocked`."""
        return FIXTURE_MODULES[fixture]

    def write_fixture(self, fixture: str, name: str | None = None) -> Path:
        """Write a fixture module as `name` (default `<fixture>.py`)."""
        return self.write(name or f"{fixture}.py", FIXTURE_MODULES[fixture])

    def spawn(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        """Start the CLI with `args` without waiting (stdout and stderr are pipes)."""
        return subprocess.Popen(
            [sys.executable, "-m", "tubeless", *args],
            cwd=self.directory,
            env=cli_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def __call__(self, *args: str, env: Mapping[str, str] | None = None) -> CliResult:
        """Run the CLI with `args` and wait for it."""
        completed = subprocess.run(
            [sys.executable, "-m", "tubeless", *args],
            cwd=self.directory,
            env=cli_environment(env),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )
        return CliResult(completed.returncode, completed.stdout, completed.stderr)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A CLI runner working in a fresh directory."""
    return Cli(tmp_path)

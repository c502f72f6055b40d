"""The examples through the real CLI, `python -m tubeless`, in a subprocess."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("tubeless.__main__") is None:
    pytest.skip("python -m tubeless is not available yet", allow_module_level=True)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SCRIPTED_PLAN = (
    "Pipeline scripted-agent: plan (ok=true, dryRun=false, steps=1)\n"
    "  - agent: run -> iteration (at most 3) pipeline scripted-agent/turn (3 declared steps)\n"
)


def tubeless(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m tubeless ARGS` from the repository root, without OpenAI credentials."""
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("OPENAI_")
    }
    return subprocess.run(
        [sys.executable, "-m", "tubeless", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("arguments", "answer"),
    [
        (["--question", "hello tubeless"], "14 characters; HELLO; TUBELESS"),
        (
            ["--question", "missing word"],
            "12 characters; Observed NOT_FOUND: Word unavailable; WORD",
        ),
        (["--dry-run", "--question", "preview"], "7 characters; PREVIEW"),
        ([], "14 characters; HELLO; TUBELESS"),
    ],
)
def test_run_prints_the_bare_answer(arguments: list[str], answer: str) -> None:
    """`run examples/agent.py -- ARGS` prints only the answer line on stdout."""
    result = tubeless("run", "examples/agent.py", "--", *arguments)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{answer}\n"


def test_plan_prints_the_reference_plan() -> None:
    """`plan examples/agent.py` prints the two plan lines."""
    result = tubeless("plan", "examples/agent.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout == SCRIPTED_PLAN


def test_inspect_names_the_pipeline_and_its_plan() -> None:
    """`inspect examples/agent.py` prints the pipeline, its target and step, then the plan."""
    result = tubeless("inspect", "examples/agent.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Pipeline scripted-agent\nTargets: agent\nExact steps: agent\n")
    assert result.stdout.endswith(SCRIPTED_PLAN)


def test_graph_prints_mermaid() -> None:
    """`graph examples/agent.py` prints the one-step Mermaid graph."""
    result = tubeless("graph", "examples/agent.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == 'flowchart TD\n  step0["agent (at most 3 iterations)"]'


def test_plans_the_openai_agent_from_the_project_without_credentials() -> None:
    """`plan openai-agent -p examples/tubeless_project.py` works with no OpenAI variables."""
    result = tubeless("plan", "openai-agent", "-p", "examples/tubeless_project.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Pipeline openai-agent: plan (ok=true, dryRun=false, steps=1)\n"
        "  - agent: run -> iteration (at most 6) pipeline openai-agent/turn (3 declared steps)\n"
    )


def test_the_openai_dry_run_plan_skips_the_agent() -> None:
    """`plan --dry-run` of the OpenAI agent, which has no preview source, skips its step."""
    result = tubeless("plan", "--dry-run", "openai-agent", "-p", "examples/tubeless_project.py")

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Pipeline openai-agent: plan (ok=true, dryRun=true, steps=1)\n"
        "  - agent: skip: dry-run -> iteration (at most 6) pipeline openai-agent/turn"
        " (3 declared steps)\n"
    )

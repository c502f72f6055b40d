"""The pytest plugin, in a throwaway project run by pytest in a subprocess."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import tubeless
from tubeless.pytest_plugin import cassette_path

pytestmark = pytest.mark.slow

PROJECT_TEST = '''
"""A test of an agent, replayed from its cassette after the first run."""

import os
import pathlib

from tubeless import define_agent, define_tool

LOG = pathlib.Path(__file__).parent / "decide.log"


def decide(state, context):
    with LOG.open("a") as log:
        log.write(f"turn {context.turn}\\n")
    if state["seen"]:
        return {"kind": "finish", "result": state["seen"][0]["value"]}
    return {"kind": "continue", "calls": [{"id": "c1", "tool": "shout", "input": "hi"}]}


def shout(value, context):
    return value + os.environ.get("SHOUT_SUFFIX", "!")


agent = define_agent(
    id="plugin-agent",
    input_schema={"type": "object"},
    result_schema={"type": "string"},
    initial_state=lambda options: {"seen": []},
    decide=decide,
    tools={"shout": define_tool(
        description="Shout", input_schema={"type": "string"},
        output_schema={"type": "string"}, run=shout,
    )},
    reduce=lambda state, outcomes: {"seen": list(outcomes)},
)


def test_shouts(tubeless_cassette):
    assert agent.run_or_raise({}, context={"cassette": tubeless_cassette}) == "hi!"
'''


def _plugin_arguments() -> list[str]:
    """`-p tubeless.pytest_plugin` unless the installed package registers the entry point."""
    points = importlib.metadata.entry_points(group="pytest11")
    if any(point.value == "tubeless.pytest_plugin" for point in points):
        return []
    return ["-p", "tubeless.pytest_plugin"]


def _pytest(project: pathlib.Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    source = str(pathlib.Path(tubeless.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, *_plugin_arguments(), *arguments],
        cwd=project,
        env={**os.environ, "PYTHONPATH": path, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    """A project with one agent test that logs every `decide` call."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", "utf-8")
    (tmp_path / "test_shouting.py").write_text(textwrap.dedent(PROJECT_TEST), "utf-8")
    return tmp_path


def _decides(project: pathlib.Path) -> int:
    log = project / "decide.log"
    return len(log.read_text("utf-8").splitlines()) if log.exists() else 0


def test_records_replays_and_records_again(project: pathlib.Path) -> None:
    """The first run records beside the test, the second replays, `--tubeless-record` redoes."""
    first = _pytest(project)
    assert first.returncode == 0, first.stdout + first.stderr
    cassette = project / "cassettes" / "test_shouting" / "test_shouts.json"
    assert cassette.is_file() and _decides(project) == 2
    recorded = cassette.read_text("utf-8")
    second = _pytest(project)
    assert second.returncode == 0, second.stdout + second.stderr
    assert _decides(project) == 2
    third = _pytest(project, "--tubeless-record")
    assert third.returncode == 0, third.stdout + third.stderr
    assert _decides(project) == 4 and cassette.read_text("utf-8") == recorded


def test_a_changed_tool_fails_the_replayed_test(project: pathlib.Path) -> None:
    """After recording, a tool that returns something else fails the test with the divergence."""
    assert _pytest(project).returncode == 0
    changed = _pytest(project, SHOUT_SUFFIX="?")
    assert changed.returncode == 1
    assert "TUBELESS_REPLAY_DIVERGED" in changed.stdout
    assert "'plugin-agent', turn 1, call 'c1'" in changed.stdout
    assert _decides(project) == 2


def test_the_path_is_safe_for_parametrized_names() -> None:
    """Parametrize ids with spaces or slashes become one file name beside the test."""
    path = cassette_path(pathlib.Path("/p/tests/test_a.py"), "test_x[a b/c]")
    assert path == pathlib.Path("/p/tests/cassettes/test_a/test_x[a_b_c].json")

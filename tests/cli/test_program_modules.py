"""Tests for importing module files and picking their exports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tubeless.cli import define_pipeline_command, define_project
from tubeless.cli._program._modules import (
    import_file,
    module_exports,
    select_command,
    select_plan_source,
    select_project,
)
from tubeless.errors import CliLoadError
from tubeless.pipeline import create_steps, define_pipeline


def _pipeline(pipeline_id: str) -> object:
    return define_pipeline(id=pipeline_id, steps=[create_steps().step("s", run=lambda i, c: 1)])


@pytest.fixture(autouse=True)
def _restore_import_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_importing_a_file_puts_its_directory_on_the_path(tmp_path: Path) -> None:
    """A module imports its sibling modules, as `python FILE` allows."""
    (tmp_path / "helper_for_cli_test.py").write_text("VALUE = 41\n")
    path = tmp_path / "main_module.py"
    path.write_text("import helper_for_cli_test\nvalue = helper_for_cli_test.VALUE + 1\n")
    module = import_file(path)
    assert module.value == 42
    assert import_file(path) is module
    sys.modules.pop("helper_for_cli_test", None)


def test_import_failures_are_load_errors(tmp_path: Path) -> None:
    """A missing file exits 2; a definition error exits 3; other failures exit 2."""
    with pytest.raises(CliLoadError) as missing:
        import_file(tmp_path / "absent.py")
    assert missing.value.exit_code == 2
    broken = tmp_path / "broken_definition.py"
    broken.write_text(
        "from tubeless.pipeline import create_steps, define_pipeline\n"
        "define_pipeline(id='x', steps=[])\n"
        "s = create_steps().step('a', run=lambda i, c: 1)\n"
        "define_pipeline(id='x', steps=[s, s])\n"
    )
    with pytest.raises(CliLoadError) as definition:
        import_file(broken)
    assert definition.value.exit_code == 3
    failing = tmp_path / "failing.py"
    failing.write_text("raise RuntimeError('bad\\nmodule')\n")
    with pytest.raises(CliLoadError) as other:
        import_file(failing)
    assert (other.value.exit_code, str(other.value)) == (2, f"Cannot import {failing}: bad module")


def test_exports_follow_all_or_skip_private_names(tmp_path: Path) -> None:
    """`__all__` decides the exports when present, else names without a leading `_`."""
    listed = tmp_path / "listed.py"
    listed.write_text("__all__ = ['a']\na = 1\nb = 2\n")
    unlisted = tmp_path / "unlisted.py"
    unlisted.write_text("a = 1\n_b = 2\n")
    assert module_exports(import_file(listed)) == {"a": 1}
    assert module_exports(import_file(unlisted)) == {"a": 1}


def test_plan_sources_prefer_commands_and_deduplicate_aliases() -> None:
    """A command wins over a pipeline; aliases of one object count once."""
    pipeline = _pipeline("p")
    command = define_pipeline_command(pipeline)
    assert select_plan_source({"p": pipeline, "c": command, "alias": command}, None) is command
    assert select_plan_source({"p": pipeline, "q": pipeline}, None) is pipeline
    assert select_plan_source({"p": pipeline, "c": command}, "p") is pipeline
    with pytest.raises(CliLoadError, match=r"exports multiple pipelines \(p, q\); pass --export"):
        select_plan_source({"p": pipeline, "q": _pipeline("q")}, None)
    with pytest.raises(CliLoadError, match="does not export a tubeless pipeline or pipeline"):
        select_plan_source({"n": 1, "cls": type(pipeline)}, None)


def test_run_needs_exactly_one_command() -> None:
    """`run` picks the single command, or the named one, and never a bare pipeline."""
    pipeline = _pipeline("p")
    first, second = define_pipeline_command(pipeline), define_pipeline_command(_pipeline("q"))
    assert select_command({"p": pipeline, "c": first}, None) is first
    assert select_command({"c": first, "d": second}, "d") is second
    with pytest.raises(CliLoadError, match=r"multiple pipeline commands \(c, d\)"):
        select_command({"c": first, "d": second}, None)
    with pytest.raises(CliLoadError, match=r'Export "p" is not a tubeless pipeline command\.'):
        select_command({"p": pipeline}, "p")
    with pytest.raises(CliLoadError, match="wrap it with define_pipeline_command"):
        select_command({"p": pipeline}, None)


def test_a_project_file_defines_exactly_one_project(tmp_path: Path) -> None:
    """One project (aliases allowed) is found; none or two are load errors."""
    project = define_project("a", [])
    path = tmp_path / "tubeless_project.py"
    assert select_project({"project": project, "alias": project}, path) is project
    with pytest.raises(CliLoadError, match="does not define a project"):
        select_project({}, path)
    with pytest.raises(CliLoadError, match=r"defines multiple projects \(x, y\)"):
        select_project({"x": project, "y": define_project("b", [])}, path)

"""Tests for `define_project`."""

from __future__ import annotations

import dataclasses

import pytest

from tubeless.cli import Project, define_project
from tubeless.pipeline import create_steps, define_pipeline


def _pipeline(pipeline_id: str) -> object:
    return define_pipeline(id=pipeline_id, steps=[create_steps().step("s", run=lambda i, c: 1)])


def test_a_project_keeps_its_pipelines_in_order() -> None:
    """The project lists pipelines and ids in order and finds each by id."""
    first, second = _pipeline("a"), _pipeline("b")
    project = define_project("jobs", [first, second], description="Jobs.")
    assert (project.id, project.name, project.description) == ("jobs", "jobs", "Jobs.")
    assert project.pipelines == (first, second)
    assert project.pipeline_ids == ("a", "b")
    assert project.get("b") is second
    assert define_project("jobs", [], name="Jobs").name == "Jobs"


def test_a_project_is_frozen() -> None:
    """Fields cannot be reassigned and the pipelines are a tuple."""
    project = define_project("jobs", [_pipeline("a")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        project.id = "other"  # type: ignore[misc]
    assert isinstance(project, Project)
    assert isinstance(project.pipelines, tuple)


def test_unknown_ids_raise_key_error() -> None:
    """`get` of an id the project does not register raises `KeyError`."""
    with pytest.raises(KeyError, match=r'Project does not define pipeline "x"\.'):
        define_project("jobs", [_pipeline("a")]).get("x")


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("", []), {}, ValueError, "Project id must be a non-empty string."),
        (("jobs", []), {"name": " "}, ValueError, "Project name must be a non-empty string."),
        (("jobs", []), {"description": ""}, ValueError, "Project description must be"),
        (("jobs", "ab"), {}, TypeError, "Project pipelines must be a list"),
        (("jobs", [object()]), {}, TypeError, "Project pipelines must be pipelines"),
    ],
)
def test_bad_projects_are_refused(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    """Blank texts and non-pipelines are refused."""
    with pytest.raises(error, match=message):
        define_project(*args, **kwargs)  # type: ignore[arg-type]


def test_duplicate_pipeline_ids_are_refused() -> None:
    """Two pipelines with one id cannot share a project."""
    with pytest.raises(ValueError, match=r'Project pipeline id "a" is declared more than once\.'):
        define_project("jobs", [_pipeline("a"), _pipeline("a")])

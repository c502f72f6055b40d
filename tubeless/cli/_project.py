"""`define_project`: a named, immutable set of pipelines the `tubeless` program finds by id."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tubeless.pipeline import Pipeline

__all__ = ["Project", "define_project"]

_PIPELINE_SURFACE = ("id", "step_ids", "target_ids", "plan", "to_mermaid")


@dataclasses.dataclass(frozen=True, slots=True)
class Project:
    """Pipelines registered under ids for `tubeless list`, `plan`, `run`, ... (frozen).

    Build one with `define_project`; a project file `tubeless_project.py` defines exactly
    one at module level.
    """

    id: str
    """The project's id."""
    name: str
    """Display name (default: the id)."""
    description: str | None
    """What the project is for."""
    pipelines: tuple[Pipeline, ...]
    """The pipelines, in the order given."""

    @property
    def pipeline_ids(self) -> tuple[str, ...]:
        """The pipelines' ids, in order."""
        return tuple(pipeline.id for pipeline in self.pipelines)

    def get(self, id: str) -> Pipeline:
        """Return the pipeline registered as `id`.

        Raises:
            KeyError: "Project does not define pipeline <id>" when none is.
        """
        for pipeline in self.pipelines:
            if pipeline.id == id:
                return pipeline
        raise KeyError(f'Project does not define pipeline "{id}".')


def _non_blank(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"Project {field} must be a non-empty string.")
    return value


def define_project(
    id: str,
    pipelines: Sequence[Pipeline],
    *,
    name: str | None = None,
    description: str | None = None,
) -> Project:
    """Define a project: pipelines that the `tubeless` program finds by id.

    Args:
        id: the project's id (non-blank).
        pipelines: the pipelines to register; their ids must be unique.
        name: display name (default: `id`).
        description: what the project is for.

    Raises:
        ValueError: for a blank id, name or description, or a pipeline id used twice.
        TypeError: when `pipelines` is not a sequence of pipelines.
    """
    project_id = _non_blank(id, "id")
    if project_id is None:
        raise ValueError("Project id must be a non-empty string.")
    given: object = pipelines  # checked at run time, whatever a caller's types said
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise TypeError("Project pipelines must be a list of pipelines")
    seen: set[str] = set()
    for pipeline in pipelines:
        if not all(hasattr(pipeline, field) for field in _PIPELINE_SURFACE):
            raise TypeError(f"Project pipelines must be pipelines, got {pipeline!r}")
        if pipeline.id in seen:
            raise ValueError(f'Project pipeline id "{pipeline.id}" is declared more than once.')
        seen.add(pipeline.id)
    return Project(
        id=project_id,
        name=_non_blank(name, "name") or project_id,
        description=_non_blank(description, "description"),
        pipelines=tuple(pipelines),
    )

"""What a `tubeless` positional names: a module file, or a pipeline registered in a project."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from tubeless.cli._commands._command import PipelineCommand, define_pipeline_command
from tubeless.cli._program._modules import (
    import_file,
    module_exports,
    select_command,
    select_plan_source,
    select_project,
)
from tubeless.cli._project import Project
from tubeless.errors import CliLoadError, CliUsageError

__all__ = ["PROJECT_FILE", "Target", "load_project", "resolve_target"]

PROJECT_FILE = "tubeless_project.py"
"""The project file looked up in the current directory (never in parent directories)."""


def _looks_like_path(target: str) -> bool:
    return (
        os.path.isabs(target)
        or target.startswith(".")
        or "/" in target
        or os.sep in target
        or bool(os.path.splitext(target)[1])
    )


def load_project(path: Path) -> Project:
    """Import a project file and return the one project it defines.

    Raises:
        CliLoadError: when the file is missing, fails to import, or defines no project or
            several.
    """
    if not path.is_file():
        raise CliLoadError(f"Project file not found: {path}")
    return select_project(module_exports(import_file(path)), path)


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """A resolved positional: a module file (with an export name) or a project pipeline."""

    name: str
    """The positional as given."""
    module_path: Path | None = None
    """The module file, when the positional names one."""
    export: str | None = None
    """The `--export` name, for a module file."""
    project_path: Path | None = None
    """The project file, for a registered id."""
    pipeline: Any = None
    """The registered pipeline, for a registered id."""
    bare: bool = False
    """A module path made from a bare word because no project file was found."""

    @property
    def registered_id(self) -> str | None:
        """The registered id, when the positional named a project pipeline."""
        return self.name if self.pipeline is not None else None

    @property
    def cwd(self) -> str | None:
        """The working directory of a run: the project's directory for a project pipeline."""
        return None if self.project_path is None else str(self.project_path.parent)

    def _module_exports(self) -> dict[str, Any]:
        assert self.module_path is not None
        if self.bare and not self.module_path.is_file():
            raise CliLoadError(
                f"Module file not found: {self.module_path} (and there is no {PROJECT_FILE} "
                "in the current directory to register ids)"
            )
        return module_exports(import_file(self.module_path))

    def plan_source(self) -> Any:
        """The pipeline command or pipeline that `plan`, `inspect` and `graph` use."""
        if self.pipeline is not None:
            return self.pipeline
        return select_plan_source(self._module_exports(), self.export)

    def command(self) -> PipelineCommand:
        """The pipeline command that `run` executes (automatic for a project pipeline).

        Raises:
            CliLoadError: when there is none, or a project pipeline's flags cannot be inferred.
        """
        if self.pipeline is None:
            return select_command(self._module_exports(), self.export)
        prefix = f'Cannot derive a CLI for project pipeline "{self.name}"'
        if getattr(self.pipeline, "options_schema", None) is None:
            raise CliLoadError(
                f"{prefix}: automatic project commands need an options schema that exports "
                "JSON Schema; export a define_pipeline_command with explicit params instead."
            )
        try:
            return define_pipeline_command(self.pipeline)
        except (ValueError, TypeError) as error:
            raise CliLoadError(f"{prefix}: {error}") from error


def resolve_target(target: str, export: str | None, project: str | None, cwd: Path) -> Target:
    """Decide what `target` names.

    A path-like positional (absolute, starting with `.`, containing `/`, or with an
    extension) or an existing file is a module file. Otherwise it is an id registered in
    `--project`, or in `./tubeless_project.py` when that exists.

    Raises:
        CliUsageError: for `--export` together with `--project`.
        CliLoadError: when the project file cannot be loaded or does not register `target`.
    """
    if export is not None and project is not None:
        raise CliUsageError(
            ["--export cannot be combined with --project; the project file owns export selection."]
        )
    project_path = cwd / project if project is not None else None
    if project_path is None and not (_looks_like_path(target) or (cwd / target).exists()):
        default = cwd / PROJECT_FILE
        project_path = default if default.is_file() else None
        if project_path is None:
            return Target(name=target, module_path=cwd / target, export=export, bare=True)
    if project_path is None:
        return Target(name=target, module_path=cwd / target, export=export)
    loaded = load_project(project_path)
    try:
        pipeline = loaded.get(target)
    except KeyError:
        raise CliLoadError(
            f'Project file {project_path} does not register pipeline "{target}".'
        ) from None
    return Target(name=target, project_path=project_path, pipeline=pipeline)

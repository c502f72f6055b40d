"""Loading a Python file as a module, and picking the pipeline or command it exports."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tubeless.cli._commands._command import PipelineCommand
from tubeless.cli._exit import ExitCode, error_named, one_line
from tubeless.cli._project import Project
from tubeless.errors import CliLoadError
from tubeless.pipeline.lowlevel import import_module_file

__all__ = [
    "import_file",
    "is_pipeline",
    "module_exports",
    "module_name",
    "select_command",
    "select_plan_source",
    "select_project",
    "unique_exports",
]


def module_name(path: Path) -> str:
    """The `sys.modules` name of a module file loaded by the CLI (stable per path)."""
    digest = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    return f"_tubeless_loaded_{stem}_{digest}"


def import_file(path: Path) -> ModuleType:
    """Import the Python file at `path` (its directory goes on `sys.path` first).

    Raises:
        CliLoadError: exit code 3 when importing raised `PipelineDefinitionError`, 2 for a
            missing file or any other import failure.
    """
    if not path.is_file():
        raise CliLoadError(f"Module file not found: {path}")
    try:
        return import_module_file(path, module_name(path))
    except (Exception, SystemExit) as error:
        if error_named(error, "PipelineDefinitionError"):
            raise CliLoadError(one_line(error), exit_code=ExitCode.DEFINITION) from error
        raise CliLoadError(f"Cannot import {path}: {one_line(error)}") from error


def module_exports(module: ModuleType) -> dict[str, Any]:
    """The module's exports: the names in `__all__`, else every name without a `_`."""
    namespace = vars(module)
    listed = namespace.get("__all__")
    if isinstance(listed, (list, tuple)):
        names = [name for name in listed if isinstance(name, str) and name in namespace]
    else:
        names = [name for name in namespace if not name.startswith("_")]
    return {name: namespace[name] for name in names}


def is_pipeline(value: object) -> bool:
    """Whether `value` looks like a pipeline (and is not a pipeline command)."""
    if isinstance(value, (type, PipelineCommand)):
        return False
    return (
        isinstance(getattr(value, "id", None), str)
        and isinstance(getattr(value, "step_ids", None), (tuple, list))
        and isinstance(getattr(value, "target_ids", None), (tuple, list))
        and callable(getattr(value, "plan", None))
        and callable(getattr(value, "to_mermaid", None))
    )


def _is_command(value: object) -> bool:
    return isinstance(value, PipelineCommand)


def unique_exports(exports: dict[str, Any], accept: Callable[[object], bool]) -> dict[str, Any]:
    """The accepted exports, each object once (the first name of aliases wins)."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for name, value in exports.items():
        if accept(value) and id(value) not in seen:
            seen.add(id(value))
            found[name] = value
    return found


def _named(exports: dict[str, Any], name: str) -> Any:
    if name not in exports:
        raise CliLoadError(f'Module does not export "{name}".')
    return exports[name]


def _only(found: dict[str, Any], label: str) -> Any:
    if len(found) > 1:
        raise CliLoadError(
            f"Module exports multiple {label}s ({', '.join(found)}); pass --export <name>."
        )
    return next(iter(found.values()))


def select_plan_source(exports: dict[str, Any], name: str | None) -> Any:
    """The pipeline command or pipeline to plan, inspect or draw (a command wins).

    Raises:
        CliLoadError: when nothing or several candidates fit, or `name` does not fit.
    """
    if name is not None:
        value = _named(exports, name)
        if _is_command(value) or is_pipeline(value):
            return value
        raise CliLoadError(f'Export "{name}" is not a tubeless pipeline or pipeline command.')
    commands = unique_exports(exports, _is_command)
    if commands:
        return _only(commands, "pipeline command")
    pipelines = unique_exports(exports, is_pipeline)
    if pipelines:
        return _only(pipelines, "pipeline")
    raise CliLoadError("Module does not export a tubeless pipeline or pipeline command.")


def select_command(exports: dict[str, Any], name: str | None) -> PipelineCommand:
    """The pipeline command to run; a bare pipeline is never run.

    Raises:
        CliLoadError: when nothing or several commands fit, or `name` is not a command.
    """
    if name is not None:
        value = _named(exports, name)
        if _is_command(value):
            return value  # type: ignore[no-any-return]
        raise CliLoadError(f'Export "{name}" is not a tubeless pipeline command.')
    commands = unique_exports(exports, _is_command)
    if commands:
        return _only(commands, "pipeline command")  # type: ignore[no-any-return]
    hint = ""
    if unique_exports(exports, is_pipeline):
        hint = " (it exports a pipeline: wrap it with define_pipeline_command to run it)"
    raise CliLoadError(f"Module does not export a tubeless pipeline command{hint}.")


def select_project(exports: dict[str, Any], path: Path) -> Project:
    """The one `Project` a project file defines.

    Raises:
        CliLoadError: when the file defines no project or several.
    """
    projects = unique_exports(exports, lambda value: isinstance(value, Project))
    if not projects:
        raise CliLoadError(f"Project file {path} does not define a project (define_project).")
    if len(projects) > 1:
        raise CliLoadError(
            f"Project file {path} defines multiple projects ({', '.join(projects)})."
        )
    return next(iter(projects.values()))  # type: ignore[no-any-return]

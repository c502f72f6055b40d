"""Exit codes of the `tubeless` CLI and of pipeline commands, and how errors map onto them."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ExitCode", "error_named", "exit_code_for", "one_line", "waiting_calls"]


class ExitCode(enum.IntEnum):
    """The shell exit codes of `tubeless` and of pipeline commands."""

    SUCCESS = 0
    """It worked (`--help` included)."""
    USAGE = 1
    """The `tubeless` program's own arguments were wrong, or a run id is unknown."""
    LOAD = 2
    """A module, project file or store could not be loaded, or a lookup found nothing."""
    DEFINITION = 3
    """Importing a module raised `PipelineDefinitionError`."""
    VALIDATION = 4
    """A command's own arguments were rejected."""
    PLANNING = 5
    """The plan has errors (unknown step or target, conflicting selection, ...)."""
    EXECUTION = 6
    """The run failed, or something else went wrong."""
    CANCELLATION = 7
    """The run was cancelled (Ctrl-C)."""
    APPROVAL = 8
    """A durable agent waits for approval of tool calls: resume with decisions."""


def error_named(error: object, name: str) -> bool:
    """Whether `error` is an instance of a class called `name` (by name, not identity).

    A module loaded from a file may use another copy of tubeless, whose classes are not
    ours, so errors are recognised by class name along the MRO.
    """
    return any(cls.__name__ == name for cls in type(error).__mro__)


def _run_errors(error: object) -> list[Any] | None:
    result = getattr(error, "result", None)
    errors = getattr(result, "errors", None)
    return list(errors) if isinstance(errors, (list, tuple)) else None


def waiting_calls(error: BaseException) -> tuple[Any, ...]:
    """The calls a failed run waits on for approval (`PipelineRun.pending_approvals`)."""
    pending = getattr(getattr(error, "result", None), "pending_approvals", None)
    return tuple(pending) if isinstance(pending, tuple) else ()


def exit_code_for(error: BaseException) -> ExitCode:
    """Map an exception raised by a command (or its run) onto an exit code.

    Help is 0; rejected command arguments are 4; a `PipelineExecutionError` is 8 when
    a durable agent waits for approval, 7 when every run error is a cancellation, 5 when
    any is a planning error, 6 otherwise; a `CliLoadError` carries its own code; anything
    else is 6.
    """
    if error_named(error, "CliHelpRequested"):
        return ExitCode.SUCCESS
    if error_named(error, "CliValidationError"):
        return ExitCode.VALIDATION
    if error_named(error, "CliLoadError"):
        return ExitCode(getattr(error, "exit_code", ExitCode.LOAD))
    errors = _run_errors(error) if error_named(error, "PipelineExecutionError") else None
    if errors and waiting_calls(error):
        return ExitCode.APPROVAL
    if errors:
        if all(getattr(item, "kind", None) == "cancellation" for item in errors):
            return ExitCode.CANCELLATION
        if any(getattr(item, "phase", None) == "planning" for item in errors):
            return ExitCode.PLANNING
    return ExitCode.EXECUTION


def one_line(error: BaseException) -> str:
    """An exception's message on one line (its class name when it has no message)."""
    try:
        text = " ".join(str(error).split())
    except Exception:
        text = ""
    return text or type(error).__name__

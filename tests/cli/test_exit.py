"""Tests for mapping errors onto the CLI's exit codes."""

from __future__ import annotations

from typing import Any

from tubeless.cli import (
    CliHelpRequested,
    CliUsageError,
    CliValidationError,
    ExitCode,
    exit_code_for,
)
from tubeless.cli._exit import error_named, one_line
from tubeless.errors import CliLoadError, Diagnostic, PipelineExecutionError
from tubeless.pipeline import create_steps, define_pipeline


def _failed_run(*errors: Diagnostic) -> Any:
    pipeline = define_pipeline(id="p", steps=[create_steps().step("s", run=lambda i, c: 1)])
    run = pipeline.run()
    import dataclasses

    return dataclasses.replace(run, errors=errors, status="failed")


def _error(kind: str, phase: str) -> Diagnostic:
    return Diagnostic(code="X", kind=kind, phase=phase, message="m")  # type: ignore[arg-type]


def test_exit_codes_are_the_reference_numbers() -> None:
    """0 success through 7 cancellation, then 8 waiting for approval."""
    assert [code.value for code in ExitCode] == list(range(9))


def test_errors_map_onto_exit_codes() -> None:
    """Help 0, arguments 4, load errors their own, runs 7/5/6, anything else 6."""
    assert exit_code_for(CliHelpRequested("help")) == 0
    assert exit_code_for(CliValidationError(["bad"])) == 4
    assert exit_code_for(CliUsageError(["bad"])) == 4
    assert exit_code_for(CliLoadError("x", exit_code=3)) == 3
    cancelled = _failed_run(
        _error("cancellation", "execution"), _error("cancellation", "finalization")
    )
    planning = _failed_run(_error("selection", "planning"), _error("cancellation", "execution"))
    failed = _failed_run(_error("step", "execution"), _error("cancellation", "execution"))
    assert exit_code_for(PipelineExecutionError(cancelled)) == 7
    assert exit_code_for(PipelineExecutionError(planning)) == 5
    assert exit_code_for(PipelineExecutionError(failed)) == 6
    assert exit_code_for(RuntimeError("boom")) == 6


def test_errors_are_recognised_by_class_name() -> None:
    """A class of the same name from another copy of the library is recognised."""

    class CliValidationError(Exception):
        pass

    assert error_named(CliValidationError(), "CliValidationError")
    assert exit_code_for(CliValidationError()) == 4


def test_messages_are_kept_on_one_line() -> None:
    """`one_line` joins lines and falls back to the class name."""
    assert one_line(ValueError("a\n  b")) == "a b"
    assert one_line(KeyError()) == "KeyError"

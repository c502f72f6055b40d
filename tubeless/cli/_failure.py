"""How the CLI prints a failure: `Error: ...` lines on stderr, never a traceback."""

from __future__ import annotations

from typing import Any, TextIO

from tubeless.cli._exit import error_named, one_line
from tubeless.errors import format_diagnostic

__all__ = ["failure_lines", "print_failure", "print_rejected"]


def _run_error_line(error: Any) -> str:
    try:
        return " ".join(format_diagnostic(error).split())
    except Exception:
        return " ".join(str(getattr(error, "message", error)).split())


def failure_lines(error: BaseException) -> list[str]:
    """`Error: <formatted error>` per causal run error of a failed run, else one line."""
    result = getattr(error, "result", None)
    causal = getattr(result, "causal_errors", None)
    errors = causal() if callable(causal) else getattr(result, "errors", None)
    if error_named(error, "PipelineExecutionError") and errors:
        return [f"Error: {_run_error_line(item)}" for item in errors]
    return [f"Error: {one_line(error)}"]


def print_failure(error: BaseException, stream: TextIO) -> None:
    """Print `failure_lines(error)` on `stream`."""
    stream.write("".join(f"{line}\n" for line in failure_lines(error)))
    stream.flush()


def print_rejected(error: Any, stream: TextIO) -> None:
    """Print rejected arguments: one `Error:` line each, a blank line, then the help."""
    lines = [f"Error: {message}" for message in error.errors]
    help_text = str(getattr(error, "help_text", "")).rstrip("\n")
    if help_text:
        lines += ["", help_text]
    stream.write("".join(f"{line}\n" for line in lines))
    stream.flush()

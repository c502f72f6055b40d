"""Turning raised exceptions into `Diagnostic` records."""

from __future__ import annotations

import threading

from tubeless._diagnostics import nested_cause, source_code_of
from tubeless.errors import (
    ChildPipelineError,
    Diagnostic,
    Issue,
    PipelineExecutionError,
    RunCancelledError,
    SchemaValidationError,
    TubelessError,
)

# Their codes restate the classification instead of naming a source.
_WRAPPERS = (PipelineExecutionError, ChildPipelineError, RunCancelledError)


def is_cancellation(error: BaseException, signal: threading.Event) -> bool:
    """Whether `error` means cancellation (decided from the error, not from the signal).

    Cancellation is a `RunCancelledError`, the signal's own `reason` exception, a cancelled
    fan-out, or a child run that ended `cancelled`. An unrelated error that races with
    cancellation is still a failure.
    """
    if isinstance(error, RunCancelledError):
        return True
    if signal.is_set() and error is getattr(signal, "reason", None):
        return True
    if isinstance(error, ChildPipelineError):
        return error.cancelled
    if isinstance(error, PipelineExecutionError):
        return error.cancelled
    return False


def to_diagnostic(
    error: BaseException, *, code: str, kind: str, phase: str, step_id: str | None
) -> Diagnostic:
    """Record `error` under the given classification, keeping its code, cause and issues."""
    return Diagnostic(
        code=code,
        kind=kind,  # type: ignore[arg-type]
        phase=phase,  # type: ignore[arg-type]
        message=_message(error),
        step_id=step_id,
        source_code=None if isinstance(error, _WRAPPERS) else source_code_of(error),
        cause=nested_cause(error),
        issues=_issues_of(error),
        fan_out=error.fan_out if isinstance(error, ChildPipelineError) else None,
    )


def _issues_of(error: BaseException) -> tuple[Issue, ...] | None:
    """A boundary's issues: its own, or those of the refusal an error wraps when its class
    says so (`issues_of_cause`)."""
    if isinstance(error, SchemaValidationError):
        return error.issues
    cause = error.__cause__
    wraps = isinstance(error, TubelessError) and error.issues_of_cause
    if wraps and isinstance(cause, SchemaValidationError):
        return cause.issues
    return None


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return type(error).__name__


def step_error(error: BaseException, signal: threading.Event, step_id: str) -> Diagnostic:
    """Classify an exception raised by a step (handler, predicate or output validation)."""
    if is_cancellation(error, signal):
        code, kind = "TUBELESS_RUN_CANCELLED", "cancellation"
    elif isinstance(error, SchemaValidationError):
        code, kind = "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED", "validation"
    elif isinstance(error, (PipelineExecutionError, ChildPipelineError)):
        code, kind = "TUBELESS_CHILD_FAILED", "child"
    else:
        code, kind = "TUBELESS_STEP_FAILED", "step"
    return to_diagnostic(error, code=code, kind=kind, phase="execution", step_id=step_id)


def finalization_error(error: BaseException, signal: threading.Event) -> Diagnostic:
    """Classify an exception raised while finalizing."""
    if is_cancellation(error, signal):
        code, kind = "TUBELESS_FINALIZATION_CANCELLED", "cancellation"
    elif isinstance(error, SchemaValidationError):
        code, kind = "TUBELESS_FINAL_RESULT_VALIDATION_FAILED", "validation"
    else:
        code, kind = "TUBELESS_FINALIZATION_FAILED", "finalization"
    return to_diagnostic(error, code=code, kind=kind, phase="finalization", step_id="__finalize__")

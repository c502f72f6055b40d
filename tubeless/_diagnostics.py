"""Diagnostic records: `Diagnostic`, its cause chain and the code catalog (internal).

Everything public here is re-exported by `tubeless.errors`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from tubeless._fields import wire, wire_dict
from tubeless._quote import QUOTE_LIMIT, quote

ErrorPhase = Literal["definition", "planning", "execution", "finalization"]
ErrorKind = Literal[
    "definition", "selection", "step", "validation", "cancellation", "child", "finalization"
]

_DEFINITION: tuple[ErrorPhase, ErrorKind] = ("definition", "definition")
_SELECTION: tuple[ErrorPhase, ErrorKind] = ("planning", "selection")

ERROR_CODE_CLASSIFICATION: Mapping[str, tuple[ErrorPhase, ErrorKind]] = MappingProxyType(
    {
        "TUBELESS_DEFINITION_DEPENDENCY_CONTRADICTORY": _DEFINITION,
        "TUBELESS_DEFINITION_DEPENDENCY_CYCLE": _DEFINITION,
        "TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE": _DEFINITION,
        "TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS": _DEFINITION,
        "TUBELESS_DEFINITION_DEPENDENCY_SELF_REFERENCE": _DEFINITION,
        "TUBELESS_DEFINITION_FINALIZER_STEP_NOT_IN_STEPS": _DEFINITION,
        "TUBELESS_DEFINITION_IMPLEMENTATION_VERSION_INVALID": _DEFINITION,
        "TUBELESS_DEFINITION_OPTIONS_SCHEMA_CONFLICT": _DEFINITION,
        "TUBELESS_DEFINITION_PIPELINE_DESCRIPTION_BLANK": _DEFINITION,
        "TUBELESS_DEFINITION_PIPELINE_ID_BLANK": _DEFINITION,
        "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK": _DEFINITION,
        "TUBELESS_DEFINITION_STEP_ID_BLANK": _DEFINITION,
        "TUBELESS_DEFINITION_STEP_ID_RESERVED": _DEFINITION,
        "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE": _DEFINITION,
        "TUBELESS_DEFINITION_STEP_NAME_BLANK": _DEFINITION,
        "TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH": _DEFINITION,
        "TUBELESS_DEFINITION_TARGET_NOT_IN_STEPS": _DEFINITION,
        "TUBELESS_DEFINITION_TARGETS_DUPLICATE": _DEFINITION,
        "TUBELESS_PLANNING_SELECTION_CONFLICT": _SELECTION,
        "TUBELESS_PLANNING_STEP_SELECTION_DUPLICATE": _SELECTION,
        "TUBELESS_PLANNING_STEP_SELECTION_EMPTY": _SELECTION,
        "TUBELESS_PLANNING_STEP_UNKNOWN": _SELECTION,
        "TUBELESS_PLANNING_TARGET_SELECTION_DUPLICATE": _SELECTION,
        "TUBELESS_PLANNING_TARGET_SELECTION_EMPTY": _SELECTION,
        "TUBELESS_PLANNING_TARGET_UNDECLARED": _SELECTION,
        "TUBELESS_PLANNING_TARGET_UNKNOWN": _SELECTION,
        "TUBELESS_RUN_CONCURRENCY_INVALID": ("planning", "validation"),
        "TUBELESS_OPTIONS_VALIDATION_FAILED": ("execution", "validation"),
        "TUBELESS_STEP_FAILED": ("execution", "step"),
        "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED": ("execution", "validation"),
        "TUBELESS_CHILD_FAILED": ("execution", "child"),
        "TUBELESS_RUN_CANCELLED": ("execution", "cancellation"),
        "TUBELESS_FINALIZATION_FAILED": ("finalization", "finalization"),
        "TUBELESS_FINAL_RESULT_VALIDATION_FAILED": ("finalization", "validation"),
        "TUBELESS_FINALIZATION_CANCELLED": ("finalization", "cancellation"),
    }
)
"""Phase and kind of every catalog code."""

PIPELINE_ERROR_CODES: tuple[str, ...] = tuple(ERROR_CODE_CLASSIFICATION)
"""The frozen catalog of codes a `Diagnostic` may carry."""

APPROVAL_REQUIRED_CODE = "TUBELESS_AGENT_APPROVAL_REQUIRED"
"""A durable agent waits for a person (`ApprovalRequiredError`); not a breakage."""

AGENT_ERROR_CODES: tuple[str, ...] = (
    "TUBELESS_AGENT_INVALID_DEFINITION",
    "TUBELESS_AGENT_INVALID_DECISION",
    "TUBELESS_AGENT_INVALID_ARGUMENTS",
    "TUBELESS_AGENT_INVALID_RESULT",
    "TUBELESS_AGENT_INVALID_STATE",
    "TUBELESS_AGENT_LIMIT_REACHED",
    "TUBELESS_AGENT_REMOTE_HANDLER_FAILED",
    "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY",
    "TUBELESS_AGENT_EXECUTION_BUSY",
    "TUBELESS_AGENT_LEASE_LOST",
    "TUBELESS_AGENT_CHECKPOINT_MISMATCH",
    "TUBELESS_AGENT_CHECKPOINT_INVALID",
    "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED",
    "TUBELESS_AGENT_CHECKPOINT_READ_FAILED",
    "TUBELESS_AGENT_CALL_INTERRUPTED",
    APPROVAL_REQUIRED_CODE,
    "TUBELESS_AGENT_APPROVAL_INVALID",
    "TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL",
    "TUBELESS_AGENT_APPROVAL_NOT_NEEDED",
    "TUBELESS_AGENT_APPROVAL_MISSING",
    "TUBELESS_AGENT_APPROVAL_INVALID_EDIT",
    "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED",
    "TUBELESS_AGENT_CALL_REJECTED",
    "TUBELESS_CASSETTE_INVALID",
    "TUBELESS_REPLAY_DIVERGED",
    "TUBELESS_AGENT_INVALID_USAGE",
    "TUBELESS_AGENT_CALL_TIMED_OUT",
)
"""Agent codes: carried by exceptions, so they surface as `source_code` in reports."""

MAX_CAUSE_DEPTH = 8
"""How many links of a cause chain are kept before "Cause chain truncated"."""

WAITING_CODES = frozenset({APPROVAL_REQUIRED_CODE})
"""Codes of failures that mean a run waits for a person, not that it broke: progress
shows the step or group `pending`, not `failed`."""


def shown_status(status: str, error: Mapping[str, Any] | None) -> str:
    """The status a person reads: `waiting` for a failed run whose error is a waiting one.

    The recorded status of a run stopped for approval stays `failed`, as traces and
    `to_dict()` write it; its error (wire form) has a `WAITING_CODES` code or `sourceCode`.
    """
    if status != "failed" or not isinstance(error, Mapping):
        return status
    codes = (error.get("code"), error.get("sourceCode"))
    return "waiting" if any(code in WAITING_CODES for code in codes) else status


def is_waiting(error: BaseException) -> bool:
    """Whether `error`, or an exception in its cause chain, has a `WAITING_CODES` code."""
    current: BaseException | None = error
    for _ in range(MAX_CAUSE_DEPTH):
        if current is None:
            return False
        if getattr(current, "code", None) in WAITING_CODES:
            return True
        current = current.__cause__
    return False


def is_pipeline_error_code(value: object) -> bool:
    """Return whether `value` is one of `PIPELINE_ERROR_CODES`."""
    return isinstance(value, str) and value in ERROR_CODE_CLASSIFICATION


@dataclasses.dataclass(frozen=True, slots=True)
class Issue:
    """One problem a schema found in a value."""

    message: str
    """What is wrong, in words."""
    path: tuple[str | int, ...] = dataclasses.field(default=(), metadata=wire(omit="falsy"))
    """Where in the value: keys and list indexes from the root; empty for the root."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{message, path?}` (no `path` for the root)."""
        return wire_dict(self)

    def render(self) -> str:
        """Return `a.b.0: message`, or the bare message for the root.

        A path part that is long or not printable (a key from model data, say) shows as
        a bounded, escaped quote.
        """
        if not self.path:
            return self.message
        return ".".join(_path_part(part) for part in self.path) + ": " + self.message


def _path_part(part: str | int) -> str:
    text = str(part) if type(part) in (int, str) else quote(part)
    if len(text) <= QUOTE_LIMIT and text.isprintable() and "." not in text:
        return text
    return quote(part)


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorCause:
    """One normalised link of a cause chain: JSON-safe and bounded."""

    message: str
    """The exception's message (`str(exc)`), or the value as text."""
    name: str | None = None
    """The exception's class name."""
    source_code: str | None = None
    """The exception's string `code` attribute, when it has one."""
    cause: ErrorCause | None = None
    """The next link, or `None` at the end of the chain."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{message, name?, sourceCode?, cause?}`."""
        return wire_dict(self)

    def deepest(self) -> ErrorCause:
        """Return the last link of the chain."""
        current = self
        while current.cause is not None:
            current = current.cause
        return current


@dataclasses.dataclass(frozen=True, slots=True)
class FanOutFailure:
    """One failed item of a fan-out step."""

    index: int
    """Position of the item in the input list."""
    key: str
    """The item's key, cut to 1024 characters."""
    key_truncated: bool
    """Whether `key` was cut."""
    cancelled: bool
    """Whether the item was cancelled rather than failed."""
    error: ErrorCause
    """The item's error, strings cut to 1024 characters."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{index, key, keyTruncated, cancelled, error}`."""
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class FanOutDiagnostics:
    """Bounded diagnostics of a fan-out step whose children failed."""

    failures: tuple[FanOutFailure, ...]
    """At most 32 failures, in input order."""
    failure_count: int
    """How many items failed in all."""
    omitted_failure_count: int
    """How many failures `failures` leaves out."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{failures, failureCount, omittedFailureCount}`."""
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One diagnostic: what went wrong, where, and why."""

    code: str
    """A catalog code (`PIPELINE_ERROR_CODES`)."""
    kind: ErrorKind
    """What sort of failure: `definition`, `selection`, `step`, `validation`, ..."""
    phase: ErrorPhase
    """When it happened: `definition`, `planning`, `execution` or `finalization`."""
    message: str
    """The message, in words."""
    step_id: str | None = None
    """The step it belongs to (`__finalize__` for finalization)."""
    source_code: str | None = None
    """The string `code` of the exception behind it (`ENOENT`, `TUBELESS_AGENT_...`)."""
    cause: ErrorCause | None = None
    """The normalised `__cause__` chain of the exception behind it."""
    issues: tuple[Issue, ...] | None = None
    """Schema issues, for validation failures."""
    fan_out: FanOutDiagnostics | None = None
    """Per-item failures, for a fan-out step."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form (camelCase keys; absent fields left out)."""
        return wire_dict(self)

    def format(self) -> str:
        """Return the one-line human form (see `format_diagnostic`)."""
        return format_diagnostic(self)


def coded_diagnostic(code: str, message: str, step_id: str | None = None) -> Diagnostic:
    """A `Diagnostic` for catalog `code`, its phase and kind as the catalog classifies it."""
    phase, kind = ERROR_CODE_CLASSIFICATION[code]
    return Diagnostic(code=code, kind=kind, phase=phase, message=message, step_id=step_id)


def format_diagnostic(error: Diagnostic) -> str:
    """Render `<phase>[ at step <id>] [<code>][ (<source>)]: <message>[; caused by ...]`."""
    step = f" at step {error.step_id}" if error.step_id else ""
    source = f" ({error.source_code})" if error.source_code else ""
    tail = ""
    if error.cause is not None:
        deepest = error.cause.deepest()
        code = f" {deepest.source_code}" if deepest.source_code else ""
        tail = f"; caused by{code}: {deepest.message}"
    return f"{error.phase}{step} [{error.code}]{source}: {error.message}{tail}"


def _read_field(value: object, field: str) -> object:
    try:
        return getattr(value, field, None)
    except Exception:  # a throwing property counts as a missing field
        return None


def _safe_text(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return "Unknown raised value"


def source_code_of(value: object) -> str | None:
    """Return the string `code` attribute of `value`, or `None`."""
    code = _read_field(value, "code")
    return code if isinstance(code, str) else None


def normalize_cause(value: object, *, _seen: set[int] | None = None, _depth: int = 0) -> ErrorCause:
    """Copy an exception and its `__cause__` chain into JSON-safe `ErrorCause` links.

    At most eight links are kept, and a ninth reads "Cause chain truncated"; an exception
    met twice becomes "Circular cause"; a property that raises counts as missing.
    """
    if _depth >= MAX_CAUSE_DEPTH:
        return ErrorCause(message="Cause chain truncated")
    if not isinstance(value, BaseException):
        return ErrorCause(message=_safe_text(value))
    seen = _seen if _seen is not None else set()
    if id(value) in seen:
        return ErrorCause(message="Circular cause")
    seen.add(id(value))
    nested = _read_field(value, "__cause__")
    return ErrorCause(
        message=_safe_text(value),
        name=type(value).__name__,
        source_code=source_code_of(value),
        cause=None if nested is None else normalize_cause(nested, _seen=seen, _depth=_depth + 1),
    )


def nested_cause(error: BaseException) -> ErrorCause | None:
    """Return the normalised chain behind `error` (its `__cause__`), or `None`."""
    nested = _read_field(error, "__cause__")
    if nested is None:
        return None
    return normalize_cause(nested, _seen={id(error)})

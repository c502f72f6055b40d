"""Every error tubeless raises or records, in one place.

Exceptions (each carries a `code` string unless noted)::

    Exception
    ├── TubelessError                  base of everything below; `.code`
    │   ├── PipelineDefinitionError    a pipeline graph is invalid; `.errors`, `.pipeline_id`
    │   ├── PipelineExecutionError     `run_or_raise` on a run that did not complete; `.result`
    │   ├── DefinitionIdentityError    a stored definition snapshot does not match its identity
    │   ├── RunCancelledError          a run's signal was set (the AbortError of tubeless)
    │   ├── ChildPipelineError         fan-out children failed; `.cancelled`, `.fan_out`
    │   ├── IterationError             an iteration went past its bound or got a bad decision
    │   ├── SchemaDefinitionError      something given as a schema is not one
    │   ├── ToolError                  an expected domain failure raised by a tool handler
    │   ├── TraceRecordError           a trace record does not match the trace v3 wire schema
    │   ├── TraceSinkError             a trace sink could not take a record; `.partial`
    │   ├── TraceStoreError            a trace file or store cannot be opened or read
    │   ├── AgentDefinitionError       `define_tool`/`define_agent` rejected a definition
    │   ├── AgentError                 a model decision or state was rejected at run time
    │   │   └── AgentLimitError        an agent limit was exhausted; `.limit`, `.bound`, ...
    │   ├── CliHelpRequested           `--help` was given; `.help_text` is what to print
    │   ├── CliValidationError         command-line arguments were rejected; `.errors`
    │   │   └── CliUsageError          command-line arguments could not be parsed at all
    │   └── CliLoadError               the CLI could not load a module or store; `.exit_code`
    └── ValueError
        ├── SchemaIssues               raised by validators: the value has `.issues` (no code)
        └── SchemaValidationError      a boundary rejected a value; `.issues`, `.boundary`

Records (frozen dataclasses with `to_dict()` giving the wire JSON):

- `PipelineError`: one diagnostic in a plan, a run report or a trace record;
- `ErrorCause`: one normalised link of an exception's `__cause__` chain;
- `FanOutDiagnostics` / `FanOutFailure`: bounded per-item failures of a fan-out step.

`PIPELINE_ERROR_CODES` lists the catalog; `ERROR_CODE_CLASSIFICATION` gives each code's
phase and kind; `format_pipeline_error` renders the one-line form.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

if typing.TYPE_CHECKING:
    from tubeless.pipeline._report import PipelineRun

__all__ = [
    "AGENT_ERROR_CODES",
    "ERROR_CODE_CLASSIFICATION",
    "MAX_CAUSE_DEPTH",
    "PIPELINE_ERROR_CODES",
    "AgentDefinitionError",
    "AgentError",
    "AgentLimitError",
    "ChildPipelineError",
    "CliHelpRequested",
    "CliLoadError",
    "CliUsageError",
    "CliValidationError",
    "DefinitionIdentityError",
    "ErrorCause",
    "ErrorKind",
    "ErrorPhase",
    "FanOutDiagnostics",
    "FanOutFailure",
    "Issue",
    "IterationError",
    "PipelineDefinitionError",
    "PipelineError",
    "PipelineExecutionError",
    "RunCancelledError",
    "SchemaDefinitionError",
    "SchemaIssues",
    "SchemaValidationError",
    "ToolError",
    "TraceRecordError",
    "TraceSinkError",
    "TraceStoreError",
    "TubelessError",
    "format_pipeline_error",
    "is_pipeline_error_code",
    "nested_cause",
    "normalize_cause",
    "source_code_of",
]

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
"""Phase and kind of every catalog code, as the reference classifies them."""

PIPELINE_ERROR_CODES: tuple[str, ...] = tuple(ERROR_CODE_CLASSIFICATION)
"""The frozen catalog of codes a `PipelineError` may carry."""

AGENT_ERROR_CODES: tuple[str, ...] = (
    "TUBELESS_AGENT_INVALID_DEFINITION",
    "TUBELESS_AGENT_INVALID_DECISION",
    "TUBELESS_AGENT_INVALID_STATE",
    "TUBELESS_AGENT_LIMIT_REACHED",
)
"""Agent codes: carried by exceptions, so they surface as `source_code` in reports."""

MAX_CAUSE_DEPTH = 8
"""How many links of a cause chain are kept before "Cause chain truncated"."""


def is_pipeline_error_code(value: object) -> bool:
    """Return whether `value` is one of `PIPELINE_ERROR_CODES`."""
    return isinstance(value, str) and value in ERROR_CODE_CLASSIFICATION


@dataclasses.dataclass(frozen=True, slots=True)
class Issue:
    """One problem a schema found in a value."""

    message: str
    """What is wrong, in words."""
    path: tuple[str | int, ...] = ()
    """Where in the value: keys and list indexes from the root; empty for the root."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{message, path?}` (no `path` for the root)."""
        if not self.path:
            return {"message": self.message}
        return {"message": self.message, "path": list(self.path)}

    def render(self) -> str:
        """Return `a.b.0: message`, or the bare message for the root."""
        if not self.path:
            return self.message
        return ".".join(str(part) for part in self.path) + ": " + self.message


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
        out: dict[str, Any] = {"message": self.message}
        if self.name is not None:
            out["name"] = self.name
        if self.source_code is not None:
            out["sourceCode"] = self.source_code
        if self.cause is not None:
            out["cause"] = self.cause.to_dict()
        return out

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
        """Return the wire form."""
        return {
            "index": self.index,
            "key": self.key,
            "keyTruncated": self.key_truncated,
            "cancelled": self.cancelled,
            "error": self.error.to_dict(),
        }


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
        """Return the wire form."""
        return {
            "failures": [failure.to_dict() for failure in self.failures],
            "failureCount": self.failure_count,
            "omittedFailureCount": self.omitted_failure_count,
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineError:
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
        out: dict[str, Any] = {
            "code": self.code,
            "kind": self.kind,
            "phase": self.phase,
            "message": self.message,
        }
        if self.step_id is not None:
            out["stepId"] = self.step_id
        if self.source_code is not None:
            out["sourceCode"] = self.source_code
        if self.cause is not None:
            out["cause"] = self.cause.to_dict()
        if self.issues is not None:
            out["issues"] = [issue.to_dict() for issue in self.issues]
        if self.fan_out is not None:
            out["fanOut"] = self.fan_out.to_dict()
        return out

    def format(self) -> str:
        """Return the one-line human form (see `format_pipeline_error`)."""
        return format_pipeline_error(self)


def format_pipeline_error(error: PipelineError) -> str:
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


class TubelessError(Exception):
    """Base of every exception tubeless raises; `code` names the failure."""

    code: str

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def message(self) -> str:
        """The message the error was created with."""
        return str(self.args[0]) if self.args else ""


def _joined(errors: Sequence[PipelineError]) -> str:
    return "; ".join(format_pipeline_error(error) for error in errors)


class PipelineDefinitionError(TubelessError):
    """A pipeline definition is invalid; `errors` lists every problem with its code."""

    pipeline_id: str
    errors: tuple[PipelineError, ...]

    def __init__(self, pipeline_id: str, errors: Iterable[PipelineError]) -> None:
        self.pipeline_id = pipeline_id
        self.errors = tuple(errors)
        text = f"Invalid pipeline {pipeline_id}"
        if self.errors:
            text += f": {_joined(self.errors)}"
        first = self.errors[0].code if self.errors else "TUBELESS_DEFINITION_INVALID"
        super().__init__(text, code=first)


class PipelineExecutionError(TubelessError):
    """`run_or_raise` was given a run that did not complete; `result` is that run.

    `code` is the code of the run's first error and `__cause__` the exception behind it.
    """

    result: PipelineRun

    def __init__(self, result: PipelineRun, message: str | None = None) -> None:
        self.result = result
        errors = result.errors
        cancelled = bool(errors) and all(error.kind == "cancellation" for error in errors)
        disposition = "cancelled" if cancelled else "failed"
        if message is None:
            message = f"Pipeline {result.pipeline_id} {disposition}"
            if errors:
                message += f": {format_pipeline_error(errors[0])}"
        super().__init__(message, code=errors[0].code if errors else "TUBELESS_STEP_FAILED")

    @property
    def cancelled(self) -> bool:
        """Whether the run ended `cancelled`."""
        return self.result.status == "cancelled"


class DefinitionIdentityError(TubelessError, ValueError):
    """A stored definition snapshot was edited: its fingerprints no longer match its content."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_DEFINITION_IDENTITY_INVALID")


class RunCancelledError(TubelessError):
    """The run's signal was set: work stopped cooperatively (the reference's AbortError)."""

    def __init__(self, message: str = "Pipeline run aborted") -> None:
        super().__init__(message, code="TUBELESS_RUN_CANCELLED")


class ChildPipelineError(TubelessError):
    """Child runs of a fan-out step failed or were cancelled.

    `cancelled` is true only when every unsuccessful child was cancelled (failure wins);
    `fan_out` holds bounded per-item diagnostics.
    """

    cancelled: bool
    fan_out: FanOutDiagnostics | None

    def __init__(
        self, message: str, *, cancelled: bool = False, fan_out: FanOutDiagnostics | None = None
    ) -> None:
        super().__init__(message, code="TUBELESS_CHILD_FAILED")
        self.cancelled = cancelled
        self.fan_out = fan_out


class IterationError(TubelessError):
    """An iteration step got a malformed transition or went past `max_iterations`.

    `code` is `TUBELESS_ITERATION_LIMIT_REACHED` or `TUBELESS_ITERATION_INVALID_DECISION`.
    """


class SchemaDefinitionError(TubelessError, TypeError):
    """Something given where a schema is expected is not a usable schema."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_SCHEMA_INVALID")


class ToolError(TubelessError):
    """An expected domain failure raised by a tool handler.

    The agent turns it into the outcome `{"id", "tool", "ok": False, "error": {"code",
    "message"}}` for the reducer. Any other exception from a handler is fatal.

    Raises:
        ValueError: when `code` is blank or longer than 256 characters, or `message` is
            longer than 4096 characters.
    """

    def __init__(self, code: str, message: str) -> None:
        if not isinstance(code, str) or not code.strip():
            raise ValueError("ToolError code must be a non-blank string")
        if len(code) > 256:
            raise ValueError("ToolError code must be at most 256 characters")
        if not isinstance(message, str):
            raise ValueError("ToolError message must be a string")
        if len(message) > 4096:
            raise ValueError("ToolError message must be at most 4096 characters")
        super().__init__(message, code=code)


class TraceRecordError(TubelessError, ValueError):
    """A trace record does not match the trace v3 wire schema; the message names where."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_TRACE_RECORD_INVALID")


class TraceSinkError(TubelessError):
    """A sink failed to take a record.

    `partial` is true when a composed sink retired only some of its destinations and the
    others still take records, so the run keeps the sink.
    """

    partial: bool

    def __init__(self, message: str, *, partial: bool = False) -> None:
        super().__init__(message, code="TUBELESS_TRACE_SINK_FAILED")
        self.partial = partial


class TraceStoreError(TubelessError):
    """A trace file or store cannot be opened, read or written (wrong version, bad line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_TRACE_STORE_INVALID")


class AgentDefinitionError(TubelessError, TypeError):
    """`define_tool` or `define_agent` rejected its arguments."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_AGENT_INVALID_DEFINITION")


class AgentError(TubelessError):
    """A decision, a call or a state was rejected while an agent ran."""


class AgentLimitError(AgentError):
    """An agent limit was exhausted; the numbers are attributes too."""

    limit: str
    bound: int
    consumed: int
    requested: int
    scope: str

    def __init__(self, limit: str, *, bound: int, consumed: int, requested: int) -> None:
        self.limit = limit
        self.bound = bound
        self.consumed = consumed
        self.requested = requested
        self.scope = "invocation"
        super().__init__(
            f"Agent invocation {limit}={bound} exceeded "
            f"(consumed={consumed}, requested={requested}, scope={self.scope})",
            code="TUBELESS_AGENT_LIMIT_REACHED",
        )


class CliHelpRequested(TubelessError):  # noqa: N818 - the reference's public name
    """`-h`/`--help` was given: print `help_text` and exit 0."""

    help_text: str

    def __init__(self, help_text: str) -> None:
        super().__init__("Help requested", code="TUBELESS_CLI_HELP")
        self.help_text = help_text


class CliValidationError(TubelessError):
    """Command-line arguments were parsed but rejected (exit code 4 for a command).

    `errors` holds one message per problem; `help_text` is the command's help, printed
    after the errors.
    """

    errors: tuple[str, ...]
    help_text: str

    def __init__(
        self, errors: Iterable[str], help_text: str = "", *, code: str = "TUBELESS_CLI_VALIDATION"
    ) -> None:
        self.errors = tuple(errors) or ("Invalid arguments",)
        self.help_text = help_text
        super().__init__("; ".join(self.errors), code=code)


class CliUsageError(CliValidationError):
    """Command-line arguments could not be parsed: an unknown flag, a missing value, ...

    For a command's own arguments it is a validation error (exit code 4); for the
    workbench's own flags it is a usage error (exit code 1).
    """

    def __init__(self, errors: Iterable[str], help_text: str = "") -> None:
        super().__init__(errors, help_text, code="TUBELESS_CLI_USAGE")


class CliLoadError(TubelessError):
    """The CLI could not load what it was pointed at; `exit_code` says how it failed.

    `exit_code` is 2 for a missing or broken module, project file or store (and a lookup
    that found nothing), 3 for a `PipelineDefinitionError` raised while importing.
    """

    exit_code: int

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message, code="TUBELESS_CLI_LOAD_FAILED")
        self.exit_code = exit_code


class SchemaIssues(ValueError):  # noqa: N818 - the documented public name
    """Raised by a validator: the value does not match; `issues` say where and why."""

    issues: tuple[Issue, ...]

    def __init__(self, issues: Iterable[Issue | Mapping[str, Any] | str]) -> None:
        self.issues = tuple(_to_issue(issue) for issue in issues)
        if not self.issues:
            self.issues = (Issue(message="Invalid value"),)
        super().__init__("; ".join(issue.render() for issue in self.issues))


def _to_issue(value: Issue | Mapping[str, Any] | str) -> Issue:
    if isinstance(value, Issue):
        return value
    if isinstance(value, str):
        return Issue(message=value)
    path = value.get("path") or ()
    return Issue(
        message=str(value.get("message", "Invalid value")),
        path=tuple(part if isinstance(part, int) else str(part) for part in path),
    )


class SchemaValidationError(ValueError):
    """A boundary (options, step output, final result, tool input) rejected a value.

    `issues` is empty when the validator raised instead of reporting issues; the raised
    exception is then the `__cause__`.
    """

    boundary: str
    issues: tuple[Issue, ...]

    def __init__(self, message: str, *, boundary: str, issues: Sequence[Issue] = ()) -> None:
        super().__init__(message)
        self.boundary = boundary
        self.issues = tuple(issues)

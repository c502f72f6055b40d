"""Every error tubeless raises or records, in one place.

Exceptions (each carries a `code` string unless noted). The families (`DefinitionError`,
`RunError`, `TraceError`, `StoreError`, `CliError`, `McpError`) carry no code of their own:
catch one to catch every error below it. A class under two families is listed under both::

    Exception
    ├── TubelessError                  base of everything below; `.code`
    │   ├── DefinitionError            family: a definition was rejected; fix the code
    │   │   ├── PipelineDefinitionError  a pipeline graph is invalid; `.errors`, `.pipeline_id`
    │   │   ├── DefinitionIdentityError  a stored definition snapshot does not match its
    │   │   │                            identity (also a `ValueError`)
    │   │   ├── SchemaDefinitionError    something given as a schema is not one (`TypeError`)
    │   │   └── AgentDefinitionError     `define_tool`/`define_agent` rejected a definition
    │   │                                (also a `TypeError`)
    │   ├── RunError                   family: a run did not complete, or its parts rejected
    │   │   │                          something while it ran
    │   │   ├── PipelineExecutionError   `run_or_raise` on a run that did not complete; `.result`
    │   │   │   └── PipelineWaitingError the run waits for approval; `.pending_approvals`
    │   │   ├── RunCancelledError        a run's signal was set (the AbortError of tubeless)
    │   │   │   └── PipelineCancelledError `run_or_raise` on a cancelled run; also a
    │   │   │                            `PipelineExecutionError`, with `.result`
    │   │   ├── ChildPipelineError       fan-out children failed; `.cancelled`, `.fan_out`
    │   │   ├── IterationError           an iteration went past its bound or got a bad decision
    │   │   ├── ToolError                an expected domain failure raised by a tool handler
    │   │   ├── AgentError               a model decision, state or usage amount was rejected
    │   │   │   ├── AgentLimitError      an agent limit was exhausted; `.limit`, `.bound`, ...
    │   │   │   ├── CheckpointStoreError a checkpoint store could not be opened, read or
    │   │   │   │                        written, or holds damage; `.store`, `.key`
    │   │   │   │                        (also a `StoreError`)
    │   │   │   └── ApprovalRequiredError calls wait for a person's approval;
    │   │   │                            `.pending_approvals`
    │   │   └── CassetteError            a cassette file is missing, unreadable or malformed
    │   │       └── ReplayDivergedError  a replayed run left its recording; `.agent_path`,
    │   │                                `.turn`, `.call_id`, `.difference`
    │   ├── TraceError                 family: a trace record, sink, store or export failed
    │   │   ├── TraceRecordError         a record does not match the trace v3 wire schema
    │   │   │                            (also a `ValueError`)
    │   │   ├── TraceSinkError           a trace sink could not take a record; `.partial`
    │   │   ├── TraceStoreError          a trace file or store cannot be opened or read
    │   │   │                            (also a `StoreError`)
    │   │   └── TraceExportError         an OTLP endpoint did not take the exported spans
    │   ├── StoreError                 family: a store could not be opened, read or written
    │   │   ├── TraceStoreError          (also a `TraceError`)
    │   │   └── CheckpointStoreError     (also an `AgentError`)
    │   ├── CliError                   family: the CLI stopped before running anything
    │   │   ├── CliHelpRequested         `--help` was given; `.help_text` is what to print
    │   │   ├── CliValidationError       command-line arguments were rejected; `.errors`
    │   │   │   └── CliUsageError        command-line arguments could not be parsed at all
    │   │   └── CliLoadError             the CLI could not load a module or store; `.exit_code`
    │   ├── McpError                   family: an MCP server could not serve its tools
    │   │   ├── McpConnectionError       the server could not be reached, or the connection died
    │   │   ├── McpServerClosedError     the server is not open (not entered yet, or closed)
    │   │   ├── McpToolDriftError        live tool definitions differ from the pinned ones;
    │   │   │                            `.tools`
    │   │   └── McpLockError             a lock file is not a valid MCP lock document
    │   │                                (also a `ValueError`)
    │   ├── SchemaIssues               raised by validators: `.issues` (also a `ValueError`)
    │   └── MissingExtraError          an optional dependency is not installed; `.extra`
    │                                  (also an `ImportError`)
    └── ValueError
        └── SchemaValidationError      a boundary rejected a value; `.issues`, `.boundary`

Warnings (issued with `warnings.warn`, never raised by tubeless)::

    UserWarning
    └── TubelessWarning                base of every tubeless warning
        └── TornTraceWarning           a trace's last line was cut short and skipped

Records (frozen dataclasses with `to_dict()` giving the wire JSON):

- `Diagnostic`: one diagnostic in a plan, a run report or a trace record;
- `ErrorCause`: one normalised link of an exception's `__cause__` chain;
- `FanOutDiagnostics` / `FanOutFailure`: bounded per-item failures of a fan-out step;
- `PendingApproval`: one tool call of a durable agent waiting for a person's approval.

`PIPELINE_ERROR_CODES` lists the catalog; `ERROR_CODE_CLASSIFICATION` gives each code's
phase and kind; `format_diagnostic` renders the one-line form; `shown_status` is the
status a person reads (`waiting` for a run stopped for approval).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tubeless._diagnostics import (
    AGENT_ERROR_CODES,
    ERROR_CODE_CLASSIFICATION,
    PIPELINE_ERROR_CODES,
    Diagnostic,
    ErrorCause,
    ErrorKind,
    ErrorPhase,
    FanOutDiagnostics,
    FanOutFailure,
    Issue,
    format_diagnostic,
    is_pipeline_error_code,
    normalize_cause,
    shown_status,
)
from tubeless._diagnostics import APPROVAL_REQUIRED_CODE as _APPROVAL_REQUIRED_CODE
from tubeless._fields import AS_IS as _AS_IS
from tubeless._fields import wire_dict as _wire_dict
from tubeless._public import show_public_module as _show_public_module
from tubeless._quote import quote as _quote

if typing.TYPE_CHECKING:
    from tubeless.pipeline import PipelineRun

__all__ = [
    "AGENT_ERROR_CODES",
    "ERROR_CODE_CLASSIFICATION",
    "PIPELINE_ERROR_CODES",
    "AgentDefinitionError",
    "AgentError",
    "AgentLimitError",
    "ApprovalRequiredError",
    "CassetteError",
    "CheckpointStoreError",
    "ChildPipelineError",
    "CliError",
    "CliHelpRequested",
    "CliLoadError",
    "CliUsageError",
    "CliValidationError",
    "DefinitionError",
    "DefinitionIdentityError",
    "Diagnostic",
    "ErrorCause",
    "ErrorKind",
    "ErrorPhase",
    "FanOutDiagnostics",
    "FanOutFailure",
    "Issue",
    "IterationError",
    "McpConnectionError",
    "McpError",
    "McpLockError",
    "McpServerClosedError",
    "McpToolDriftError",
    "MissingExtraError",
    "PendingApproval",
    "PipelineCancelledError",
    "PipelineDefinitionError",
    "PipelineExecutionError",
    "PipelineWaitingError",
    "ReplayDivergedError",
    "RunCancelledError",
    "RunError",
    "SchemaDefinitionError",
    "SchemaIssues",
    "SchemaValidationError",
    "StoreError",
    "ToolError",
    "TornTraceWarning",
    "TraceError",
    "TraceExportError",
    "TraceRecordError",
    "TraceSinkError",
    "TraceStoreError",
    "TubelessError",
    "TubelessWarning",
    "format_diagnostic",
    "is_pipeline_error_code",
    "normalize_cause",
    "pending_approvals_of",
    "shown_status",
]

_show_public_module(__name__, __all__, globals())


class TubelessError(Exception):
    """Base of every exception tubeless raises; `code` names the failure."""

    code: str
    issues_of_cause: typing.ClassVar[bool] = False
    """Whether a run's diagnostic shows the issues of a `SchemaValidationError` that
    caused this error as its own (true for `AgentError`: a refused boundary it wraps)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def message(self) -> str:
        """The message the error was created with."""
        return str(self.args[0]) if self.args else ""


class DefinitionError(TubelessError):
    """Family: something given at definition time was rejected (a pipeline, an agent or
    tool, a schema, a stored definition snapshot). Fix the code; retrying will not help."""


class RunError(TubelessError):
    """Family: a run did not complete: it failed, was cancelled, waits for approval, or
    its agent, tools, fan-out children or cassette rejected something while it ran."""


class TraceError(TubelessError):
    """Family: a trace record, sink, store or export failed (the `tubeless.trace` errors)."""


class StoreError(TubelessError):
    """Family: a trace store or checkpoint store could not be opened, read or written, or
    what it holds is damaged. Nothing saved before is lost; fix the cause and retry."""


class CliError(TubelessError):
    """Family: the `tubeless` program or a pipeline command stopped before running: help
    was asked for, arguments were rejected, or a module or store could not be loaded."""


def _joined(errors: Sequence[Diagnostic]) -> str:
    return "; ".join(format_diagnostic(error) for error in errors)


class PipelineDefinitionError(DefinitionError):
    """A pipeline definition is invalid; `errors` lists every problem with its code."""

    pipeline_id: str
    errors: tuple[Diagnostic, ...]

    def __init__(self, pipeline_id: str, errors: Iterable[Diagnostic]) -> None:
        self.pipeline_id = pipeline_id
        self.errors = tuple(errors)
        text = f"Invalid pipeline {pipeline_id}"
        if self.errors:
            text += f": {_joined(self.errors)}"
        first = self.errors[0].code if self.errors else "TUBELESS_DEFINITION_INVALID"
        super().__init__(text, code=first)


class PipelineExecutionError(RunError):
    """`run_or_raise` was given a run that did not complete; `result` is that run.

    `code` is the code of the run's first error and `__cause__` the exception behind it.
    When a parent step raised it for a child run, `item_key` is the child's item key (an
    agent's call id, a fan-out item), else `None`.
    """

    result: PipelineRun
    item_key: str | None = None

    def __init__(self, result: PipelineRun, message: str | None = None) -> None:
        self.result = result
        errors = result.errors
        cancelled = bool(errors) and all(error.kind == "cancellation" for error in errors)
        disposition = "cancelled" if cancelled else "failed"
        if message is None:
            message = f"Pipeline {result.pipeline_id} {disposition}"
            if errors:
                message += f": {format_diagnostic(errors[0])}"
        super().__init__(message, code=errors[0].code if errors else "TUBELESS_STEP_FAILED")

    @property
    def cancelled(self) -> bool:
        """Whether the run ended `cancelled`."""
        return self.result.status == "cancelled"


class PipelineWaitingError(PipelineExecutionError):
    """`run_or_raise` was given a run that waits for a person to approve tool calls.

    The run's status is `failed` (as traces record it), but nothing broke: a
    durable agent stopped before a batch with calls that need approval. `code` is
    `TUBELESS_AGENT_APPROVAL_REQUIRED`; `pending_approvals` lists the waiting calls (as
    `result.pending_approvals` does). Resume with the same execution key and
    `context={"approvals": {...}}`. It is a `PipelineExecutionError`, so code that catches
    that sees it as before.
    """

    pending_approvals: tuple[PendingApproval, ...]

    def __init__(self, result: PipelineRun) -> None:
        self.pending_approvals = result.pending_approvals
        shown = ", ".join(f"{p.call_id} ({p.tool})" for p in self.pending_approvals[:8])
        more = len(self.pending_approvals) - 8
        if more > 0:
            shown += f" and {more} more"
        count = len(self.pending_approvals)
        message = f"Pipeline {result.pipeline_id} is waiting for approval of {count} call(s): "
        super().__init__(result, (message + shown)[:4096])
        self.code = _APPROVAL_REQUIRED_CODE


class DefinitionIdentityError(DefinitionError, ValueError):
    """A stored definition snapshot was edited: its fingerprints no longer match its content."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_DEFINITION_IDENTITY_INVALID")


class RunCancelledError(RunError):
    """The run's signal was set: work stopped cooperatively (an `AbortError` in JavaScript)."""

    def __init__(self, message: str = "Pipeline run aborted") -> None:
        super().__init__(message, code="TUBELESS_RUN_CANCELLED")


class PipelineCancelledError(RunCancelledError, PipelineExecutionError):
    """`run_or_raise` was given a run that ended `cancelled`; `result` is that run.

    It is a `RunCancelledError`, so `except RunCancelledError` sees a cancelled run, and a
    `PipelineExecutionError` (`.result`, `.cancelled`, `code` of the first error), as
    cancelled runs raised before.
    """

    def __init__(self, result: PipelineRun) -> None:
        PipelineExecutionError.__init__(self, result)


class ChildPipelineError(RunError):
    """Child runs of a fan-out step failed or were cancelled.

    `cancelled` is true only when every unsuccessful child was cancelled (failure wins);
    `fan_out` holds bounded per-item diagnostics; `item_errors` the exception of every
    item that did not complete, in item order (empty when the step failed before its items).
    """

    cancelled: bool
    fan_out: FanOutDiagnostics | None
    item_errors: tuple[BaseException, ...]

    def __init__(
        self,
        message: str,
        *,
        cancelled: bool = False,
        fan_out: FanOutDiagnostics | None = None,
        item_errors: tuple[BaseException, ...] = (),
    ) -> None:
        super().__init__(message, code="TUBELESS_CHILD_FAILED")
        self.cancelled = cancelled
        self.fan_out = fan_out
        self.item_errors = item_errors


class IterationError(RunError):
    """An iteration step got a malformed transition or went past `max_iterations`.

    `code` is `TUBELESS_ITERATION_LIMIT_REACHED` or `TUBELESS_ITERATION_INVALID_DECISION`.
    """


class SchemaDefinitionError(DefinitionError, TypeError):
    """Something given where a schema is expected is not a usable schema."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_SCHEMA_INVALID")


class ToolError(RunError):
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


class TraceRecordError(TraceError, ValueError):
    """A trace record does not match the trace v3 wire schema; the message names where."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_TRACE_RECORD_INVALID")


class TraceSinkError(TraceError):
    """A sink failed to take a record.

    `partial` is true when a composed sink retired only some of its destinations and the
    others still take records, so the run keeps the sink.
    """

    partial: bool

    def __init__(self, message: str, *, partial: bool = False) -> None:
        super().__init__(message, code="TUBELESS_TRACE_SINK_FAILED")
        self.partial = partial


class TraceStoreError(TraceError, StoreError):
    """A trace file or store cannot be opened, read or written (wrong version, bad line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_TRACE_STORE_INVALID")


class TraceExportError(TraceError):
    """An OTLP endpoint refused or never answered an export of spans (`tubeless export otel`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_TRACE_EXPORT_FAILED")


class MissingExtraError(TubelessError, ImportError):
    """A module needs an optional extra that is not installed; `extra` names it.

    The message says what to install: `pip install 'tubeless-pipelines[<extra>]'`.
    """

    extra: str

    def __init__(self, feature: str, *, extra: str, missing: str) -> None:
        super().__init__(
            f"{feature} needs the optional extra {extra!r}, which is not installed "
            f"(no module {missing!r}): pip install 'tubeless-pipelines[{extra}]'",
            code="TUBELESS_EXTRA_MISSING",
        )
        self.extra = extra


class McpError(TubelessError):
    """An MCP server could not serve its tools (the family of `tubeless.mcp` errors)."""


class McpConnectionError(McpError):
    """The server could not be started or reached, or its connection died.

    `TUBELESS_MCP_CONNECTION_FAILED` when opening or listing failed;
    `TUBELESS_MCP_CONNECTION_LOST` when an open connection dropped.
    """

    def __init__(self, message: str, *, code: str = "TUBELESS_MCP_CONNECTION_FAILED") -> None:
        super().__init__(message, code=code)


class McpServerClosedError(McpError):
    """An `McpServer` was used while not open: before its `with` block, or after it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_MCP_SERVER_CLOSED")


class McpToolDriftError(McpError):
    """A live server's tool definitions differ from the pinned ones; `tools` names them.

    Raised before any call of the batch starts, so a changed definition is never called.
    """

    tools: tuple[str, ...]

    def __init__(self, message: str, *, tools: Sequence[str]) -> None:
        super().__init__(message, code="TUBELESS_MCP_TOOL_DRIFT")
        self.tools = tuple(tools)


class McpLockError(McpError, ValueError):
    """A lock file is missing, unreadable or not a valid MCP lock document."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_MCP_INVALID_LOCK")


class AgentDefinitionError(DefinitionError, TypeError):
    """`define_tool` or `define_agent` rejected its arguments."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="TUBELESS_AGENT_INVALID_DEFINITION")


class AgentError(RunError):
    """A decision, a call or a state was rejected while an agent ran."""

    issues_of_cause = True


class AgentLimitError(AgentError):
    """An agent limit was exhausted; the numbers are attributes too.

    `scope` is the run id of the agent whose budget refused (in a tree of subagents, an
    ancestor's budget may refuse a descendant's batch). For a usage limit (`max_cost`,
    `max_*_tokens`) `consumed` counts what is spent and reserved so far, and the numbers
    of `max_cost` may be floats. For `max_seconds`, `bound` and
    `consumed` are seconds (floats) and `requested` is 0.
    """

    limit: str
    bound: int | float
    consumed: int | float
    requested: int | float
    scope: str

    def __init__(
        self,
        limit: str,
        *,
        bound: int | float,
        consumed: int | float,
        requested: int | float,
        scope: str,
    ) -> None:
        self.limit = limit
        self.bound = bound
        self.consumed = consumed
        self.requested = requested
        self.scope = scope
        super().__init__(
            f"Agent {limit}={bound} exceeded "
            f"(consumed={consumed}, requested={requested}, scope={scope})",
            code="TUBELESS_AGENT_LIMIT_REACHED",
        )


class CheckpointStoreError(AgentError, StoreError):
    """A checkpoint store could not be opened, read or written, or what it holds is damaged.

    Codes: `TUBELESS_AGENT_CHECKPOINT_READ_FAILED` (the store cannot be opened or read:
    a missing permission, a locked or unreadable file), `TUBELESS_AGENT_CHECKPOINT_INVALID`
    (the file or the checkpoint is corrupt: restore a backup or use a new execution key),
    `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` (a write failed; the message gives the
    operating system's reason, such as `File too large` or `No space left on device`).
    Nothing that was saved before is lost: the execution resumes once the cause is fixed.
    """

    store: str
    """The store: a SQLite file's path, or the store's `repr`."""
    key: str | None
    """The execution key being read or written (`None` when listing keys)."""

    def __init__(self, message: str, *, code: str, store: str, key: str | None) -> None:
        self.store = store
        self.key = key
        super().__init__(message, code=code)


@dataclasses.dataclass(frozen=True, slots=True)
class PendingApproval:
    """One tool call of a durable agent that waits for a person's decision.

    Nothing of its batch has started. Decide it by resuming the execution (same key) with
    `context={"approvals": {call_id: tubeless.approve() | tubeless.reject(message) |
    tubeless.edit(new_input)}}`.
    """

    call_id: str
    """The call id the decision gave (the key of the approval)."""
    tool: str
    """The tool the model called (its name in the agent's tools)."""
    input: Any = dataclasses.field(metadata=_AS_IS)
    """The validated input the call would run with (plain JSON data; for a pipeline tool,
    the child's options)."""
    turn: int
    """The 1-based turn of the call in its agent."""
    agent_run_id: str
    """The run id of the agent that made the call (the root agent's or a subagent's) in
    the attempt that stopped for it."""
    agent: str
    """The stable agent path within the execution (`ExecutionIds.agent`): the root agent's
    id, then `/<turn>/<call>` per subagent level."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `{callId, tool, input, turn, agentRunId, agent}`."""
        return _wire_dict(self)


class ApprovalRequiredError(AgentError):
    """A durable agent stopped before a batch with calls that need approval.

    Code `TUBELESS_AGENT_APPROVAL_REQUIRED`. No call of the batch started; the execution
    stays resumable. `pending_approvals` lists every waiting call of the agent tree (the
    root agent's error lists its subagents' calls too); `PipelineRun.pending_approvals`
    reads it from a run.
    """

    CODE: typing.ClassVar[str] = _APPROVAL_REQUIRED_CODE
    """The code every instance carries."""

    pending_approvals: tuple[PendingApproval, ...]

    def __init__(self, pending: Iterable[PendingApproval]) -> None:
        self.pending_approvals = tuple(pending)
        shown = ", ".join(f"{p.call_id} ({p.tool})" for p in self.pending_approvals[:8])
        more = len(self.pending_approvals) - 8
        if more > 0:
            shown += f" and {more} more"
        super().__init__(
            f"Waiting for approval of {len(self.pending_approvals)} call(s): {shown}"[:4096],
            code=_APPROVAL_REQUIRED_CODE,
        )


def pending_approvals_of(error: BaseException | None) -> tuple[PendingApproval, ...]:
    """The calls waiting for approval behind `error` (through causes and child runs)."""
    for _ in range(64):
        if error is None:
            return ()
        if isinstance(error, ApprovalRequiredError):
            return error.pending_approvals
        below = error.__cause__
        if below is None and isinstance(error, PipelineExecutionError):
            below = error.result.first_exception()
        error = below
    return ()


class CassetteError(RunError):
    """A cassette cannot be used: missing in replay mode, unreadable, malformed, or a run
    whose decisions or outcomes are not JSON data.

    Code `TUBELESS_CASSETTE_INVALID` unless a subclass says otherwise.
    """

    def __init__(self, message: str, *, code: str = "TUBELESS_CASSETTE_INVALID") -> None:
        super().__init__(message, code=code)


class ReplayDivergedError(CassetteError):
    """A replayed run did something its cassette did not record.

    Code `TUBELESS_REPLAY_DIVERGED`. `agent_path` is the agent's path from the root
    (`<root id>`, then `<parent path>/<turn>/<call id>` for a subagent), `turn` and
    `call_id` say where (`None` when not about one turn or call), `difference` what differed.
    """

    agent_path: str
    turn: int | None
    call_id: str | None
    difference: str

    def __init__(
        self, agent_path: str, turn: int | None, call_id: str | None, difference: str
    ) -> None:
        self.agent_path = agent_path
        self.turn = turn
        self.call_id = call_id
        self.difference = difference
        where = f"agent {_quote(agent_path, 300)}"
        if turn is not None:
            where += f", turn {turn}"
        if call_id is not None:
            where += f", call {_quote(call_id)}"
        super().__init__(
            f"Replay diverged at {where}: {difference}"[:4096], code="TUBELESS_REPLAY_DIVERGED"
        )


class CliHelpRequested(CliError):  # noqa: N818 - the TypeScript tubeless's name
    """`-h`/`--help` was given: print `help_text` and exit 0."""

    help_text: str

    def __init__(self, help_text: str) -> None:
        super().__init__("Help requested", code="TUBELESS_CLI_HELP")
        self.help_text = help_text


class CliValidationError(CliError):
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
    `tubeless` program's own flags it is a usage error (exit code 1).
    """

    def __init__(self, errors: Iterable[str], help_text: str = "") -> None:
        super().__init__(errors, help_text, code="TUBELESS_CLI_USAGE")


class CliLoadError(CliError):
    """The CLI could not load what it was pointed at; `exit_code` says how it failed.

    `exit_code` is 2 for a missing or broken module, project file or store (and a lookup
    that found nothing), 3 for a `PipelineDefinitionError` raised while importing.
    """

    exit_code: int

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message, code="TUBELESS_CLI_LOAD_FAILED")
        self.exit_code = exit_code


class SchemaIssues(TubelessError, ValueError):  # noqa: N818 - the documented public name
    """Raised by a validator: the value does not match; `issues` say where and why.

    `code` is `TUBELESS_SCHEMA_ISSUES`. It stays a `ValueError`, so `except ValueError`
    catches it as before.
    """

    issues: tuple[Issue, ...]

    def __init__(self, issues: Iterable[Issue | Mapping[str, Any] | str]) -> None:
        self.issues = tuple(_to_issue(issue) for issue in issues)
        if not self.issues:
            self.issues = (Issue(message="Invalid value"),)
        super().__init__(
            "; ".join(issue.render() for issue in self.issues), code="TUBELESS_SCHEMA_ISSUES"
        )


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


class TubelessWarning(UserWarning):
    """Base of every warning tubeless issues; filter on it to silence or raise them all."""


class TornTraceWarning(TubelessWarning):
    """`read_ndjson(..., tolerate_torn_tail=True)` skipped a last line cut short.

    A writer stopped mid-line (killed, out of disk) leaves an unfinished last line; the
    message says how many records were read before it.
    """

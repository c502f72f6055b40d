"""Run controls (what to run and how) and run context (the services a run uses)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tubeless._types import ContextLike, ControlsLike, HooksLike
from tubeless.pipeline._extensions import CONTEXT_FIELD_KEYS, RunExtension, check_extensions
from tubeless.trace import TraceSink


class PipelineLogger(Protocol):
    """Where step logs go: a `logging.Logger` fits."""

    def info(self, msg: str) -> None:
        """Log an ordinary message."""

    def warning(self, msg: str) -> None:
        """Log a warning."""

    def error(self, msg: str) -> None:
        """Log an error."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunControls:
    """Built-in run controls, separate from the domain options."""

    dry_run: bool = False
    """Preview: steps see `context.dry_run` and their dry-run policy decides what runs."""
    step_ids: Sequence[str] | None = None
    """Exact filter: run only these steps (prerequisites are not added)."""
    targets: Sequence[str] | None = None
    """Dependency-aware selection of declared targets."""
    continue_on_error: bool = False
    """Keep running independent branches after a failure (the run still fails)."""
    max_concurrency: Any = 1
    """Upper bound on steps running at once (an integer of at least 1)."""


_CONTROL_FIELDS = frozenset(field.name for field in dataclasses.fields(RunControls))
_DEFAULT_CONTROLS = RunControls()


def _string_list(value: object, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"controls {field} must be a list of strings")
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"controls {field} must contain strings, got {item!r}")
    return tuple(value)


def resolve_controls(controls: ControlsLike | None) -> RunControls:
    """Return `controls` as a `RunControls`, checking keys and types.

    Values that are wrong for this pipeline (unknown steps, `step_ids=[]`, a bad
    `max_concurrency`) are reported by planning; only malformed input raises here.

    Raises:
        TypeError: for an unknown key or a value of the wrong type.
    """
    if controls is None:
        return _DEFAULT_CONTROLS
    if (
        type(controls) is RunControls
        and controls.step_ids is None
        and controls.targets is None
        and type(controls.dry_run) is bool
        and type(controls.continue_on_error) is bool
    ):
        return controls
    if isinstance(controls, RunControls):
        fields = {name: getattr(controls, name) for name in _CONTROL_FIELDS}
    elif isinstance(controls, Mapping):
        unknown = sorted(set(controls) - _CONTROL_FIELDS)
        if unknown:
            raise TypeError(f"Unknown run controls: {', '.join(map(str, unknown))}")
        fields = dict(controls)
    else:
        raise TypeError("controls must be a RunControls or a dict")
    for flag in ("dry_run", "continue_on_error"):
        if flag in fields and not isinstance(fields[flag], bool):
            raise TypeError(f"controls {flag} must be a bool")
    fields["step_ids"] = _string_list(fields.get("step_ids"), "step_ids")
    fields["targets"] = _string_list(fields.get("targets"), "targets")
    return RunControls(**fields)


def controls_to_dict(controls: RunControls) -> dict[str, Any]:
    """Return the wire form of explicitly set controls (`dryRun`, `stepIds`, ...)."""
    out: dict[str, Any] = {}
    if controls.dry_run:
        out["dryRun"] = True
    if controls.continue_on_error:
        out["continueOnError"] = True
    if controls.max_concurrency != 1:
        out["maxConcurrency"] = controls.max_concurrency
    if controls.step_ids is not None:
        out["stepIds"] = list(controls.step_ids)
    if controls.targets is not None:
        out["targets"] = list(controls.targets)
    return out


def child_controls(configured: RunControls, parent_dry_run: bool) -> RunControls:
    """Controls of a child run: its own, with dry run forced on by a dry-running parent."""
    if parent_dry_run and not configured.dry_run:
        return dataclasses.replace(configured, dry_run=True)
    return configured


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    """Services and identity for one run; every field is optional."""

    signal: threading.Event | None = None
    """Set it to cancel the run; handlers see this very object as `context.signal`."""
    run_id: str | None = None
    """The run's id (default `<pipeline id>:<uuid4>`)."""
    parent_run_id: str | None = None
    """The run that started this one, when a tubeless run is the parent."""
    correlation_id: str | None = None
    """A stable id across host retries; inherited by child runs."""
    tracing: TraceSink | None = None
    """A trace sink: every record of the run (and its children) goes there."""
    hooks: HooksLike | None = None
    """A `PipelineHooks` object, a mapping of hook name to callable, or a list of them."""
    log: PipelineLogger | None = None
    """Where step logs go (default: the `tubeless` logger, silent unless configured)."""
    now: Callable[[], int] | None = None
    """Clock in epoch milliseconds."""
    sleep: Callable[[float, threading.Event], None] | None = None
    """`sleep(seconds, signal)`: must return early when `signal` is set."""
    cwd: str | None = None
    """Working directory handed to steps."""
    execution_key: str | None = None
    """The execution key of a durable agent run as the root (instead of its `Durability`
    key): run again with the same key to resume."""
    approvals: Mapping[str, Any] | None = None
    """Decisions for the calls a durable agent stopped for (root runs only): call id ->
    `tubeless.approve()`, `tubeless.reject(message)` or `tubeless.edit(new_input)`."""
    cassette: Any = None
    """A `tubeless.testing.Cassette`: record the run's agent decisions and tool outcomes,
    or replay them without calling `decide` (child runs share it)."""
    thread_pool: concurrent.futures.ThreadPoolExecutor | None = None
    """A thread pool the application owns: every agent batch of the run (and of its child
    runs) borrows its helper threads there instead of starting its own, so many runs at
    once share one set of threads. The library never shuts it down."""
    extensions: Mapping[RunExtension[Any], Any] | None = None
    """Values for the layers above the pipeline core, by `RunExtension` key (see
    `tubeless.pipeline.lowlevel`). `execution_key`, `approvals` and `cassette` above are
    carried the same way: the core never reads them, the agent layer does."""


CONTEXT_FIELDS = frozenset(field.name for field in dataclasses.fields(RunContext))


def bind_context_field(field: str, key: RunExtension[Any]) -> None:
    """Carry the `RunContext` field `field` of a root run as the value of `key`.

    Raises:
        ValueError: when `field` is no `RunContext` field, or is bound to another key.
    """
    if field not in CONTEXT_FIELDS or field == "extensions":
        raise ValueError(f"{field!r} is not a RunContext field a layer may bind")
    bound = CONTEXT_FIELD_KEYS.setdefault(field, key)
    if bound is not key:
        raise ValueError(f"RunContext field {field!r} is already bound to {bound!r}")


def resolve_context(context: ContextLike | None) -> RunContext:
    """Return `context` as a `RunContext`, checking keys and types.

    Raises:
        TypeError: for an unknown key or a value of the wrong type.
    """
    if context is None:
        return RunContext()
    if isinstance(context, RunContext):
        resolved = context
    elif isinstance(context, Mapping):
        unknown = sorted(set(context) - CONTEXT_FIELDS)
        if unknown:
            raise TypeError(f"Unknown run context fields: {', '.join(map(str, unknown))}")
        resolved = RunContext(**context)
    else:
        raise TypeError("context must be a RunContext or a dict")
    _check_context(resolved)
    return resolved


def _check_threading(context: RunContext) -> None:
    if context.signal is not None and not isinstance(context.signal, threading.Event):
        raise TypeError("context signal must be a threading.Event")
    if context.thread_pool is not None and not isinstance(
        context.thread_pool, concurrent.futures.ThreadPoolExecutor
    ):
        raise TypeError("context thread_pool must be a concurrent.futures.ThreadPoolExecutor")


def _check_context(context: RunContext) -> None:
    _check_threading(context)
    for field in ("run_id", "parent_run_id", "correlation_id", "cwd"):
        value = getattr(context, field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise TypeError(f"context {field} must be a non-blank string")
    check_extensions(context)
    if context.tracing is not None and not callable(getattr(context.tracing, "export", None)):
        raise TypeError("context tracing must be a trace sink with export(record)")
    for field in ("now", "sleep"):
        value = getattr(context, field)
        if value is not None and not callable(value):
            raise TypeError(f"context {field} must be callable")
    if context.log is not None and not all(
        callable(getattr(context.log, name, None)) for name in ("info", "warning", "error")
    ):
        raise TypeError("context log must have info, warning and error methods")

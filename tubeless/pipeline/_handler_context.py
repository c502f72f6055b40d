"""What handlers receive: the run scope, execution context, step context and step logger."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from tubeless.errors import RunCancelledError
from tubeless.pipeline._controls import PipelineLogger
from tubeless.pipeline._extensions import Extensions
from tubeless.pipeline._observe import RunObserver, TraceChannel
from tubeless.pipeline._observe import default_now as default_now  # the executor's default
from tubeless.trace import (
    TRACE_DETAIL_BYTE_LIMIT,
    TRACE_LIST_LIMIT,
    TRACE_MESSAGE_LIMIT,
    TRACE_STRING_LIMIT,
)
from tubeless.trace.lowlevel import TRACE_ATTRIBUTE_LIMIT, SharedPayload, bounded_text, json_bytes

_LOGGER = logging.getLogger("tubeless")

PROGRESS_STATUSES = ("cancelled", "completed", "failed", "pending", "running", "skipped")
"""The statuses a progress detail row may carry."""


def default_sleep(seconds: float, signal: threading.Event) -> None:
    """Sleep up to `seconds`, returning early when `signal` is set."""
    signal.wait(max(0.0, seconds))


_FLOAT_SAFE = 2**1000
"""Integers inside this bound convert to a finite float (the largest float is near 2**1024)."""

_ATTRIBUTE_NAME_LIMIT = 256

PROGRESS_INTERVAL_MS = 50
"""Progress records of one attempt go out at most this often (the latest is never lost)."""

ProgressSource = Callable[
    [], tuple[float, "float | None", "str | None", "Sequence[Mapping[str, Any]] | None"]
]


def cancellation_message(signal: threading.Event) -> str:
    """`Pipeline run aborted[: <reason>]`, using the signal's `reason` when it has one."""
    reason = getattr(signal, "reason", None)
    return f"Pipeline run aborted: {reason}" if reason is not None else "Pipeline run aborted"


def raise_if_cancelled(signal: threading.Event) -> None:
    """Raise `RunCancelledError` when `signal` is set."""
    if signal.is_set():
        raise RunCancelledError(cancellation_message(signal))


@dataclasses.dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class RunServices:
    """What every run of one tree shares: made once for the root, handed to each child."""

    signal: threading.Event
    """Set to cancel the run and every child run."""
    log: PipelineLogger
    now: Callable[[], int]
    """Milliseconds since the epoch."""
    sleep: Callable[[float, threading.Event], None]
    """Sleeps the given seconds, waking early when the event is set."""
    cwd: str
    channel: TraceChannel | None
    """Where the tree's trace records go, when it is traced or hooked."""
    thread_pool: concurrent.futures.ThreadPoolExecutor | None
    """The application's pool for batches, when it gave one."""


@dataclasses.dataclass(slots=True, eq=False, kw_only=True)
class RunScope:
    """Everything one run shares between its steps (internal)."""

    pipeline_id: str
    run_id: str
    parent_run_id: str | None
    correlation_id: str | None
    item_key: str | None
    iteration: dict[str, Any] | None
    services: RunServices
    dry_run: bool
    observer: RunObserver | None = None
    options: Any = None
    extensions: Extensions = dataclasses.field(default_factory=dict)
    """The values layers above the core carry in this run (`RunExtension` keys)."""
    _attempts: Iterator[int] = dataclasses.field(
        default_factory=functools.partial(itertools.count, 1)
    )

    def next_attempt_id(self) -> str:
        """Return `<run id>:attempt:<base36 sequence>`; safe from any thread."""
        number = next(self._attempts)
        # Nearly every attempt is one of a run's first few.
        sequence = _DIGITS36[number] if number < 36 else _base36(number)
        return f"{self.run_id}:attempt:{sequence}"

    def trace_context(self) -> dict[str, Any] | None:
        """`{runId, parentRunId, correlationId, itemKey, iteration}` when tracing is on."""
        channel = self.services.channel
        if channel is None or not channel.tracing:
            return None
        return {
            "runId": self.run_id,
            "parentRunId": self.parent_run_id,
            "correlationId": self.correlation_id,
            "itemKey": self.item_key,
            "iteration": self.iteration,
        }


_DIGITS36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(number: int) -> str:
    digits = _DIGITS36
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
    return out or "0"


def _log_text(message: object, params: Sequence[object]) -> str:
    parts = [message if isinstance(message, str) else _param_text(message)]
    parts += [_param_text(param) for param in params]
    return " ".join(parts)


def _param_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, default=str, ensure_ascii=False)
        except ValueError:
            return str(value)
    return str(value)


class StepLogger:
    """`context.log`: forwards to the run's logger and, when observed, emits `pipeline.log`."""

    __slots__ = ("_attempt_id", "_scope", "_step_id")

    def __init__(self, scope: RunScope, step_id: str | None, attempt_id: str | None) -> None:
        self._scope = scope
        self._step_id = step_id
        self._attempt_id = attempt_id

    def _write(self, level: str, message: object, params: Sequence[object]) -> None:
        text = _log_text(message, params)
        observer = self._scope.observer
        if observer is not None:
            message = bounded_text(text, TRACE_MESSAGE_LIMIT)
            observer.emit(
                "pipeline.log",
                {"level": level, "message": message},
                step_id=self._step_id,
                attempt_id=self._attempt_id,
            )
        base: PipelineLogger = self._scope.services.log
        {"log": base.info, "warn": base.warning, "error": base.error}[level](text)

    def info(self, message: object, *params: object) -> None:
        """Log an ordinary message (params are appended, separated by spaces)."""
        self._write("log", message, params)

    def warning(self, message: object, *params: object) -> None:
        """Log a warning."""
        self._write("warn", message, params)

    def error(self, message: object, *params: object) -> None:
        """Log an error."""
        self._write("error", message, params)

    log = info
    warn = warning


class ExecutionContext:
    """What skip predicates, mappings and finalizers receive.

    Attributes:
        options: the validated domain options.
        dry_run: whether this is a dry run.
        run_id: this run's id; `parent_run_id` and `correlation_id` when set.
        signal: the run's `threading.Event`; set means cancelled.
        log: logger with `info`/`warning`/`error` (aliases `log`/`warn`).
        cwd: working directory.
        trace: `{runId, parentRunId, correlationId, itemKey, iteration}` when tracing is on.
    """

    __slots__ = ("_log", "_scope", "_step_id")

    def __init__(self, scope: RunScope, step_id: str | None = None) -> None:
        self._scope = scope
        self._step_id = step_id
        self._log: StepLogger | None = None

    @property
    def options(self) -> Any:
        return self._scope.options

    @property
    def dry_run(self) -> bool:
        return self._scope.dry_run

    @property
    def run_id(self) -> str:
        return self._scope.run_id

    @property
    def parent_run_id(self) -> str | None:
        return self._scope.parent_run_id

    @property
    def correlation_id(self) -> str | None:
        return self._scope.correlation_id

    @property
    def signal(self) -> threading.Event:
        return self._scope.services.signal

    @property
    def cwd(self) -> str:
        return self._scope.services.cwd

    @property
    def trace(self) -> dict[str, Any] | None:
        return self._scope.trace_context()

    @property
    def log(self) -> StepLogger:
        if self._log is None:
            self._log = StepLogger(self._scope, self._step_id, self._attempt_id_or_none())
        return self._log

    def _attempt_id_or_none(self) -> str | None:
        return None

    def now(self) -> int:
        """Return the run clock's time in epoch milliseconds."""
        return self._scope.services.now()

    def sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`; raise `RunCancelledError` if the run is cancelled meanwhile."""
        signal = self._scope.services.signal
        raise_if_cancelled(signal)
        self._scope.services.sleep(seconds, signal)
        raise_if_cancelled(signal)


class StepContext(ExecutionContext):
    """What a step handler receives: the execution context plus per-attempt helpers.

    Attributes:
        attempt_id: this attempt's id (`<run id>:attempt:<n>`).
    """

    __slots__ = ("_active", "_last_progress_ms", "_offered", "_pending", "attempt_id")

    def __init__(self, scope: RunScope, step_id: str, attempt_id: str) -> None:
        super().__init__(scope, step_id)
        self.attempt_id = attempt_id
        self._active = True
        self._last_progress_ms: int | None = None
        self._pending: ProgressSource | None = None
        self._offered = False
        """Set by `offer_progress` before it reads `_active` (see `close`)."""

    def _attempt_id_or_none(self) -> str | None:
        return self.attempt_id

    def close(self) -> None:
        """Send the latest held-back progress, then stop accepting progress (settled)."""
        channel = self._scope.services.channel
        if channel is None or not self._offered:
            # Most attempts never report progress: then nothing is held and the tree's
            # lock is not taken. An offer racing this sets `_offered` before it reads
            # `_active`, so either it sees the attempt closed, or it is seen here and
            # waited for under the lock.
            self._active = False
            if channel is None or not self._offered:
                return
        with channel.lock:
            channel.held.drop(self)
            pending, self._pending = self._pending, None
            if pending is not None:
                self._emit_progress(progress_payload(*pending()))
            self._active = False

    def report_progress(
        self,
        completed: float,
        total: float | None = None,
        message: str | None = None,
        details: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Report progress of this attempt (ignored when nothing observes the run).

        Progress records go out at most every 50 ms per attempt; the latest report held
        back meanwhile goes out before the attempt settles, so nothing final is lost.

        Raises:
            TypeError: for a non-finite count or a malformed detail row.
        """
        if self._scope.observer is None or not self._active:
            return
        progress = progress_payload(completed, total, message, details)
        self.offer_progress(lambda: (completed, total, message, details), progress)

    def offer_progress(
        self,
        source: ProgressSource,
        built: dict[str, Any] | None = None,
        *,
        urgent: bool = False,
    ) -> None:
        """Report progress that `source()` describes, building it only if it goes out now.

        Used by child-run trackers, whose detail rows are costly to build on every change.
        An `urgent` report (a failure, a new iteration) goes out at once, whatever the
        interval: throttling may merge updates but must not hold those back.
        """
        self._offered = True
        now = None
        pending = self._pending
        if pending is not None and not urgent and pending == source and self._active:
            # Held back already, from this same source: whoever sends it (a later report,
            # `HeldProgress`, `close`) builds it after this change, under the lock, so it
            # only stays held while the interval lasts. No lock for most reports.
            now = self._scope.services.now()
            last = self._last_progress_ms
            if last is not None and now - last < PROGRESS_INTERVAL_MS:
                return
        channel = self._scope.services.channel
        if self._scope.observer is None or not self._active or channel is None:
            return
        with channel.lock:
            if now is None:  # the clock is read once a report (a test's clock ticks)
                now = self._scope.services.now()
            last = self._last_progress_ms
            if not urgent and last is not None and now - last < PROGRESS_INTERVAL_MS:
                self._pending = source
                # Sent one interval on if no later report carries it (`HeldProgress`).
                channel.held.hold(self, PROGRESS_INTERVAL_MS / 1000, self._send_held)
                return
            channel.held.drop(self)
            self._pending = None
            self._last_progress_ms = now
            self._emit_progress(built if built is not None else progress_payload(*source()))

    def _send_held(self) -> None:
        """Send the held-back progress (called by `HeldProgress`, the tree's lock held)."""
        pending, self._pending = self._pending, None
        if pending is None or not self._active:
            return
        self._last_progress_ms = self._scope.services.now()
        self._emit_progress(progress_payload(*pending()))

    def _emit_progress(self, progress: dict[str, Any]) -> None:
        observer = self._scope.observer
        if observer is not None:
            # progress_payload enforces the schema's rules for this payload.
            observer.emit(
                "step.running",
                {"progress": progress},
                payload_checked=True,
                step_id=self._step_id,
                attempt_id=self.attempt_id,
            )

    def report_attempt(self, attempt: int, attributes: Mapping[str, object] | None = None) -> None:
        """Record a logical attempt (retries inside a handler) with flat scalar attributes.

        Raises:
            TypeError: when `attempt` is not a positive integer or an attribute is not a
                string, bool or finite number (`None` values are dropped).
        """
        payload = attempt_payload(attempt, attributes)
        observer = self._scope.observer
        if observer is not None:
            # attempt_payload enforces the schema's rules for this payload.
            observer.emit(
                "step.attempted",
                payload,
                payload_checked=True,
                step_id=self._step_id,
                attempt_id=self.attempt_id,
            )


def _finite(value: object, field: str) -> float:
    # Most counts are ints, exact and finite unless too large for a float.
    if type(value) is int and -_FLOAT_SAFE < value < _FLOAT_SAFE:
        return value
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value
    except OverflowError:  # an int too large for a float
        pass
    raise TypeError(f"progress {field} must be a finite number")


class CheckedRow(SharedPayload):
    """A progress detail row checked once and kept: checking it again returns it as it is.

    Rows a tracker keeps unchanged (settled iteration groups) are made with
    `checked_row`; `chars` is what `_details_surely_fit` counts for the row. Like
    records, they are shared and read-only: each is encoded once, however many
    snapshots carry it.
    """

    __slots__ = ("chars",)
    chars: int


class WireRows(list[dict[str, Any]]):
    """Detail rows a library tracker built already in wire form, taken without a check.

    Every row is a fresh plain `dict` as `detail_row` would return it (a non-empty id
    and a name or label that `bounded_text` leaves as they are, a known status, finite
    counts) or a `CheckedRow`. Only the library makes these, from parts it checked once
    (see `clean_text`); rows from `report_progress` always take `detail_row`.

    `counted` leading rows are already counted for `_details_surely_fit`: they hold
    `counted_chars` characters as it counts them (a tracker's settled groups, counted as
    they settle rather than in every snapshot).
    """

    __slots__ = ("counted", "counted_chars")

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, counted: int = 0) -> None:
        super().__init__(rows)
        self.counted = counted
        self.counted_chars = 0


class CheckedAttributes(dict[str, str | bool | int | float]):
    """Logical-attempt attributes the library built from parts it checked, taken as they are.

    Every key is a name of at most 256 characters, every value a string `clean_text`
    found clean, a bool or an int a JSON line holds exactly, never `None`, and there are
    at most 128 of them: what `attempt_payload` would keep unchanged. Only the library
    makes these (an agent's tool calls: run id, turn, call id and tool name, checked
    once per batch); attributes from `report_attempt` callers always take the check.
    """

    __slots__ = ()


def clean_text(text: object) -> bool:
    """Whether `text` is a string `detail_row` would keep as it is (a row's id, name, label)."""
    return type(text) is str and bounded_text(text, TRACE_STRING_LIMIT) == text


def _row_chars(row: Mapping[str, Any]) -> int:
    return len(row["id"]) + len(row.get("name", "")) + len(row.get("label", ""))


def detail_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The wire form of one progress detail row, its text bounded (see `progress_payload`).

    A fresh row is a plain `dict` of strings and numbers, which the garbage collector
    does not track once kept by a sink.

    Raises:
        TypeError: for a row that is not a mapping with a non-empty string `id`, an
            unknown status, or a count that is not a finite number.
    """
    if type(row) is CheckedRow:
        return row
    row_id = row.get("id") if isinstance(row, Mapping) else None
    if not isinstance(row_id, str) or not row_id:
        raise TypeError("progress details rows must be mappings with a non-empty string id")
    out: dict[str, Any] = {"id": bounded_text(row_id, TRACE_STRING_LIMIT)}
    name, label = row.get("name"), row.get("label")
    if isinstance(name, str):
        out["name"] = bounded_text(name, TRACE_STRING_LIMIT)
    if isinstance(label, str):
        out["label"] = bounded_text(label, TRACE_STRING_LIMIT)
    status = row.get("status")
    if status is not None:
        if status not in PROGRESS_STATUSES:
            raise TypeError(
                f"progress details status must be one of {', '.join(PROGRESS_STATUSES)}"
            )
        out["status"] = status
    for key in ("completed", "total", "depth"):
        value = row.get(key)
        if value is not None:
            out[key] = _finite(value, key)
    return out


def checked_row(row: Mapping[str, Any], *, wire: bool = False) -> CheckedRow:
    """`detail_row(row)` kept as a `CheckedRow`, for a row that goes out many times.

    `wire` says a library tracker built `row` in wire form already (as a `WireRows` row):
    it is kept as it is, `detail_row` would return it unchanged.
    """
    checked = CheckedRow(row if wire else detail_row(row))
    checked.chars = _row_chars(checked)
    return checked


def _details_surely_fit(rows: list[dict[str, Any]]) -> bool:
    """Whether `rows` (from `detail_row`) are sure to fit the detail byte limit, unmeasured.

    A character takes at most 7 bytes of JSON (an escaped surrogate, `\\udXXX`); a row's
    keys, status, punctuation and three finite numbers (at most 310 digits each) at most
    1100 more.
    """
    chars = 0
    uncounted: Iterable[dict[str, Any]] = rows
    if type(rows) is WireRows and rows.counted:
        chars = rows.counted_chars
        uncounted = itertools.islice(rows, rows.counted, None)
    for row in uncounted:
        chars += row.chars if type(row) is CheckedRow else _row_chars(row)
    return 7 * chars + 1100 * len(rows) <= TRACE_DETAIL_BYTE_LIMIT


def _bounded_details(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(rows) <= TRACE_LIST_LIMIT and _details_surely_fit(rows):
        return rows[:]  # a plain list, as the cut below makes
    rows = rows[:TRACE_LIST_LIMIT]
    if _details_surely_fit(rows):
        return rows
    size = json_bytes(rows)
    while rows and size > TRACE_DETAIL_BYTE_LIMIT:
        size -= json_bytes(rows.pop()) + 1  # and its comma
    return rows


def progress_payload(
    completed: float,
    total: float | None,
    message: str | None,
    details: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """Build the wire `progress` object, bounding details to the trace limits.

    It enforces every rule the trace schema has for `progress`, so the record that
    carries it skips the payload schema (`payload_checked`).
    """
    progress: dict[str, Any] = {"completed": _finite(completed, "completed")}
    if total is not None:
        progress["total"] = _finite(total, "total")
    if message is not None:
        if not isinstance(message, str):
            raise TypeError("progress message must be a string")
        progress["message"] = bounded_text(message, TRACE_MESSAGE_LIMIT)
    if details is not None:
        rows: list[dict[str, Any]] = (
            details
            if type(details) is WireRows
            else [row if type(row) is CheckedRow else detail_row(row) for row in details]
        )
        progress["details"] = _bounded_details(rows)
        progress["detailCount"] = len(rows)
    return progress


def _attribute(key: object, value: object) -> str | bool | int | float:
    if not isinstance(key, str) or len(key) > _ATTRIBUTE_NAME_LIMIT:
        raise TypeError("report_attempt attribute names must be strings of at most 256 characters")
    if isinstance(value, str):
        return bounded_text(value, TRACE_STRING_LIMIT)
    if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
        return value
    raise TypeError(f"report_attempt attribute {key} must be a string, bool or finite number")


def attempt_payload(attempt: int, attributes: Mapping[str, object] | None) -> dict[str, Any]:
    """Build the wire payload of `step.attempted`, checking attempt and attributes.

    Strings are cut to 4096 characters; names may hold 256, and at most 128 attributes.
    """
    # A plain `int` (every caller's) first; then any int but a bool.
    if not (type(attempt) is int and 1 <= attempt < _FLOAT_SAFE) and (
        isinstance(attempt, bool)
        or not isinstance(attempt, int)
        or not 1 <= attempt < _FLOAT_SAFE  # one a JSON line can hold
    ):
        raise TypeError("report_attempt attempt must be a positive integer")
    if type(attributes) is CheckedAttributes:
        # Checked where the library built them: a plain copy, as the check would make.
        return {"attempt": attempt, "attributes": dict(attributes)}
    clean: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if value is None:
            continue
        # Most are a short name and an ASCII string or an int, kept as they are: this is
        # `_plain_attribute`, inline, as every tool call reports its attributes.
        if type(key) is str and len(key) <= _ATTRIBUTE_NAME_LIMIT:
            if type(value) is str:
                if len(value) <= TRACE_STRING_LIMIT and value.isascii():
                    clean[key] = value
                    continue
            elif type(value) is int and -_FLOAT_SAFE < value < _FLOAT_SAFE:
                clean[key] = value
                continue
        clean[key] = _attribute(key, value)
    if len(clean) > TRACE_ATTRIBUTE_LIMIT:
        raise TypeError(f"report_attempt takes at most {TRACE_ATTRIBUTE_LIMIT} attributes")
    return {"attempt": attempt, "attributes": clean}


def default_logger() -> PipelineLogger:
    """The `tubeless` logger: silent unless the application configures logging."""
    return _LOGGER


def scope_of(context: ExecutionContext) -> RunScope:
    """The run scope behind a context (for child runs started from a step)."""
    return context._scope

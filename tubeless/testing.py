"""Test doubles for code built on tubeless: use them in your own tests, as ours do."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tubeless import agent, errors, trace
from tubeless._quote import quote as _quote

_TraceRecord = trace.TraceRecord

__all__ = [
    "FakeClock",
    "MemoryCheckpointStore",
    "MemoryTraceSink",
    "RecordingLogger",
    "ScriptedDecide",
    "scripted_decide",
]


class MemoryTraceSink:
    """A trace sink that keeps every exported record in memory, in export order.

    Each record is validated and, unless it is a run's own `TraceRecord`, deep-copied, so
    later changes to the caller's dict do not show. Safe to share between threads.

    Args:
        fail_after: when set, the sink takes this many records and then raises
            `TraceSinkError` on every later `export`, as a broken destination would.
    """

    def __init__(self, *, fail_after: int | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._fail_after = fail_after
        self.flush_count = 0
        """How many times `flush()` was called."""
        self.closed = False
        """Whether `close()` was called."""

    @property
    def records(self) -> list[dict[str, Any]]:
        """A copy of the list of records taken so far, in export order."""
        with self._lock:
            return list(self._records)

    def export(self, record: dict[str, Any]) -> None:
        """Validate and keep `record`.

        Raises:
            TraceRecordError: when `record` is not a valid trace record.
            TraceSinkError: when the sink is closed, or `fail_after` records were taken.
        """
        # A run's own records are already checked and never change; check and copy
        # anything else.
        if type(record) is not _TraceRecord:
            trace.validate_record(record)
            record = copy.deepcopy(record)
        with self._lock:
            if self.closed or self._fail_after is not None:
                self._refuse()
            self._records.append(record)

    def _refuse(self) -> None:
        if self.closed:
            raise errors.TraceSinkError("MemoryTraceSink is closed")
        if self._fail_after is not None and len(self._records) >= self._fail_after:
            raise errors.TraceSinkError(f"MemoryTraceSink fails after {self._fail_after} records")

    def flush(self) -> None:
        """Count the call; the records are already in memory."""
        with self._lock:
            self.flush_count += 1

    def close(self) -> None:
        """Refuse later records; the kept ones stay readable."""
        with self._lock:
            self.closed = True


_WRITE_FAILED = "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"


class MemoryCheckpointStore:
    """A checkpoint store in memory, for durable agents in tests (one process only).

    Leases follow the store protocol: one live lease per key (a second `acquire` raises
    `TUBELESS_AGENT_EXECUTION_BUSY`), `write` replaces the text, `close` keeps it.
    Thread-safe.

    Args:
        fail_after: when set, the store takes this many writes in all and then refuses
            every later one with `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` (the text saved
            stays the last one taken), as a broken disk would. Settable later.
    """

    def __init__(self, *, fail_after: int | None = None) -> None:
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._held: set[str] = set()
        self.fail_after = fail_after
        self.writes = 0
        """Writes taken so far (every key)."""

    def acquire(self, key: str) -> _MemoryLease:
        """Lease `key`.

        Raises:
            AgentError: `TUBELESS_AGENT_EXECUTION_BUSY` while another lease holds it.
        """
        with self._lock:
            if key in self._held:
                raise errors.AgentError(
                    f"Execution {_quote(key)} is running elsewhere (its checkpoint is leased)",
                    code="TUBELESS_AGENT_EXECUTION_BUSY",
                )
            self._held.add(key)
        return _MemoryLease(self, key)

    def checkpoint(self, key: str) -> str | None:
        """The text saved under `key` (without leasing it)."""
        with self._lock:
            return self._texts.get(key)

    def pending_approvals(self, key: str) -> tuple[errors.PendingApproval, ...]:
        """The calls of execution `key` waiting for approval (see `SqliteCheckpointStore`)."""
        return agent.checkpoint_pending_approvals(self.checkpoint(key))

    def put(self, key: str, text: str) -> None:
        """Replace what is saved under `key` (to test corrupt or foreign checkpoints)."""
        with self._lock:
            self._texts[key] = text

    def _write(self, key: str, text: str) -> None:
        with self._lock:
            if self.fail_after is not None and self.writes >= self.fail_after:
                raise errors.AgentError(
                    f"MemoryCheckpointStore fails after {self.fail_after} writes",
                    code=_WRITE_FAILED,
                )
            self.writes += 1
            self._texts[key] = text

    def _release(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)


class _MemoryLease:
    def __init__(self, store: MemoryCheckpointStore, key: str) -> None:
        self._store = store
        self._key = key
        self._open = True

    def read(self) -> str | None:
        return self._store.checkpoint(self._key)

    def write(self, text: str) -> None:
        if not self._open:
            raise errors.AgentError("Checkpoint lease is closed", code=_WRITE_FAILED)
        self._store._write(self._key, text)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._store._release(self._key)


class FakeClock:
    """A run clock you control: pass it as `now`, and its `sleep` as the run's `sleep`.

    Each reading advances the clock by `tick` milliseconds, so durations are
    deterministic; `sleep` advances it by the slept time instead of waiting (and returns
    at once when the run's signal is set, as a real sleep would). Thread-safe.
    """

    def __init__(self, start: int = 1_700_000_000_000, *, tick: int = 0) -> None:
        self._lock = threading.Lock()
        self._now = start
        self._tick = tick
        self.slept: list[float] = []
        """Every requested sleep, in seconds, in call order."""

    def __call__(self) -> int:
        with self._lock:
            value = self._now
            self._now += self._tick
            return value

    def advance(self, milliseconds: int) -> None:
        """Move the clock forward."""
        with self._lock:
            self._now += milliseconds

    def sleep(self, seconds: float, signal: threading.Event) -> None:
        """Record the sleep and advance the clock unless the run is already cancelled."""
        with self._lock:
            self.slept.append(seconds)
            if not signal.is_set():
                self._now += round(seconds * 1000)


class RecordingLogger:
    """A run logger (`info`/`warning`/`error`) that keeps `(level, message)` pairs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.lines: list[tuple[str, str]] = []
        """Every `(level, message)` logged, in order."""

    def _keep(self, level: str, message: str) -> None:
        with self._lock:
            self.lines.append((level, message))

    def info(self, msg: str) -> None:
        """Keep an ordinary message."""
        self._keep("info", msg)

    def warning(self, msg: str) -> None:
        """Keep a warning."""
        self._keep("warning", msg)

    def error(self, msg: str) -> None:
        """Keep an error."""
        self._keep("error", msg)

    def messages(self, level: str) -> list[str]:
        """Every message logged at `level`, in order."""
        with self._lock:
            return [message for kept, message in self.lines if kept == level]


ScriptEntry = Any | Callable[[Any, agent.DecisionContext], Any]


class ScriptedDecide:
    """Replays `decisions[turn - 1]` on each turn of every invocation.

    An entry is a decision (returned as is, so malformed ones test the harness's checks)
    or a callable `entry(state, context)` returning one. The turn number picks the entry,
    so concurrent invocations each replay the script from the start.

    Attributes:
        seen: `(turn, state)` for every call, in call order (thread-safe).
    """

    def __init__(self, decisions: Sequence[ScriptEntry]) -> None:
        self._decisions = tuple(decisions)
        self._lock = threading.Lock()
        self.seen: list[tuple[int, Any]] = []

    def __call__(self, state: Any, context: agent.DecisionContext) -> Any:
        with self._lock:
            self.seen.append((context.turn, state))
        if context.turn > len(self._decisions):
            raise LookupError(
                f"Scripted decide has no decision for turn {context.turn} "
                f"(the script has {len(self._decisions)})"
            )
        entry = self._decisions[context.turn - 1]
        return entry(state, context) if callable(entry) else entry


def scripted_decide(decisions: Sequence[ScriptEntry]) -> ScriptedDecide:
    """Build a `decide` that returns `decisions[turn - 1]` (or calls it with state, context)."""
    return ScriptedDecide(decisions)

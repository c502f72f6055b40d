"""Test doubles for code built on tubeless: use them in your own tests, as ours do."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from tubeless import agent, errors, trace
from tubeless._quote import quote as _quote
from tubeless.agent.lowlevel import fold_changes as _fold_changes
from tubeless.trace import TraceRecord as _TraceRecord
from tubeless.trace.lowlevel import kept_record as _kept_record

Cassette = agent.Cassette
CassetteDocument = agent.CassetteDocument

__all__ = [
    "Cassette",
    "CassetteDocument",
    "FakeClock",
    "MemoryCheckpointStore",
    "MemoryTraceSink",
    "RecordingLogger",
    "ScriptedDecide",
    "assert_trajectory",
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
        if type(record) is _TraceRecord and not self.closed and self._fail_after is None:
            # A run's own record passes `validate_record` and `kept_record` at once (it
            # was checked as it was built and never changes), and with nothing to refuse
            # one `append` (atomic) keeps it: every record of a traced run comes here.
            self._records.append(record)
            return
        trace.validate_record(record)
        record = _kept_record(record)
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
    `TUBELESS_AGENT_EXECUTION_BUSY`), `write` replaces the text (and drops the changes
    appended to it), `append` logs a change, `close` keeps both. Thread-safe.

    Args:
        fail_after: when set, the store takes this many writes (and appends) in all and
            then refuses every later one with `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED`
            (what was saved stays as the last one taken left it), as a broken disk would.
            Settable later.
        changes: `False` gives leases without `append`, so the journal saves the whole
            checkpoint on every write (as it does with a store that cannot append).
    """

    def __init__(self, *, fail_after: int | None = None, changes: bool = True) -> None:
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._changes: dict[str, list[str]] = {}
        self._held: set[str] = set()
        self._lease_type = _MemoryLease if changes else _MemoryWholeLease
        self.fail_after = fail_after
        self.writes = 0
        """Writes and appends taken so far (every key)."""

    def acquire(self, key: str) -> _MemoryWholeLease:
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
        return self._lease_type(self, key)

    def checkpoint(self, key: str) -> str | None:
        """The checkpoint saved under `key` (without leasing it), its changes replayed.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` when the changes do not fit.
        """
        with self._lock:
            text = self._texts.get(key)
            changes = list(self._changes.get(key, ()))
        return None if text is None else _fold_changes(text, changes)

    def pending_approvals(self, key: str) -> tuple[errors.PendingApproval, ...]:
        """The calls of execution `key` waiting for approval (see `SqliteCheckpointStore`)."""
        return agent.checkpoint_pending_approvals(self.checkpoint(key))

    def put(self, key: str, text: str) -> None:
        """Replace what is saved under `key` (to test corrupt or foreign checkpoints)."""
        with self._lock:
            self._texts[key] = text
            self._changes.pop(key, None)

    def _write(self, key: str, text: str, *, change: bool = False) -> None:
        with self._lock:
            if self.fail_after is not None and self.writes >= self.fail_after:
                raise errors.AgentError(
                    f"MemoryCheckpointStore fails after {self.fail_after} writes",
                    code=_WRITE_FAILED,
                )
            self.writes += 1
            if change:
                self._changes.setdefault(key, []).append(text)
            else:
                self._texts[key] = text
                self._changes.pop(key, None)

    def _release(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)


class _MemoryWholeLease:
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


class _MemoryLease(_MemoryWholeLease):
    def append(self, change: str) -> None:
        if not self._open:
            raise errors.AgentError("Checkpoint lease is closed", code=_WRITE_FAILED)
        self._store._write(self._key, change, change=True)


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


TrajectoryMatch = Literal["exact", "in_order", "any_order"]
ExpectedCall = str | tuple[str, Any]


def assert_trajectory(
    run: agent.Cassette | agent.CassetteDocument,
    expected: Sequence[ExpectedCall],
    *,
    match: TrajectoryMatch = "exact",
    args: bool = True,
) -> None:
    """Check the tool calls a run made, from its cassette's records.

    The run's calls are read in decision order, depth first: a subagent's calls follow the
    call that started it. Inputs are the raw inputs the model gave, before the tools'
    schemas.

    Args:
        run: the `Cassette` the run recorded or replayed (its last run), or a document.
        expected: `(tool, input)` pairs, or tool names alone (then only the name counts).
        match: `"exact"` the same sequence; `"in_order"` the expected calls in this order,
            others may come between; `"any_order"` each expected call somewhere.
        args: compare inputs too (`False`: names only).

    Raises:
        AssertionError: the calls do not match; the message shows both sequences.
        ValueError: `match` is not one of the three, or the cassette has not seen a run.
    """
    if match not in ("exact", "in_order", "any_order"):
        raise ValueError(f"match must be exact, in_order or any_order, got {_quote(match)}")
    document = run.document if isinstance(run, agent.Cassette) else run
    if document is None:
        raise ValueError("The cassette has not seen a completed run yet")
    actual = _calls_of(document)
    wanted = [_expected_call(item, args) for item in expected]
    if _matches(actual, wanted, match):
        return
    raise AssertionError(
        f"Trajectory does not match ({match}, args={args}).\n"
        f"Expected:\n{_listing(wanted)}\nActual:\n{_listing(actual)}"
    )


def _calls_of(document: agent.CassetteDocument) -> list[tuple[str, Any]]:
    turns = {recorded.path: recorded.turns for recorded in document.agents}
    children = {
        f"{path}/{turn.turn}/{call['id']}"
        for path, recorded in turns.items()
        for turn in recorded
        for call in turn.decision.get("calls", ())
    }
    calls: list[tuple[str, Any]] = []

    def walk(path: str) -> None:
        for turn in turns[path]:
            for call in turn.decision.get("calls", ()):
                calls.append((call["tool"], call["input"]))
                child = f"{path}/{turn.turn}/{call['id']}"
                if child in turns:
                    walk(child)

    for path in turns:
        if path not in children:
            walk(path)
    return calls


_ANY_INPUT = object()


def _expected_call(item: ExpectedCall, args: bool) -> tuple[str, Any]:
    if isinstance(item, str):
        return item, _ANY_INPUT
    if not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[0], str):
        raise ValueError(f"An expected call is a tool name or (tool, input), got {_quote(item)}")
    return item[0], item[1] if args else _ANY_INPUT


def _same(actual: tuple[str, Any], wanted: tuple[str, Any]) -> bool:
    if actual[0] != wanted[0]:
        return False
    return wanted[1] is _ANY_INPUT or _canonical(actual[1]) == _canonical(wanted[1])


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))


def _matches(
    actual: list[tuple[str, Any]], wanted: list[tuple[str, Any]], match: TrajectoryMatch
) -> bool:
    if match == "exact":
        return len(actual) == len(wanted) and all(map(_same, actual, wanted))
    if match == "in_order":
        remaining = iter(actual)
        return all(any(_same(call, item) for call in remaining) for item in wanted)
    left = list(actual)
    # Calls with inputs claim their match first, so a bare name cannot take it from them.
    for item in sorted(wanted, key=lambda item: item[1] is _ANY_INPUT):
        found = next((call for call in left if _same(call, item)), None)
        if found is None:
            return False
        left.remove(found)
    return True


def _listing(calls: list[tuple[str, Any]]) -> str:
    if not calls:
        return "  (no calls)"
    lines = []
    for position, (tool, value) in enumerate(calls, 1):
        shown = "" if value is _ANY_INPUT else f" {_quote(_canonical(value), 200)}"
        lines.append(f"  {position}. {tool}{shown}")
    return "\n".join(lines)

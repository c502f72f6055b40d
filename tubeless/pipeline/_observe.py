"""The one event stream: trace records built for a run and handed to its sink and hooks.

Nothing here runs unless something observes the run: with no sink and no hooks the
executor holds no `RunObserver` and builds no record at all.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tubeless._types import Hook
from tubeless.errors import TraceRecordError, TraceSinkError
from tubeless.pipeline._controls import PipelineLogger
from tubeless.pipeline._held_progress import HeldProgress
from tubeless.trace import TRACE_VERSION, TraceRecord, TraceSink
from tubeless.trace.lowlevel import (
    RecordHead,
    check_own_fields,
    check_record,
    record_size_problem,
    shared_fields_valid,
)

Record = dict[str, Any]

_SAFE = 2**53

_HOOK_BY_RECORD = {
    "pipeline.started": "on_pipeline_start",
    "step.planned": "on_step_plan",
    "step.attempted": "on_step_attempt",
    "pipeline.log": "on_log",
    "step.complete": "on_step_complete",
    "step.skipped": "on_step_skip",
    "step.cancelled": "on_step_cancel",
    "step.failed": "on_step_fail",
    "pipeline.finalize.started": "on_finalize_start",
    "pipeline.finalize.completed": "on_finalize_complete",
    "pipeline.finalize.failed": "on_finalize_error",
    "pipeline.completed": "on_pipeline_complete",
}


_time_ns = time.time_ns

QUEUE_BOUND = 1024
"""Records queued behind a busy deliverer before a child run waits to start."""


def default_now() -> int:
    """Wall clock in epoch milliseconds."""
    return _time_ns() // 1_000_000


def _hook_names(record: Record) -> tuple[str, ...]:
    name = record["name"]
    if name == "step.running":
        specific = "on_step_progress" if "progress" in record["payload"] else "on_step_start"
    else:
        specific = _HOOK_BY_RECORD[name]
    # A logical attempt (`step.attempted`) reports a retry inside a handler, not a change
    # of the step's status.
    if name.startswith("step.") and name != "step.attempted":
        return ("on_record", specific, "on_step_status")
    return ("on_record", specific)


def _plain(value: object) -> bool:
    """Whether `value` is an integer every JSON reader keeps exactly (what a clock gives)."""
    return type(value) is int and -_SAFE < value < _SAFE


class TraceChannel:
    """What one run tree shares: the record queue, the sink and its health.

    Records are delivered in the order they were queued, by one thread at a time: the
    thread that takes the delivery token drains the queue (including records queued
    meanwhile by others), so no thread waits on a sink while another delivers. The
    token is released before the queue is looked at a last time, and a thread that
    queues a record tries the token after queueing it, so no record is left behind.
    Only a sink slower than the run makes a thread wait, and only where it holds none of
    the run's locks (a child run's start, see `wait_for_room`): with `QUEUE_BOUND`
    records queued, it waits until the deliverer brought the queue back under it, so the
    queue stays bounded and the run goes at the sink's pace (a stream's reader).
    """

    __slots__ = (
        "_export",
        "_queue",
        "_room",
        "_snapshots",
        "_token",
        "_waiting",
        "held",
        "lock",
        "log",
        "sink",
    )

    def __init__(self, sink: TraceSink | None, log: PipelineLogger) -> None:
        self.lock = threading.RLock()
        """Serialises what run trees share besides delivery (progress throttling)."""
        self.held = HeldProgress(self.lock)
        """Sends the steps' held-back progress one interval on (one thread while any)."""
        self.sink = sink
        self.log = log
        self._export = None if sink is None else sink.export
        """The sink's `export` while it is healthy, else `None` (no sink, or retired)."""
        self._snapshots: set[str] = set()
        self._queue: collections.deque[tuple[RunObserver, Record]] = collections.deque()
        self._token = threading.Lock()
        self._room = threading.Condition(threading.Lock())
        """Notified when the queue is back under `QUEUE_BOUND` (or nobody delivers)."""
        self._waiting = 0
        """Threads waiting on `_room`."""

    def deliver(self, observer: RunObserver, record: Record) -> None:
        """Deliver `record` now (then what others queue meanwhile), or queue it behind one."""
        token = self._token
        if not token.acquire(False):
            self._queue.append((observer, record))
            if not token.acquire(False):
                return  # the deliverer will find it
        elif self._queue:
            # Records a failed delivery left in the queue go first.
            self._queue.append((observer, record))
        else:
            try:
                # `export`, inline: this runs for every record of the tree.
                export = self._export
                if export is not None:
                    try:
                        export(record)
                    except Exception as error:
                        self._sink_failed(error)
                if observer._hooks:
                    observer.call_hooks(record)
            except BaseException:
                token.release()
                self._make_room()
                raise
            if not self._queue:
                token.release()
                if not self._queue or not token.acquire(False):
                    return
        self._drain()

    def _drain(self) -> None:
        """Deliver the queue, holding the token; release it when the queue is empty."""
        queue, token = self._queue, self._token
        try:
            while True:
                while queue:
                    observer, record = queue.popleft()
                    if self._waiting and len(queue) <= QUEUE_BOUND:
                        self._make_room()
                    self.export(record)
                    observer.call_hooks(record)
                token.release()
                # Queued after the last look, by a thread that found the token taken.
                if not queue or not token.acquire(False):
                    return
        except BaseException:
            token.release()
            self._make_room()
            raise

    def wait_for_room(self) -> None:
        """Wait while the queue is over `QUEUE_BOUND` and another thread delivers.

        Called where the thread holds no lock the deliverer may need (its hooks take the
        run's record lock): as a child run starts, never from `deliver`, whose hooks may
        queue records of their own while the queue is over the bound.
        """
        if len(self._queue) <= QUEUE_BOUND:
            return
        with self._room:
            self._waiting += 1
            try:
                while len(self._queue) > QUEUE_BOUND and self._token.locked():
                    self._room.wait()
            finally:
                self._waiting -= 1

    def _make_room(self) -> None:
        """Wake the threads waiting for room."""
        with self._room:
            self._room.notify_all()

    def settle(self) -> None:
        """Wait until every queued record has been delivered."""
        self._token.acquire()
        self._drain()

    def first_snapshot(self, definition_id: str) -> bool:
        """Whether no run of this tree has sent the snapshot of `definition_id` yet.

        A definition's snapshot goes out with the first run of it in the tree; later runs
        (every turn, every tool call) carry the identity alone.
        """
        if definition_id in self._snapshots:
            return False
        self._snapshots.add(definition_id)
        return True

    @property
    def tracing(self) -> bool:
        """Whether records still go to a healthy sink."""
        return self._export is not None

    def export(self, record: Record) -> None:
        """Hand `record` to the sink; a failure warns once and retires the sink."""
        export = self._export
        if export is None:
            return
        try:
            export(record)
        except Exception as error:
            self._sink_failed(error)

    def _sink_failed(self, error: Exception) -> None:
        if isinstance(error, TraceRecordError):
            # The sink refused this record alone (a line it could not write back): go on.
            self.log.warning(f"Trace sink refused a record: {error}")
        elif isinstance(error, TraceSinkError):
            self.log.warning(f"Trace sink failed: {error}")
            if not error.partial:
                self._export = None
        else:
            self.log.warning(f"Trace sink failed; later records of this run are dropped: {error}")
            self._export = None

    def flush(self) -> None:
        """Flush the sink at the end of the root run; a failure only warns."""
        flush = getattr(self.sink, "flush", None)
        if self._export is None or not callable(flush):
            return
        try:
            flush()
        except Exception as error:
            self.log.warning(f"Trace sink failed to flush: {error}")


def _plain_shared(base: Record) -> bool:
    """Whether a run's shared fields hold values such as the library shapes, all valid.

    Strictly narrower than `shared_fields_valid` (which decides anything else): exact
    strings, non-empty where the schema says so, and an `iteration` of non-empty string
    ids, a plain positive index and the `runId` of the record's `parentRunId`.
    """
    for key, value in base.items():
        if type(value) is str:
            if not value and key in _NON_EMPTY_SHARED:
                return False
            if key not in _SHARED_STRINGS:
                return False
        elif key != "iteration" or not _plain_iteration(value, base.get("parentRunId")):
            return False
    return "pipelineId" in base and "runId" in base


_NON_EMPTY_SHARED = frozenset({"pipelineId", "runId"})
_SHARED_STRINGS = frozenset({"pipelineId", "runId", "correlationId", "parentRunId", "itemKey"})
_ITERATION_IDS = ("runId", "stepId", "attemptId")


def _plain_iteration(value: object, parent_run_id: object) -> bool:
    if type(value) is not dict or len(value) != 4 or value.get("runId") != parent_run_id:
        return False
    for key in _ITERATION_IDS:
        text = value.get(key)
        if type(text) is not str or not text:
            return False
    index = value.get("index")
    return type(index) is int and 0 < index < _SAFE


Target = tuple[int, str, Hook]


class RunObserver:
    """Builds the records of one run and delivers them, serialised, to sink and hooks."""

    __slots__ = (
        "_base_valid",
        "_channel",
        "_failed_hooks",
        "_head",
        "_hooks",
        "_now",
        "_targets",
        "_targets_by_kind",
        "_wall_clock",
    )

    def __init__(
        self,
        channel: TraceChannel,
        hooks: Sequence[dict[str, Hook]],
        base: Record,
        now: Callable[[], int],
    ) -> None:
        self._channel = channel
        self._hooks = tuple(hooks)
        # Every record's hooks, when no hook set names a specific one (child-run trackers
        # take every record); `None` looks them up by record kind. Most child runs (tool
        # calls) have no hook: then none of the hook state is made.
        self._targets: tuple[Target, ...] | None = ()
        if self._hooks:
            self._targets_by_kind: dict[tuple[str, bool], tuple[Target, ...]] = {}
            self._failed_hooks: set[int] = set()
            if any(hook_set.keys() != {"on_record"} for hook_set in self._hooks):
                self._targets = None
            else:
                self._targets = tuple(
                    (index, "on_record", hook_set["on_record"])
                    for index, hook_set in enumerate(self._hooks)
                )
        # Every record starts from this: `version`, `name`, then the shared fields.
        self._head = RecordHead(base)
        self._wall_clock = now is default_now
        # Every record of the run repeats these fields: they are checked here, once.
        self._base_valid = _plain_shared(base) or shared_fields_valid(
            {"version": TRACE_VERSION, **base}
        )
        self._now = now

    def emit(
        self,
        name: str,
        payload: Record,
        *,
        payload_checked: bool = False,
        at: Any = None,
        step_id: Any = None,
        attempt_id: Any = None,
        duration_ms: Any = None,
        error: Any = None,
    ) -> bool:
        """Build, check and deliver one record named `name`; return whether it was valid.

        `at` is its `timestampMs` when the caller just read the run clock for the moment
        the record marks (an attempt's start, a report's end); otherwise the clock is read.
        `step_id`, `attempt_id`, `duration_ms` and `error` are the record's `stepId`,
        `attemptId`, `durationMs` and `error`, in that order, each left out when `None`.

        `payload_checked` skips the payload's own schema for a payload known to be valid
        (built by the library from checked parts, or by a function enforcing the schema's
        rules for it). Such a record skips the schema altogether when its other fields are
        ones the library shaped holding plain values: `stepId` and `attemptId` non-empty
        strings, `timestampMs` and `durationMs` integers such as a clock gives, no error.
        Anything else (a user clock's float, an error object) takes the full check.
        """
        # The wall clock is read inline, without `default_now`'s call: once per record.
        now = at
        if now is None:
            now = _time_ns() // 1_000_000 if self._wall_clock else self._now()
        record = self._head.record(name)
        record["timestampMs"] = now
        lean = payload_checked and self._base_valid and type(now) is int and -_SAFE < now < _SAFE
        # The lean checks, inline: non-empty string ids and a plain `durationMs` only.
        if step_id is not None:
            record["stepId"] = step_id
            if type(step_id) is not str or not step_id:
                lean = False
        if attempt_id is not None:
            record["attemptId"] = attempt_id
            if type(attempt_id) is not str or not attempt_id:
                lean = False
        if duration_ms is not None:
            record["durationMs"] = duration_ms
            if type(duration_ms) is not int or not -_SAFE < duration_ms < _SAFE:
                lean = False
        if error is not None:
            record["error"] = error
            lean = False
        record["payload"] = payload
        if lean:
            self._channel.deliver(self, record)
            return True
        return self._checked_emit(record, now, payload_checked)

    def _checked_emit(self, record: TraceRecord, now: Any, payload_checked: bool) -> bool:
        """`emit` for a record that takes the schema: check, then deliver or drop it."""
        # The record's own fields: everything after the head's.
        own = dict(itertools.islice(record.items(), len(self._head.fields), None))
        try:
            if self._base_valid:
                check_own_fields(record, own, payload_checked=payload_checked)
            else:
                check_record(record, payload_checked=payload_checked)
            if not (_plain(now) and _plain(own.get("durationMs", 0))):
                # A clock's odd reading (an int too long to write, say) must still encode.
                problem = record_size_problem(record)
                if problem is not None:
                    raise TraceRecordError(f"at {problem[0]}: {problem[1]}")
        except Exception as error:
            name = record["name"]
            self._channel.log.warning(f"Dropped an invalid trace record {name}: {error}")
            return False
        self._channel.deliver(self, record)
        return True

    def call_hooks(self, record: Record) -> None:
        """Call this run's hooks for `record` (by the delivering thread, one at a time)."""
        targets = self._targets
        if targets is None:
            name = record["name"]
            kind = (name, name == "step.running" and "progress" in record["payload"])
            targets = self._targets_by_kind.get(kind)
            if targets is None:
                targets = self._targets_by_kind[kind] = self._targets_for(record)
        for index, hook_name, hook in targets:
            try:
                hook(record)
            except Exception as error:
                if index not in self._failed_hooks:
                    self._failed_hooks.add(index)
                    self._channel.log.warning(f"Pipeline hook {hook_name} failed: {error}")

    def _targets_for(self, record: Record) -> tuple[Target, ...]:
        """The hooks a record of `record`'s kind goes to, in call order."""
        names = _hook_names(record)
        return tuple(
            (index, hook_name, hook_set[hook_name])
            for index, hook_set in enumerate(self._hooks)
            for hook_name in names
            if hook_set.get(hook_name) is not None
        )

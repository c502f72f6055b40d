"""`pipeline.stream(...)`: a run on a worker thread, its events read as they happen.

The run's trace records pass through an `EventProjection` inside a sink of the stream's
own (composed with the caller's `tracing`, if any), and the events wait in a bounded
buffer. A lifecycle event waits for room (the run waits for its reader: none is ever
dropped); a progress event of a call replaces the one of the same call still waiting,
and is dropped when the buffer is full (a later progress or the call's end follows).
Leaving the stream early sets the run's signal, stops waiting for room, and joins the
worker: nothing of the run outlives the stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import threading
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any

from tubeless._types import ContextLike, ControlsLike
from tubeless.pipeline._controls import resolve_context
from tubeless.pipeline._run_result import PipelineRun
from tubeless.trace import EventProjection, RunEvent, compose_sinks
from tubeless.trace.lowlevel import error_code

__all__ = ["AsyncRunStream", "RunStream"]

BUFFER = 256
"""Events waiting for the reader before a lifecycle event makes the run wait."""

_DONE = object()
_EMPTY = object()


class _Buffer:
    """The bounded event buffer between the run's threads and the reader.

    Only a waiting thread is notified (the reader on an empty buffer, a writer on a full
    one): `_waiting` counts them, under the lock, so most events take the lock alone.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: collections.deque[Any] = collections.deque()
        self._progress: dict[str, RunEvent] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting = 0
        """Threads waiting on `_changed`."""
        self._closed = False
        self.waker: Callable[[], None] | None = None
        """Called (off the lock) when an item arrives for a reader that `poll`ed in vain."""
        self._polled_in_vain = False

    def put(self, event: RunEvent) -> None:
        with self._lock:
            if event.kind == "call.progress":
                key = f"{event.run_id}/{'/'.join(event.path)}"
                if key in self._progress:
                    self._progress[key] = event
                    return
                if len(self._items) >= self._capacity:
                    return
                self._progress[key] = event
                self._items.append(key)
            else:
                while len(self._items) >= self._capacity and not self._closed:
                    self._wait()
                if self._closed:
                    return
                self._items.append(event)
            wake = self._arrived()
        if wake is not None:
            wake()

    def _wait(self) -> None:
        self._waiting += 1
        try:
            self._changed.wait()
        finally:
            self._waiting -= 1

    def _arrived(self) -> Callable[[], None] | None:
        """Wake the readers (lock held); the waker to call once the lock is released."""
        if self._waiting:
            self._changed.notify_all()
        if not self._polled_in_vain:
            return None
        self._polled_in_vain = False
        return self.waker

    def end(self) -> None:
        """Mark the end of the events (the run returned)."""
        with self._lock:
            self._items.append(_DONE)
            wake = self._arrived()
        if wake is not None:
            wake()

    def close(self) -> None:
        """Stop taking events: writers no longer wait for room."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    def get(self) -> RunEvent | None:
        """The next event, or `None` at the end."""
        with self._lock:
            while not self._items:
                self._wait()
            return self._take()

    def poll(self) -> RunEvent | object | None:
        """The next event, `None` at the end, or `_EMPTY` (then `waker` runs on the next
        arrival)."""
        with self._lock:
            if self._items:
                return self._take()
            self._polled_in_vain = True
            return _EMPTY

    def _take(self) -> RunEvent | None:
        item = self._items.popleft()
        if self._waiting:
            self._changed.notify_all()
        if item is _DONE:
            self._items.appendleft(_DONE)
            return None
        if type(item) is str:
            return self._progress.pop(item)
        event: RunEvent = item
        return event


class _EventSink:
    """The stream's trace sink: records in, events into the buffer; never raises."""

    def __init__(self, buffer: _Buffer) -> None:
        self.projection = EventProjection(root_events=False)
        self._buffer = buffer
        self.root: tuple[str, int] | None = None
        """The root run's pipeline id and start time, once its first record arrived."""

    def export(self, record: dict[str, Any]) -> None:
        if self.root is None and record["name"] == "pipeline.started":
            self.root = (str(record["pipelineId"]), int(record["timestampMs"]))
            self._buffer.put(
                RunEvent(
                    kind="run.started",
                    run_id=str(record["runId"]),
                    path=(self.root[0],),
                    at=self.root[1],
                )
            )
        for event in self.projection.project(record):
            self._buffer.put(event)


class RunStream:
    """The events of one run as it happens; made by `pipeline.stream(...)`.

    Use it as a context manager and iterate it: `with agent.stream(options) as events:
    for event in events: ...`. `result` is the `PipelineRun` once the run ended (its
    events exhausted, or the stream closed). Leaving the block early (`break`, an
    exception, `close()`) cancels the run and waits for it. The context's `signal`, when
    given, is the one set then.
    """

    def __init__(
        self,
        pipeline: Any,
        options: Any,
        controls: ControlsLike | None,
        context: ContextLike | None,
        *,
        buffer: int = BUFFER,
    ) -> None:
        resolved = resolve_context(context)
        self._signal: threading.Event = resolved.signal or threading.Event()
        self._buffer = _Buffer(buffer)
        self._sink = _EventSink(self._buffer)
        tracing = (
            self._sink if resolved.tracing is None else compose_sinks(resolved.tracing, self._sink)
        )
        self._context = dataclasses.replace(resolved, signal=self._signal, tracing=tracing)
        self._pipeline, self._options, self._controls = pipeline, options, controls
        self._result: PipelineRun | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="tubeless-stream", daemon=True)

    def _work(self) -> None:
        try:
            run = self._pipeline.run(self._options, controls=self._controls, context=self._context)
            self._result = run
            for event in _closing_events(run, self._sink):
                self._buffer.put(event)
        except BaseException as error:  # handed to the reader, raised there
            self._failure = error
        finally:
            self._buffer.end()

    def __enter__(self) -> RunStream:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[RunEvent]:
        if self._thread.ident is None:  # read without `with`: start the run now
            self._thread.start()
        while True:
            event = self._buffer.get()
            if event is None:
                self._ended()
                return
            yield event

    def _ended(self) -> None:
        """After the last event: join the worker, and raise what `run` raised, if anything."""
        self._thread.join()
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        """Cancel the run if it is still going, and wait for it (idempotent)."""
        if self._thread.ident is None:
            return
        if self._thread.is_alive():
            self._signal.set()
        self._buffer.close()
        self._thread.join()

    @property
    def result(self) -> PipelineRun:
        """The run's report, once the run ended (its events read, or the stream closed).

        Raises:
            RuntimeError: while the run has not ended.
        """
        if self._result is None or self._thread.is_alive():
            raise RuntimeError(
                "The stream's result is there once the run ended: read every event, or close"
            )
        return self._result


def _closing_events(run: PipelineRun, sink: _EventSink) -> list[RunEvent]:
    """`approval.pending` for each waiting call, then the root's `run.finished`."""
    path = (sink.root[0] if sink.root else run.pipeline_id,)
    events = [
        RunEvent(
            kind="approval.pending",
            run_id=pending.agent_run_id,
            path=(*(sink.projection.path_of(pending.agent_run_id) or path), pending.call_id),
            at=run.finished_at_ms,
            turn=pending.turn,
            call_id=pending.call_id,
            tool=pending.tool,
        )
        for pending in run.pending_approvals
    ]
    first = run.errors[0].to_dict() if run.errors else None
    events.append(
        RunEvent(
            kind="run.finished",
            run_id=run.run_id,
            path=path,
            at=run.finished_at_ms,
            status=run.status,
            code=None if run.status == "completed" else error_code(first),
            duration_ms=run.finished_at_ms - run.started_at_ms,
        )
    )
    return events


class AsyncRunStream:
    """`RunStream` for asyncio: `async with pipeline.astream(...) as events:`.

    The run still runs on a worker thread; each event is awaited without blocking the
    event loop, and without holding one of its executor's threads (the worker wakes the
    reader through the loop). Cancelling the task that reads the events cancels the run,
    and leaving the block waits for the run to end.
    """

    def __init__(self, stream: RunStream) -> None:
        self._stream = stream
        self._ready: asyncio.Event | None = None

    async def __aenter__(self) -> AsyncRunStream:
        loop = asyncio.get_running_loop()
        ready = self._ready = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads
                loop.call_soon_threadsafe(ready.set)

        self._stream._buffer.waker = wake
        self._stream.__enter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await asyncio.shield(asyncio.to_thread(self._stream.close))

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self

    async def __anext__(self) -> RunEvent:
        assert self._ready is not None, "use `async with pipeline.astream(...)`"
        try:
            while True:
                self._ready.clear()
                item = self._stream._buffer.poll()
                if item is not _EMPTY:
                    break
                await self._ready.wait()
        except asyncio.CancelledError:
            self._stream._signal.set()
            raise
        if item is None:
            self._stream._ended()  # the worker's last act was to mark the end
            raise StopAsyncIteration
        return typing.cast(RunEvent, item)

    @property
    def result(self) -> PipelineRun:
        """The run's report, once every event was read."""
        return self._stream.result

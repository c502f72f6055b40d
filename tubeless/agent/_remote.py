"""Tool handlers on other executors: only the handler body travels, with a picklable context.

`define_tool(..., executor=...)` keeps everything else in the calling process: the call's
thread validates, holds its permit, writes the trace and waits for the future. What is
shipped is `call_remote(handler, value, context)`; it never lets an exception object
travel back (a `ToolError` comes back as its code and message, anything else as its type
name and message), so no remote traceback, attribute or local ever reaches the caller.

Cancellation crosses processes through one flag per local signal (shared by the calls in
flight under it) that materializes only when the run is cancelled: for Dask, a
`distributed.Event` on the scheduler (set on cancel, cleared after the drain, so it leaves
no state behind); for every other executor, an empty file in the temporary directory
(made on cancel, removed after the drain), which workers on the same host see with one
`stat`. A run that is never cancelled creates neither, and
no helper process or thread is ever started.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import os
import pickle
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote
from tubeless.agent._deadline import deadline_error, seconds_left
from tubeless.errors import AgentDefinitionError, AgentError, RunCancelledError, ToolError
from tubeless.pipeline import StepContext
from tubeless.pipeline.lowlevel import cancellation_message, raise_if_cancelled

_POLL_SECONDS = 0.02
"""How often a waiting call looks at the local signal, and a file flag at its file."""
_MESSAGE_LIMIT = 4096
"""How much of a remote exception's message travels back."""
_NAME_LIMIT = 200
REMOTE_FAILED = "TUBELESS_AGENT_REMOTE_HANDLER_FAILED"
_EMPTY = FrozenDict()


class RemoteSignal:
    """The read-only cancellation signal a remote tool handler sees (`context.signal`).

    It answers the same two questions as a `threading.Event` (`is_set`, `wait`), from
    another process: set when the calling run is cancelled.
    """

    __slots__ = ()

    def is_set(self) -> bool:
        """Whether the calling run has been cancelled."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run is cancelled or `timeout` seconds pass; return `is_set()`."""
        raise NotImplementedError


class _FileSignal(RemoteSignal):
    """Set when a file exists: same host, any process, no helper process."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_FileSignal, (self._path,))

    def is_set(self) -> bool:
        return os.path.exists(self._path)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = _POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, _POLL_SECONDS))
        return True


class _DaskSignal(RemoteSignal):
    """A `distributed.Event` on the scheduler, read through the worker's client."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (_DaskSignal, (self._name,))

    def _event(self) -> Any:
        return _distributed_event(self._name, None)

    def is_set(self) -> bool:
        return bool(self._event().is_set())

    def wait(self, timeout: float | None = None) -> bool:
        return bool(self._event().wait(timeout))


def _distributed_event(name: str, client: Any) -> Any:
    return importlib.import_module("distributed").Event(name, client=client)


class RemoteToolContext:
    """What a tool handler on another executor receives: plain data and a signal.

    Attributes:
        dry_run: whether this is a dry run.
        run_id: the id of the tool's run.
        parent_run_id: the parent run's id (the agent turn).
        correlation_id: the correlation id.
        attempt_id: the attempt id of the tool's step.
        cwd: the caller's working directory.
        trace: trace identity when tracing is on.
        signal: set when the calling run is cancelled (read across processes).
        deadline: the `time.monotonic()` of the worker at which this attempt times out, or
            `None`. It travels as the seconds left when the call was sent, so it holds
            on another host too (the time in transit is not counted).
    """

    __slots__ = (
        "attempt_id",
        "correlation_id",
        "cwd",
        "deadline",
        "dry_run",
        "parent_run_id",
        "run_id",
        "signal",
        "trace",
    )
    dry_run: bool
    run_id: str
    parent_run_id: str | None
    correlation_id: str | None
    attempt_id: str
    cwd: str
    trace: dict[str, Any] | None
    signal: RemoteSignal
    deadline: float | None

    def __init__(
        self, step: StepContext, signal: RemoteSignal, deadline: float | None = None
    ) -> None:
        self.dry_run = step.dry_run
        self.run_id = step.run_id
        self.parent_run_id = step.parent_run_id
        self.correlation_id = step.correlation_id
        self.attempt_id = step.attempt_id
        self.cwd = step.cwd
        trace = step.trace
        self.trace = None if trace is None else dict(trace)
        self.signal = signal
        self.deadline = deadline

    def __reduce__(self) -> tuple[Any, ...]:
        values = [getattr(self, name) for name in self.__slots__]
        values[self.__slots__.index("deadline")] = self.time_left()
        return (_context, tuple(values))

    def __dask_tokenize__(self) -> str:
        # Every call has its own signal, so two identical calls never share a Dask key
        # (which `pure=True` would otherwise merge into one run).
        return f"{self.run_id}:{self.attempt_id}"

    @property
    def options(self) -> Mapping[str, Any]:
        """Always empty: tools get their validated input as the first argument."""
        return _EMPTY

    def now(self) -> int:
        """The worker's wall clock in epoch milliseconds."""
        return int(time.time() * 1000)

    def time_left(self) -> float | None:
        """Seconds until `deadline` (0 once it has passed), or `None` without one."""
        return seconds_left(self.deadline)

    def sleep(self, seconds: float) -> None:
        """Sleep, but not past the deadline.

        Raises:
            RunCancelledError: when the run is cancelled meanwhile.
            ToolError: `TUBELESS_AGENT_CALL_TIMED_OUT` when the deadline comes first.
        """
        left = self.time_left()
        if self.signal.wait(seconds if left is None else min(seconds, left)):
            raise RunCancelledError("Pipeline run aborted")
        if left is not None and seconds >= left:
            raise deadline_error()


def _context(*values: Any) -> RemoteToolContext:
    """A context unpickled where the handler runs: the seconds left become a deadline."""
    context = object.__new__(RemoteToolContext)
    for name, value in zip(RemoteToolContext.__slots__, values, strict=True):
        if name == "deadline" and value is not None:
            value = time.monotonic() + value
        object.__setattr__(context, name, value)
    return context


def _type_name(error: BaseException) -> str:
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def call_remote(handler: Callable[[Any, RemoteToolContext], Any], value: Any, context: Any) -> Any:
    """Run `handler` where the executor runs it; return a tagged, picklable outcome.

    A call that starts after its run was cancelled (it was queued when the signal came)
    returns at once without running the handler.
    """
    if context.signal.is_set():
        return ("cancelled", "Pipeline run aborted")
    try:
        return ("ok", handler(value, context))
    except ToolError as error:
        return ("tool_error", error.code, error.message)
    except RunCancelledError as error:
        return ("cancelled", _text(error))
    except Exception as error:
        return ("error", _type_name(error), _text(error))


def _text(error: BaseException) -> str:
    try:
        return str(error)[:_MESSAGE_LIMIT]
    except Exception:  # an exception whose __str__ raises still fails the call plainly
        return "(message unavailable)"


def is_dask(executor: concurrent.futures.Executor) -> bool:
    """Whether `executor` is Dask's `Client.get_executor(...)` (without importing Dask)."""
    module = sys.modules.get("distributed.cfexecutor")
    kind = getattr(module, "ClientExecutor", None)
    return kind is not None and isinstance(executor, kind)


def check_remote_handler(handler: object, executor: object, label: str) -> None:
    """Refuse an executor that is not one, or a handler its workers could not receive.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`.
    """
    if not isinstance(executor, concurrent.futures.Executor):
        raise AgentDefinitionError(
            f"{label} executor must be a concurrent.futures.Executor, got {quote(executor)}"
        )
    dumps: Callable[[object], bytes] = pickle.dumps
    if is_dask(executor):
        # distributed's own serializer, always installed with it
        dumps = importlib.import_module("cloudpickle").dumps
    try:
        dumps(handler)
    except Exception as error:
        name = getattr(handler, "__qualname__", handler)
        raise AgentDefinitionError(
            f"{label} handler {quote(name, _NAME_LIMIT)} cannot be pickled for its executor "
            f"({_type_name(error)}: {quote(str(error), _NAME_LIMIT)}): define it at module "
            "level, without closures over locks, sockets or other live objects"
        ) from None


class _FileFlag:
    """The caller's side of a `_FileSignal`: the file is made only on cancel."""

    def __init__(self) -> None:
        name = f"tubeless-cancel-{uuid.uuid4().hex}"
        self._path = os.path.join(tempfile.gettempdir(), name)
        self.remote: RemoteSignal = _FileSignal(self._path)

    def set(self) -> None:
        with open(self._path, "x"):
            pass

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)


class _DaskFlag:
    """The caller's side of a `_DaskSignal`: the event exists on the scheduler only on cancel."""

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self._name = f"tubeless-cancel-{uuid.uuid4().hex}"
        self._client = getattr(executor, "_client", None)
        self.remote: RemoteSignal = _DaskSignal(self._name)

    def _event(self) -> Any:
        return _distributed_event(self._name, self._client)

    def set(self) -> None:
        self._event().set()

    def close(self) -> None:
        self._event().clear()  # deletes the event on the scheduler


_Flag = _FileFlag | _DaskFlag


class _Shared:
    """The flag of one local signal, shared by every remote call in flight under it.

    One flag per signal, not per call: when cancellation comes, the first call to notice
    sets it before any drained handler can return, so a call queued behind them on the
    executor sees it set the moment it starts. The last call out removes it.
    """

    def __init__(self, signal: threading.Event, flag: _Flag) -> None:
        self.signal = signal  # kept alive, so its id stays unique while shared
        self.flag = flag
        self.users = 0
        self.made = False


_shared: dict[tuple[int, int], _Shared] = {}
_shared_lock = threading.Lock()


def _enter(signal: threading.Event, executor: concurrent.futures.Executor) -> _Shared:
    client = getattr(executor, "_client", None) if is_dask(executor) else None
    key = (id(signal), id(client))
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None:
            flag: _Flag = _DaskFlag(executor) if client is not None else _FileFlag()
            entry = _shared[key] = _Shared(signal, flag)
        entry.users += 1
        return entry


def _set(entry: _Shared) -> None:
    with _shared_lock:
        if entry.made:
            return
        entry.made = True
    entry.flag.set()


def _leave(entry: _Shared, executor: concurrent.futures.Executor) -> None:
    client = getattr(executor, "_client", None) if is_dask(executor) else None
    with _shared_lock:
        entry.users -= 1
        if entry.users:
            return
        del _shared[(id(entry.signal), id(client))]
    if entry.made:
        entry.flag.close()


def _remote_failure(kind: str, message: str) -> AgentError:
    return AgentError(
        f"Remote tool handler raised {kind}: {quote(message, _MESSAGE_LIMIT)}", code=REMOTE_FAILED
    )


def _wait(
    future: concurrent.futures.Future[Any],
    signal: threading.Event,
    entry: _Shared,
    cancel_pending: bool,
) -> None:
    """Wait for `future`; on cancellation set the flag, cancel it if pending, else drain it."""
    while not concurrent.futures.wait([future], timeout=_POLL_SECONDS).done:
        if signal.is_set():
            try:
                _set(entry)
            finally:
                # A Dask future reads as pending until it is done, and cancelling it would
                # abandon a running handler: it is drained; if it had not started, it sees
                # the flag and returns without running the handler.
                if not (cancel_pending and future.cancel()):
                    concurrent.futures.wait([future])
            return


def run_remote(
    executor: concurrent.futures.Executor,
    handler: Callable[[Any, RemoteToolContext], Any],
    value: Any,
    step: StepContext,
    deadline: float | None = None,
) -> Any:
    """Submit one call to `executor` and wait for it in this thread (which holds its permit).

    `deadline` (a local `time.monotonic()`) is the attempt's, for the handler's context.

    Raises:
        ToolError: the remote handler's `ToolError` (a recoverable outcome).
        RunCancelledError: when the run was cancelled before the call finished.
        AgentError: `TUBELESS_AGENT_REMOTE_HANDLER_FAILED` for any other remote exception
            (its type and message only), or when the executor could not run the call.
    """
    signal = step.signal
    raise_if_cancelled(signal)
    entry = _enter(signal, executor)
    context = RemoteToolContext(step, entry.flag.remote, deadline)
    try:
        try:
            future = executor.submit(call_remote, handler, value, context)
        except Exception as error:
            raise _remote_failure(_type_name(error), _text(error)) from None
        _wait(future, signal, entry, cancel_pending=not is_dask(executor))
    finally:
        _leave(entry, executor)
    if future.cancelled():
        raise RunCancelledError(cancellation_message(signal))
    try:
        outcome = future.result()
    except Exception as error:  # the call or its value did not travel, or the pool broke
        raise _remote_failure(_type_name(error), _text(error)) from None
    tag = outcome[0]
    if tag == "ok":
        return outcome[1]
    if tag == "tool_error":
        raise ToolError(outcome[1], outcome[2])
    if tag == "cancelled" and signal.is_set():
        raise RunCancelledError(cancellation_message(signal))
    kind = "RunCancelledError" if tag == "cancelled" else outcome[1]
    raise _remote_failure(kind, outcome[-1])

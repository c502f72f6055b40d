"""Deadlines and retries of tool calls: `timeout=`, `retry=` and `AgentLimits.max_seconds`.

A thread cannot be killed. A call with a deadline (its tool's `timeout`, or the time its
agents' `max_seconds` leave) runs each attempt on another thread (`AttemptThreads`),
which holds the call's concurrency permit, while the call's thread waits until the
attempt ends or the deadline passes. Then the call's outcome is the recoverable
`TUBELESS_AGENT_CALL_TIMED_OUT`; the attempt's thread keeps the permit until its handler
returns, its value is discarded, its step is traced as late (`agent.late`), and the
invocation joins the thread before it returns (drain). A call without a deadline runs on
the call's thread, as before.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote
from tubeless.agent._budget import Budget
from tubeless.agent._limits import MAX_SAFE_INTEGER, MAX_SECONDS, check_seconds
from tubeless.errors import AgentDefinitionError, ToolError
from tubeless.pipeline import StepContext
from tubeless.pipeline.lowlevel import raise_if_cancelled

TIMED_OUT_CODE = "TUBELESS_AGENT_CALL_TIMED_OUT"
TIMED_OUT_MESSAGE = "the call may still complete"
_CODE_LIMIT = 256


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """When a tool call runs again: `define_tool(..., retry=tubeless.Retry(...))`.

    A call whose handler raises a `ToolError` with one of `codes`, or whose attempt times
    out, runs again after a pause, up to `attempts` in all; the outcome is the last
    attempt's. Only `replay="safe"` tools may retry. Retries are not charged to
    `max_calls`; each attempt is a traced step attempt (`attempt` 1, 2, ...) with the same
    `context.execution` ids. Cancelling the run during a pause starts no further attempt.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION` for a bad value.
    """

    attempts: int = 3
    """Attempts in all, the first included (a safe integer of at least 1)."""
    backoff: float = 0.5
    """Seconds of the first pause; each next pause doubles it (0 retries at once)."""
    max_backoff: float = 30.0
    """The longest pause, in seconds."""
    codes: tuple[str, ...] = ()
    """`ToolError` codes worth another attempt; a timed-out attempt always is one."""

    def __post_init__(self) -> None:
        attempts = self.attempts
        if (
            not isinstance(attempts, int)
            or isinstance(attempts, bool)
            or not 1 <= attempts <= MAX_SAFE_INTEGER
        ):
            raise AgentDefinitionError(
                f"Retry attempts must be a positive safe integer, got {quote(attempts)}"
            )
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if value != 0 or isinstance(value, bool):
                check_seconds(value, f"Retry {name}")
        codes: object = self.codes
        if not isinstance(codes, (tuple, list)):
            raise AgentDefinitionError(
                f"Retry codes must be a tuple of ToolError codes, got {quote(codes)}"
            )
        for code in codes:
            if not isinstance(code, str) or not code.strip() or len(code) > _CODE_LIMIT:
                raise AgentDefinitionError(
                    f"Retry codes must be non-blank strings of at most {_CODE_LIMIT} "
                    f"characters, got {quote(code)}"
                )
        object.__setattr__(self, "codes", tuple(codes))
        object.__setattr__(self, "backoff", float(self.backoff))
        object.__setattr__(self, "max_backoff", float(self.max_backoff))

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """The pause after failed attempt `attempt` (1-based), in seconds.

        The step is `backoff * 2 ** (attempt - 1)`, at most `max_backoff`; the pause is
        drawn from its upper half (`step / 2 <= pause <= step`), so callers that failed
        together do not come back together.
        """
        exponent = min(attempt - 1, 1024)
        step = min(self.max_backoff, math.ldexp(self.backoff, exponent))
        return step / 2 + draw() * step / 2

    def retries(self, outcome: Mapping[str, Any]) -> bool:
        """Whether a failed `outcome` is worth another attempt."""
        if outcome["ok"]:
            return False
        code = outcome["error"]["code"]
        return code == TIMED_OUT_CODE or code in self.codes


def check_timeout(value: object, label: str) -> float | None:
    """A tool's `timeout=`: `None`, or seconds above 0.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION` for anything else.
    """
    return None if value is None else check_seconds(value, f"{label} timeout")


def check_retry(value: object, replay: str, label: str) -> Retry | None:
    """A tool's `retry=`: `None`, or a `Retry` on a `replay="safe"` tool.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION` otherwise.
    """
    if value is None:
        return None
    if not isinstance(value, Retry):
        raise AgentDefinitionError(f"{label} retry must be a tubeless.Retry, got {quote(value)}")
    if replay != "safe":
        raise AgentDefinitionError(
            f"{label} retry needs replay='safe': only a call that is safe to repeat may run again"
        )
    return value


def timed_out_outcome(call_id: str, tool: str, timeout: float | None) -> FrozenDict:
    """The recoverable outcome of a call whose deadline passed before its handler returned."""
    cause = "the run's time budget (max_seconds)" if timeout is None else f"{timeout:g} s"
    message = f"Call timed out after {cause}; {TIMED_OUT_MESSAGE}"
    return FrozenDict(
        id=call_id, tool=tool, ok=False, error=FrozenDict(code=TIMED_OUT_CODE, message=message)
    )


def seconds_left(deadline: float | None) -> float | None:
    """Seconds until a `time.monotonic()` deadline (0 once it has passed), or `None`."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def deadline_error() -> ToolError:
    """What `context.sleep` raises when the call's deadline comes before the sleep ends."""
    return ToolError(TIMED_OUT_CODE, f"The call's deadline passed; {TIMED_OUT_MESSAGE}")


_RUNNING, _RETURNED, _ABANDONED = 0, 1, 2


class Attempt:
    """One attempt of a call on a thread of its own, holding the call's permit.

    Attributes:
        deadline: the `time.monotonic()` by which the call's thread stops waiting.
        number: the attempt's number (1-based).
    """

    __slots__ = ("_done", "_lock", "_state", "deadline", "error", "number", "outcome")

    def __init__(self, deadline: float, number: int) -> None:
        self.deadline = deadline
        self.number = number
        self.outcome: FrozenDict | None = None
        self.error: BaseException | None = None
        self._state = _RUNNING
        self._lock = threading.Lock()
        # Held until the attempt ends; its one waiter (the call's thread) acquires it. A
        # bare lock, not an `Event`: no condition and no waiter lock made per call.
        self._done = threading.Lock()
        self._done.acquire()

    def start(
        self,
        work: Callable[[Attempt], FrozenDict],
        release: Callable[[], None],
        threads: AttemptThreads,
    ) -> None:
        """Run `work(self)` on one of `threads`, which calls `release()` once it has returned."""

        def run() -> None:
            try:
                self.outcome = work(self)
            except BaseException as error:  # handed to the call's thread, or dropped if late
                self.error = error
            finally:
                release()
                self._done.release()

        threads.submit(run)

    def returned(self) -> bool:
        """The handler has returned or raised: whether too late (its call timed out)."""
        with self._lock:
            if self._state == _ABANDONED:
                return True
            self._state = _RETURNED
            return False

    def wait(self) -> bool:
        """Wait for the attempt until its deadline; whether it ended in time.

        An attempt whose handler returned in time is waited for until its step settles.
        """
        left = self.deadline - time.monotonic()
        if left > 0 and self._done.acquire(timeout=min(left, MAX_SECONDS)):
            return True
        with self._lock:
            if self._state == _RUNNING:
                self._state = _ABANDONED
                return False
        self._done.acquire()
        return True

    def result(self) -> FrozenDict:
        """The attempt's outcome, or the exception it raised."""
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome


class AttemptThreads:
    """The threads an invocation runs attempts on: made on demand, kept for the next call.

    A thread that finished an attempt waits for the next one (handing a call to a waiting
    thread costs less than starting one). `close` waits for every thread, the late ones
    included: no thread outlives the invocation.
    """

    __slots__ = ("_idle", "_jobs", "_lock", "_threads")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._idle = 0
        self._threads: list[threading.Thread] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on a waiting thread, or on a new one when none waits."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
            thread = threading.Thread(
                target=self._serve, args=(job,), name="tubeless-call", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _serve(self, job: Callable[[], None] | None) -> None:
        while job is not None:
            job()
            with self._lock:
                self._idle += 1
            job = self._jobs.get()

    def close(self) -> None:
        """Wait for running attempts (late ones too), then end every thread."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join()


AttemptWork = Callable[[int, "Attempt | None"], FrozenDict]
"""`work(attempt_number, attempt)`: run one attempt of a call and return its outcome."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallTiming:
    """What bounds one call: its tool's `timeout` and `retry`, and the run's budget."""

    call_id: str
    tool: str
    timeout: float | None
    retry: Retry | None
    budget: Budget
    signal: threading.Event
    threads: AttemptThreads
    """The invocation's attempt threads (closed, so drained, before it returns)."""


def run_attempts(timing: CallTiming, work: AttemptWork) -> FrozenDict:
    """Run a call's attempts under its deadlines; the last attempt's outcome.

    Raises:
        RunCancelledError: when the run is cancelled (during a pause too).
    """
    number = 1
    retry = timing.retry
    while True:
        outcome = _attempt(timing, work, number)
        if retry is None or number >= retry.attempts or not retry.retries(outcome):
            return outcome
        pause = retry.delay(number)
        deadline = timing.budget.deadline
        if deadline is not None and time.monotonic() + pause >= deadline:
            return outcome  # the run's time runs out first: the model decides
        if timing.signal.wait(pause):
            raise_if_cancelled(timing.signal)
        number += 1


def _attempt(timing: CallTiming, work: AttemptWork, number: int) -> FrozenDict:
    budget, signal = timing.budget, timing.signal
    run_deadline = budget.deadline
    if timing.timeout is None and run_deadline is None:
        with budget.permit(signal):
            return work(number, None)
    budget.acquire(signal)
    # The timeout counts from the permit: time queued behind other jobs is not the call's.
    now = time.monotonic()
    own = None if timing.timeout is None else now + timing.timeout
    deadline = min(d for d in (own, run_deadline) if d is not None)
    run_bound = own is None or (run_deadline is not None and run_deadline < own)
    if now >= deadline:
        budget.release()
        return timed_out_outcome(timing.call_id, timing.tool, None)
    attempt = Attempt(deadline, number)
    attempt.start(lambda job: work(number, job), budget.release, timing.threads)
    if attempt.wait():
        return attempt.result()
    raise_if_cancelled(signal)
    return timed_out_outcome(timing.call_id, timing.tool, None if run_bound else timing.timeout)


def finish_handler(
    attempt: Attempt | None, context: StepContext, attributes: Mapping[str, Any] | None
) -> None:
    """Note that a handler has returned; trace it as late when its call already timed out."""
    if attempt is not None and attempt.returned() and attributes is not None:
        context.report_attempt(attempt.number, {**attributes, "agent.late": True})

"""Cancellation: setting the run's signal drains active steps and cancels the rest.

Every test checks that no thread outlives the run (`threading.active_count()` returns to
its baseline); the thread that sets the signal is the test's own and is joined first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import PipelineCancelledError, PipelineExecutionError, RunCancelledError
from tubeless.pipeline import create_steps, define_pipeline

Wait = Callable[[threading.Event], None]


class ReasonedSignal(threading.Event):
    """A signal that carries why it was set, as an abort reason."""

    def __init__(self, reason: object) -> None:
        super().__init__()
        self.reason = reason


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _cancel_when(entered: threading.Event, signal: threading.Event, wait_for: Wait) -> None:
    wait_for(entered)
    signal.set()


@pytest.mark.parametrize("max_concurrency", [1, 3])
def test_cancelling_drains_the_active_step_and_cancels_the_rest(
    max_concurrency: int,
    background: Any,
    wait_for: Wait,
    thread_baseline: int,
) -> None:
    """A step blocked on the signal is drained (its `finally` ran) before `run()` returns."""
    signal = threading.Event()
    entered = threading.Event()
    events: list[str] = []
    step = create_steps()

    def blocker(inputs: Any, context: Any) -> Any:
        entered.set()
        try:
            context.sleep(3600)
        finally:
            events.append("blocker finally")
        return "unreachable"

    first = step("first", run=_value(1))
    blocking = step("blocking", depends_on=[first], run=blocker)
    dependent = step("dependent", depends_on=[blocking], run=_value(2))
    also_dependent = step("also_dependent", depends_on=[first, blocking], run=_value(3))
    filtered = step("filtered", run=_value(4))
    pipeline = define_pipeline(
        id="cancel", steps=[first, blocking, dependent, also_dependent, filtered]
    )
    setter = background(lambda: _cancel_when(entered, signal, wait_for))
    run = pipeline.run(
        controls={
            "max_concurrency": max_concurrency,
            "step_ids": ["first", "blocking", "dependent", "also_dependent"],
        },
        context={"signal": signal, "run_id": "r"},
    )
    events.append("run returned")
    setter.result()

    assert events == ["blocker finally", "run returned"]
    assert run.status == "cancelled"
    assert [(r.id, r.status) for r in run.steps] == [
        ("first", "completed"),
        ("blocking", "cancelled"),
        ("dependent", "cancelled"),
        ("also_dependent", "cancelled"),
        ("filtered", "skipped"),
    ]
    blocked = run.steps[1]
    assert blocked.attempt_id == "r:attempt:2" and blocked.started_at_ms is not None
    for report in run.steps[2:4]:
        assert report.attempt_id is None and report.started_at_ms is None
        assert report.error is not None
        assert (report.error.code, report.error.step_id) == ("TUBELESS_RUN_CANCELLED", report.id)
    assert [(e.code, e.step_id, e.message) for e in run.errors] == [
        ("TUBELESS_RUN_CANCELLED", "blocking", "Pipeline run aborted")
    ]
    assert run.finalized is False
    assert threading.active_count() == thread_baseline


def test_parallel_cancellation_drains_every_active_step(
    background: Any, wait_for: Wait, thread_baseline: int
) -> None:
    """With three slots, all three active steps settle before the run returns."""
    signal = threading.Event()
    all_entered = threading.Barrier(4, timeout=30.0)
    everyone_in = threading.Event()
    finished: list[str] = []
    lock = threading.Lock()
    step = create_steps()

    def note(name: str) -> None:
        with lock:
            finished.append(name)

    def sleeper(inputs: Any, context: Any) -> Any:
        all_entered.wait()
        try:
            context.sleep(3600)
        finally:
            note("sleeper")

    def ignorer(inputs: Any, context: Any) -> str:
        all_entered.wait()
        try:
            assert context.signal.wait(30.0)
            return "finished anyway"
        finally:
            note("ignorer")

    def raiser(inputs: Any, context: Any) -> Any:
        all_entered.wait()
        try:
            assert context.signal.wait(30.0)
            raise RunCancelledError("stopping as asked")
        finally:
            note("raiser")

    def open_gate() -> None:
        all_entered.wait()
        everyone_in.set()

    sleeping = step("sleeping", run=sleeper)
    ignoring = step("ignoring", run=ignorer)
    raising = step("raising", run=raiser)
    queued = step("queued", run=_value(1))
    after = step("after", depends_on=[ignoring], run=_value(2))
    pipeline = define_pipeline(id="wide", steps=[sleeping, ignoring, raising, queued, after])
    gate = background(open_gate)
    setter = background(lambda: _cancel_when(everyone_in, signal, wait_for))
    run = pipeline.run(controls={"max_concurrency": 3}, context={"signal": signal})
    with lock:
        finished.append("run returned")
    gate.result()
    setter.result()

    assert sorted(finished[:3]) == ["ignorer", "raiser", "sleeper"]
    assert finished[3] == "run returned"
    assert run.status == "cancelled"
    assert {r.id: r.status for r in run.steps} == {
        "sleeping": "cancelled",
        "ignoring": "completed",
        "raising": "cancelled",
        "queued": "cancelled",
        "after": "cancelled",
    }
    assert all(error.kind == "cancellation" for error in run.errors)
    assert threading.active_count() == thread_baseline


def test_a_signal_set_before_the_run_cancels_every_step() -> None:
    """No handler runs; planned skips keep their reason; the error is listed once."""
    calls: list[str] = []
    signal = ReasonedSignal("user pressed stop")
    signal.set()
    step = create_steps()
    a = step("a", run=lambda i, c: calls.append("a"))
    b = step("b", depends_on=[a], run=lambda i, c: calls.append("b"))
    c = step("c", dry_run="skip", run=lambda i, c: calls.append("c"))
    run = define_pipeline(id="pre", steps=[a, b, c]).run(
        controls={"dry_run": True}, context={"signal": signal}
    )

    assert calls == []
    assert run.status == "cancelled"
    assert [(r.id, r.status, r.reason) for r in run.steps] == [
        ("a", "cancelled", None),
        ("b", "cancelled", None),
        ("c", "skipped", "dry-run"),
    ]
    assert [(e.step_id, e.message) for e in run.errors] == [
        ("a", "Pipeline run aborted: user pressed stop")
    ]
    assert run.steps[1].error is not None
    assert run.steps[1].error.message == "Pipeline run aborted: user pressed stop"


def test_a_signal_set_by_a_skip_predicate_cancels_before_the_step_starts() -> None:
    """Cancellation is checked after skip predicates, so the step never begins an attempt."""
    signal = threading.Event()
    ran: list[str] = []

    def skip(inputs: Any, context: Any) -> bool:
        context.signal.set()
        return False

    step = create_steps()
    first = step("first", skip=skip, run=lambda i, c: ran.append("first"))
    second = step("second", run=lambda i, c: ran.append("second"))
    run = define_pipeline(id="pred", steps=[first, second]).run(context={"signal": signal})

    assert ran == []
    assert [(r.id, r.status, r.attempt_id) for r in run.steps] == [
        ("first", "cancelled", None),
        ("second", "cancelled", None),
    ]
    assert [e.step_id for e in run.errors] == ["first"]


def test_raising_the_signals_own_reason_is_a_cancellation() -> None:
    """A handler that raises the signal's `reason` exception is cancelled, not failed."""
    reason = TimeoutError("deadline passed")
    signal = ReasonedSignal(reason)

    def run_step(inputs: Any, context: Any) -> Any:
        context.signal.set()
        raise reason

    run = define_pipeline(id="reason", steps=[create_steps()("s", run=run_step)]).run(
        context={"signal": signal}
    )

    assert run.status == "cancelled"
    assert run.errors[0].code == "TUBELESS_RUN_CANCELLED"
    assert run.errors[0].message == "deadline passed"


def test_an_unrelated_error_racing_cancellation_is_a_failure() -> None:
    """Cancellation is decided from the error, not from the signal."""

    def run_step(inputs: Any, context: Any) -> Any:
        context.signal.set()
        raise ValueError("disk full")

    run = define_pipeline(id="race", steps=[create_steps()("s", run=run_step)]).run()

    assert run.status == "failed"
    assert run.errors[0].code == "TUBELESS_STEP_FAILED"


def test_a_signal_set_by_the_last_step_cancels_finalization() -> None:
    """When only finalization is left, cancellation is reported there."""
    finalized: list[str] = []

    def run_step(inputs: Any, context: Any) -> int:
        context.signal.set()
        return 1

    def finalize(outputs: Any, context: Any) -> Any:
        finalized.append("called")

    run = define_pipeline(
        id="fin", steps=[create_steps()("s", run=run_step)], finalize=finalize
    ).run()

    assert finalized == []
    assert run.status == "cancelled"
    assert [(e.code, e.phase, e.step_id) for e in run.errors] == [
        ("TUBELESS_FINALIZATION_CANCELLED", "finalization", "__finalize__")
    ]


@pytest.mark.parametrize("max_concurrency", [1, 2])
def test_continue_on_error_still_stops_at_cancellation(
    max_concurrency: int, thread_baseline: int
) -> None:
    """With continue-on-error, unstarted steps and finalization are cancelled, not run."""
    ran: list[str] = []

    def stop(inputs: Any, context: Any) -> Any:
        context.signal.set()
        raise RunCancelledError("stop")

    step = create_steps()
    first = step("first", run=stop)
    later = step("later", depends_on=[first], run=lambda i, c: ran.append("later"))
    other = step("other", skip_after_failure_of=[first], run=lambda i, c: ran.append("other"))
    run = define_pipeline(id="coe", steps=[first, later, other]).run(
        controls={"continue_on_error": True, "max_concurrency": max_concurrency}
    )

    assert ran == []
    assert run.status == "cancelled"
    assert [r.status for r in run.steps] == ["cancelled", "cancelled", "cancelled"]
    assert [(e.code, e.step_id) for e in run.errors] == [
        ("TUBELESS_RUN_CANCELLED", "first"),
        ("TUBELESS_RUN_CANCELLED", "later"),
        ("TUBELESS_FINALIZATION_CANCELLED", "__finalize__"),
    ]


def test_run_or_raise_on_a_cancelled_run_raises_run_cancelled_error() -> None:
    """A cancelled `run_or_raise` raises `RunCancelledError`, still a `PipelineExecutionError`."""
    signal = threading.Event()
    signal.set()
    pipeline = define_pipeline(id="stopped", steps=[create_steps()("a", run=_value(1))])

    with pytest.raises(RunCancelledError) as caught:
        pipeline.run_or_raise(context={"signal": signal})

    error = caught.value
    assert isinstance(error, PipelineCancelledError)
    assert isinstance(error, PipelineExecutionError)
    assert error.cancelled
    assert error.result.status == "cancelled"
    assert error.code == "TUBELESS_RUN_CANCELLED"
    assert "run aborted" in str(error)
    failed = define_pipeline(id="broken", steps=[create_steps()("a", run=_raise)])
    with pytest.raises(PipelineExecutionError) as other:
        failed.run_or_raise()
    assert not isinstance(other.value, RunCancelledError)


def _raise(inputs: Any, context: Any) -> None:
    raise ValueError("no")

"""What handlers receive: progress and attempt reports, cancellable sleep, and the step log."""

from __future__ import annotations

import datetime
import json
import math
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import RunCancelledError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink

Wait = Callable[[threading.Event], None]


def _run_with(handler: Any, sink: MemoryTraceSink | None = None, **context: Any) -> Any:
    pipeline = define_pipeline(id="ctx", steps=[create_steps()("step", run=handler)])
    if sink is not None:
        context["tracing"] = sink
    return pipeline.run(context=context)


def _named(sink: MemoryTraceSink, name: str) -> list[dict[str, Any]]:
    return [record for record in sink.records if record["name"] == name]


def _progress(sink: MemoryTraceSink) -> list[dict[str, Any]]:
    """The `progress` objects of the sink's progress records, in order."""
    return [
        r["payload"]["progress"] for r in _named(sink, "step.running") if "progress" in r["payload"]
    ]


def test_progress_reports_become_step_running_records(sink: MemoryTraceSink) -> None:
    """`report_progress` emits the attempt's progress, details bounded and counted."""

    def handler(inputs: Any, context: Any) -> None:
        context.report_progress(1, 4, "reading", [{"id": "a", "status": "running", "depth": 1}])
        context.report_progress(2.5)

    run = _run_with(handler, sink)
    progress = [r for r in _named(sink, "step.running") if "progress" in r["payload"]]

    assert [r["payload"]["progress"] for r in progress] == [
        {
            "completed": 1,
            "total": 4,
            "message": "reading",
            "details": [{"id": "a", "status": "running", "depth": 1}],
            "detailCount": 1,
        },
        {"completed": 2.5},
    ]
    assert {r["attemptId"] for r in progress} == {run.steps[0].attempt_id}
    assert {r["stepId"] for r in progress} == {"step"}


def test_progress_details_are_bounded(sink: MemoryTraceSink) -> None:
    """At most 128 rows and 256 KiB of details are kept, strings are cut (`…` marks it)."""

    def handler(inputs: Any, context: Any) -> None:
        rows = [{"id": f"row-{i}", "name": "n" * 5000, "ignored": True} for i in range(200)]
        context.report_progress(0, None, None, rows)
        context.report_progress(1, None, None, [{"id": f"row-{i}"} for i in range(200)])

    _run_with(handler, sink)
    progress = [r for r in _named(sink, "step.running") if "progress" in r["payload"]]
    details = progress[0]["payload"]["progress"]

    assert details["detailCount"] == 200
    assert details["details"][0] == {"id": "row-0", "name": "n" * 4095 + "…"}
    assert len(json.dumps(details["details"], separators=(",", ":"))) <= 256 * 1024
    assert len(details["details"]) == 63
    short = progress[1]["payload"]["progress"]
    assert short["detailCount"] == 200
    assert len(short["details"]) == 128


@pytest.mark.parametrize(
    "arguments",
    [
        (math.nan,),
        (math.inf,),
        (True,),
        ("1",),
        (1, math.inf),
        (1, None, 7),
        (1, None, None, [{"name": "no id"}]),
        (1, None, None, ["row"]),
        (1, None, None, [{"id": "x", "completed": math.nan}]),
    ],
)
def test_malformed_progress_is_rejected(arguments: tuple[Any, ...], sink: MemoryTraceSink) -> None:
    """Non-finite or non-numeric counts and malformed detail rows raise `TypeError`."""
    raised: list[BaseException] = []

    def handler(inputs: Any, context: Any) -> None:
        try:
            context.report_progress(*arguments)
        except TypeError as error:
            raised.append(error)

    _run_with(handler, sink)
    assert len(raised) == 1


def test_progress_after_the_attempt_settled_is_ignored(sink: MemoryTraceSink) -> None:
    """A context kept beyond its attempt no longer reports progress."""
    kept: list[Any] = []
    _run_with(lambda inputs, context: kept.append(context), sink)
    before = len(sink.records)
    kept[0].report_progress(1, 1)

    assert len(sink.records) == before


def test_report_attempt_emits_step_attempted(sink: MemoryTraceSink) -> None:
    """`report_attempt` records a logical attempt with scalar attributes; `None` is dropped."""

    def handler(inputs: Any, context: Any) -> None:
        context.report_attempt(2, {"status": "retrying", "delay": 0.5, "final": False, "x": None})
        context.report_attempt(3)

    run = _run_with(handler, sink)
    attempted = _named(sink, "step.attempted")

    assert [r["payload"] for r in attempted] == [
        {"attempt": 2, "attributes": {"status": "retrying", "delay": 0.5, "final": False}},
        {"attempt": 3, "attributes": {}},
    ]
    assert {(r["stepId"], r["attemptId"]) for r in attempted} == {("step", run.steps[0].attempt_id)}


@pytest.mark.parametrize(
    ("attempt", "attributes"),
    [
        (0, None),
        (-1, None),
        (True, None),
        (1.0, None),
        pytest.param(10**5000, None, id="too-long-for-json"),
        (1, {"bad": math.nan}),
        (1, {"k" * 257: "name too long"}),
        (1, {"bad": [1]}),
        (1, {"bad": {"nested": 1}}),
        (1, {2: "non-string key"}),
    ],
)
def test_malformed_attempt_reports_are_rejected(attempt: Any, attributes: Any) -> None:
    """A non-positive or non-integer attempt, or a non-scalar attribute, raises `TypeError`."""
    raised: list[BaseException] = []

    def handler(inputs: Any, context: Any) -> None:
        try:
            context.report_attempt(attempt, attributes)
        except TypeError as error:
            raised.append(error)

    _run_with(handler)
    assert len(raised) == 1


def test_checked_attributes_go_out_as_the_check_would_keep_them(sink: MemoryTraceSink) -> None:
    """Library-built `CheckedAttributes` skip the check: a plain copy, still checked attempt."""
    from tubeless.pipeline.lowlevel import CheckedAttributes

    plain = {"agent.runId": "run-1", "agent.turn": 3, "agent.tool": "echo", "agent.late": True}
    checked = CheckedAttributes(plain)
    raised: list[BaseException] = []

    def handler(inputs: Any, context: Any) -> None:
        context.report_attempt(2, plain)
        context.report_attempt(2, checked)
        try:
            context.report_attempt(0, checked)
        except TypeError as error:
            raised.append(error)

    _run_with(handler, sink)
    first, second = (record["payload"] for record in _named(sink, "step.attempted"))
    assert second == first == {"attempt": 2, "attributes": plain}
    assert type(second["attributes"]) is dict and second["attributes"] is not checked
    assert len(raised) == 1


def test_sleep_returns_early_and_raises_when_cancelled(
    background: Any, wait_for: Wait, thread_baseline: int
) -> None:
    """`context.sleep` wakes when the signal is set and raises `RunCancelledError`."""
    signal = threading.Event()
    sleeping = threading.Event()
    outcomes: list[str] = []

    def handler(inputs: Any, context: Any) -> None:
        sleeping.set()
        try:
            context.sleep(3600)
        except RunCancelledError as error:
            outcomes.append(str(error))
            raise
        outcomes.append("slept through")

    def cancel() -> None:
        wait_for(sleeping)
        signal.set()

    setter = background(cancel)
    run = _run_with(handler, signal=signal)
    setter.result()

    assert outcomes == ["Pipeline run aborted"]
    assert run.status == "cancelled"
    assert run.steps[0].status == "cancelled"
    assert threading.active_count() == thread_baseline


def test_sleep_uses_the_context_sleeper_and_checks_cancellation_first() -> None:
    """A custom `sleep(seconds, signal)` is used; an already-set signal raises without it."""
    calls: list[tuple[float, threading.Event]] = []
    signal = threading.Event()

    def sleeper(seconds: float, event: threading.Event) -> None:
        calls.append((seconds, event))

    run = _run_with(lambda i, c: c.sleep(2.5) or "awake", sleep=sleeper, signal=signal)
    assert run.value == "awake"
    assert calls == [(2.5, signal)]

    calls.clear()
    signal.set()
    pipeline = define_pipeline(
        id="pre", steps=[create_steps()("s", skip=lambda i, c: c.sleep(1), run=lambda i, c: 1)]
    )
    run = pipeline.run(context={"sleep": sleeper, "signal": signal})
    assert calls == []
    assert run.errors[0].code == "TUBELESS_RUN_CANCELLED"


def test_the_step_log_formats_and_forwards_messages(logger: Any, sink: MemoryTraceSink) -> None:
    """Params are appended with spaces, containers as JSON, and each level reaches the logger."""
    circular: dict[str, Any] = {}
    circular["self"] = circular

    def handler(inputs: Any, context: Any) -> None:
        context.log.info("loaded", 3, "rows", {"b": [1, "é"]}, ("t",), None)
        context.log.log({"plain": True})
        context.log.warning("slow", {"day": datetime.date(2024, 1, 2)})
        context.log.warn("again")
        context.log.error("failed", circular)

    _run_with(handler, sink, log=logger)

    assert logger.lines == [
        ("info", 'loaded 3 rows {"b": [1, "é"]} ["t"] None'),
        ("info", '{"plain": true}'),
        ("warning", 'slow {"day": "2024-01-02"}'),
        ("warning", "again"),
        ("error", "failed {'self': {...}}"),
    ]
    logs = _named(sink, "pipeline.log")
    assert [r["payload"]["level"] for r in logs] == ["log", "log", "warn", "warn", "error"]
    assert [r["payload"]["message"] for r in logs] == [message for _, message in logger.lines]
    assert {r["stepId"] for r in logs} == {"step"}


def test_predicate_and_finalizer_logs_are_tagged(logger: Any, sink: MemoryTraceSink) -> None:
    """Logs from skip predicates name their step without an attempt; finalizers `__finalize__`."""

    def skip(inputs: Any, context: Any) -> bool:
        context.log.info("deciding")
        assert not hasattr(context, "report_progress")
        return False

    def finalize(outputs: Any, context: Any) -> Any:
        context.log.info("finishing")
        return outputs

    step = create_steps()
    pipeline = define_pipeline(
        id="p", steps=[step("s", skip=skip, run=lambda i, c: 1)], finalize=finalize
    )
    pipeline.run(context={"tracing": sink, "log": logger})
    logs = _named(sink, "pipeline.log")

    assert [(r["payload"]["message"], r.get("stepId"), "attemptId" in r) for r in logs] == [
        ("deciding", "s", False),
        ("finishing", "__finalize__", False),
    ]


def test_now_reads_the_run_clock(clock: Any) -> None:
    """`context.now()` is the run's clock in epoch milliseconds."""
    readings: list[int] = []
    _run_with(lambda i, c: readings.extend([c.now(), c.now()]), now=clock)

    assert readings[1] == readings[0] + 1
    assert readings[0] > 1_700_000_000_000


def test_progress_is_held_back_between_intervals_and_the_latest_is_sent() -> None:
    """Reports within 50 ms of the last record wait; the latest goes out before settling."""
    from tubeless.testing import FakeClock, MemoryTraceSink

    clock = FakeClock()
    sink = MemoryTraceSink()

    def busy(inputs: Any, context: Any) -> None:
        for done in range(1, 101):
            context.report_progress(done, 100, f"item {done}")
        clock.advance(60)
        context.report_progress(100, 100, "after a pause")
        context.report_progress(100, 100, "the very last")

    steps = create_steps()
    define_pipeline(id="throttled", steps=[steps.step("busy", run=busy)]).run(
        context={"tracing": sink, "now": clock}
    )
    messages = [report["message"] for report in _progress(sink)]
    assert messages == ["item 1", "after a pause", "the very last"]
    names = [r["name"] for r in sink.records if r.get("stepId") == "busy"]
    assert names[-2:] == ["step.running", "step.complete"]


def test_every_held_back_report_goes_out_one_interval_on(sink: MemoryTraceSink) -> None:
    """Each burst's held-back report goes out by itself, not only the run's first one (the
    sending thread ends once nothing is held, and a later hold starts another)."""
    sent: list[list[float]] = []

    def progress() -> list[float]:
        return [report["completed"] for report in _progress(sink)]

    def bursts(inputs: Any, context: Any) -> None:
        for burst in range(3):
            context.report_progress(10 * burst + 1)
            context.report_progress(10 * burst + 2)  # within the interval: held back
            for _ in range(300):
                if 10 * burst + 2 in progress():
                    break
                threading.Event().wait(0.01)
            sent.append(progress())

    _run_with(bursts, sink)
    # Each burst's latest report went out while the handler waited (`11` may go out
    # at once or be replaced by `12`, as the interval falls).
    assert [10 * burst + 2 in seen for burst, seen in enumerate(sent)] == [True, True, True]
    assert progress()[-1] == 22


def test_held_back_progress_goes_out_before_the_failure_record() -> None:
    """When a handler fails, its held-back progress precedes `step.failed`, never follows it."""
    from tubeless.testing import FakeClock, MemoryTraceSink

    sink = MemoryTraceSink()

    def failing(inputs: Any, context: Any) -> None:
        context.report_progress(1, 2, "first")
        context.report_progress(2, 2, "held back")
        raise RuntimeError("boom")

    steps = create_steps()
    define_pipeline(id="late", steps=[steps.step("failing", run=failing)]).run(
        context={"tracing": sink, "now": FakeClock()}
    )
    names = [r["name"] for r in sink.records if r.get("stepId") == "failing"]
    assert names[-3:] == ["step.running", "step.running", "step.failed"]


def test_offers_from_one_held_source_send_its_latest_state_once() -> None:
    """Offers of a source already held back go out once, built from the latest state."""
    from tubeless.testing import FakeClock, MemoryTraceSink

    sink = MemoryTraceSink()
    built: list[int] = []

    def reporting(inputs: Any, context: Any) -> None:
        state = {"done": 0}

        def source() -> tuple[int, int, str, list[Any]]:
            built.append(state["done"])
            return state["done"], 5, f"{state['done']} done", []

        for done in range(1, 6):
            state["done"] = done
            context.offer_progress(source)

    steps = create_steps()
    define_pipeline(id="held", steps=[steps.step("reporting", run=reporting)]).run(
        context={"tracing": sink, "now": FakeClock()}
    )
    messages = [report["message"] for report in _progress(sink)]
    assert messages == ["1 done", "5 done"]
    assert built == [1, 5]


def test_urgent_progress_is_never_held_back() -> None:
    """An urgent offer (a failure) goes out inside the interval; ordinary ones still wait."""
    from tubeless.testing import FakeClock, MemoryTraceSink

    sink = MemoryTraceSink()

    def reporting(inputs: Any, context: Any) -> None:
        context.offer_progress(lambda: (0, 2, "started", []))
        context.offer_progress(lambda: (1, 2, "merged away", []))
        context.offer_progress(lambda: (1, 2, "a call failed", []), urgent=True)

    steps = create_steps()
    define_pipeline(id="urgent", steps=[steps.step("reporting", run=reporting)]).run(
        context={"tracing": sink, "now": FakeClock()}
    )
    messages = [report["message"] for report in _progress(sink)]
    assert messages == ["started", "a call failed"]

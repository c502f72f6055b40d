"""The DAG scheduler: bounded concurrency, fail-fast, the disposition ladder, skips, dry runs.

Concurrency is proven with real threads that meet at barriers and wait on events; nothing
sleeps and nothing measures time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.errors import PipelineExecutionError, RunCancelledError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.schema import validator
from tubeless.testing import MemoryTraceSink

_GUARD = 30.0
Wait = Callable[[threading.Event], None]


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _blocked(release: threading.Event, value: Any = None, entered: Any = None) -> Any:
    def run(inputs: Any, context: Any) -> Any:
        if entered is not None:
            entered.set()
        assert release.wait(_GUARD)
        return value

    return run


class StartOrder:
    """A hook set that records the order in which steps start."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_step_start(self, record: dict[str, Any]) -> None:
        self.started.append(record["stepId"])


@pytest.mark.parametrize("controls", [None, {"max_concurrency": 1}])
def test_default_concurrency_runs_serially_on_the_calling_thread(
    controls: Any, thread_baseline: int
) -> None:
    """With one slot, steps run one at a time, in order, on the caller's thread."""
    caller = threading.current_thread()
    threads: list[threading.Thread] = []
    order = StartOrder()
    step = create_steps()

    def run(inputs: Any, context: Any) -> None:
        threads.append(threading.current_thread())
        assert threading.active_count() == thread_baseline

    first = step("first", run=run)
    dependent = step("dependent", depends_on=[first], run=run)
    independent = step("independent", run=run)
    pipeline = define_pipeline(id="serial", steps=[dependent, first, independent])
    run_report = pipeline.run(controls=controls, context={"hooks": order})

    assert order.started == ["first", "dependent", "independent"]
    assert [report.id for report in run_report.steps] == order.started
    assert threads == [caller, caller, caller]


def test_max_concurrency_runs_that_many_steps_at_once_and_never_more(
    thread_baseline: int,
) -> None:
    """Three slots: three steps meet at a barrier of three, and no fourth joins them."""
    barrier = threading.Barrier(3, timeout=_GUARD)
    lock = threading.Lock()
    active = 0
    peak = 0
    step = create_steps()

    def run(inputs: Any, context: Any) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        barrier.wait()
        with lock:
            active -= 1
        return 1

    steps = [step(f"s{index}", run=run) for index in range(6)]
    run_report = define_pipeline(
        id="wide", steps=steps, finalize=lambda outputs, context: sum(outputs.values())
    ).run(controls={"max_concurrency": 3})

    assert run_report.status == "completed"
    assert run_report.value == 6
    assert peak == 3
    assert not barrier.broken


def test_slots_fill_in_stable_order_and_dependents_start_before_unrelated_work_settles(
    background: Any, wait_for: Wait
) -> None:
    """Ready steps start in plan order, and a finished step's dependent takes the free slot."""
    slow_release, fast_release, child_release = (threading.Event() for _ in range(3))
    slow_entered, fast_entered, child_entered, later_entered = (threading.Event() for _ in range(4))
    order = StartOrder()
    finalized = threading.Event()
    step = create_steps()
    slow = step("slow", run=_blocked(slow_release, "slow", slow_entered))
    fast = step("fast", run=_blocked(fast_release, 7, fast_entered))

    def child_run(inputs: Any, context: Any) -> int:
        child_entered.set()
        assert child_release.wait(_GUARD)
        return int(inputs["fast"]) + 1

    child = step("child", depends_on=[fast], run=child_run)
    later = step("later", run=lambda inputs, context: later_entered.set())

    def finalize(outputs: dict[str, Any], context: Any) -> Any:
        finalized.set()
        return outputs["child"]

    pipeline = define_pipeline(id="parallel", steps=[slow, child, fast, later], finalize=finalize)
    job = background(
        lambda: pipeline.run(controls={"max_concurrency": 2}, context={"hooks": order})
    )

    wait_for(slow_entered)
    wait_for(fast_entered)
    assert order.started == ["slow", "fast"]
    fast_release.set()
    wait_for(child_entered)
    assert order.started == ["slow", "fast", "child"]
    child_release.set()
    wait_for(later_entered)
    assert order.started == ["slow", "fast", "child", "later"]
    assert not finalized.is_set()
    slow_release.set()
    result = job.result()
    assert result.value == 8
    assert [report.attempt_id.rsplit(":", 1)[1] for report in result.steps] == [
        "1",
        "2",
        "3",
        "4",
    ]


def test_an_earlier_step_is_dispatched_as_soon_as_it_becomes_ready(
    background: Any, wait_for: Wait
) -> None:
    """After a later independent step started, a newly ready earlier step gets the next slot."""
    first_release, independent_release, dependent_release = (threading.Event() for _ in range(3))
    first_entered, independent_entered, dependent_entered = (threading.Event() for _ in range(3))
    order = StartOrder()
    step = create_steps()
    first = step("first", run=_blocked(first_release, 1, first_entered))
    dependent = step(
        "dependent", depends_on=[first], run=_blocked(dependent_release, 2, dependent_entered)
    )
    independent = step("independent", run=_blocked(independent_release, 3, independent_entered))
    later = step("later", run=_value(4))
    pipeline = define_pipeline(id="rewind", steps=[first, dependent, independent, later])
    job = background(
        lambda: pipeline.run(controls={"max_concurrency": 2}, context={"hooks": order})
    )

    wait_for(first_entered)
    wait_for(independent_entered)
    assert order.started == ["first", "independent"]
    first_release.set()
    wait_for(dependent_entered)
    assert order.started == ["first", "independent", "dependent"]
    dependent_release.set()
    independent_release.set()
    assert job.result().value == 4
    assert order.started == ["first", "independent", "dependent", "later"]


def test_a_step_waits_for_every_kind_of_prerequisite(background: Any, wait_for: Wait) -> None:
    """A step starts only after its required, optional and gate prerequisites all settled."""
    releases = {name: threading.Event() for name in ("required", "optional", "gate")}
    settled = {name: threading.Event() for name in releases}
    consumed: list[dict[str, Any]] = []
    step = create_steps()
    required = step("required", run=_blocked(releases["required"], 1))
    optional = step("optional", run=_blocked(releases["optional"], 2))
    gate = step("gate", run=_blocked(releases["gate"], 3))
    child = step(
        "child",
        depends_on=[required],
        optional_depends_on=[optional],
        skip_after_failure_of=[gate],
        run=lambda inputs, context: consumed.append(dict(inputs)) or 3,
    )

    def on_step_complete(record: dict[str, Any]) -> None:
        if record["stepId"] in settled:
            settled[record["stepId"]].set()

    pipeline = define_pipeline(id="edges", steps=[child, required, optional, gate])
    job = background(
        lambda: pipeline.run(
            controls={"max_concurrency": 4},
            context={"hooks": {"on_step_complete": on_step_complete}},
        )
    )
    for name in ("optional", "required"):
        releases[name].set()
        wait_for(settled[name])
        assert consumed == []
    releases["gate"].set()

    assert job.result().value == 3
    assert consumed == [{"required": 1, "optional": 2}]


@pytest.mark.parametrize("phase", ["skip", "output", "policy-output", "dry-output"])
def test_predicates_and_output_validation_hold_a_slot(
    phase: str, background: Any, wait_for: Wait
) -> None:
    """With one slot, nothing else starts while a skip predicate or output schema runs."""
    entered, release = threading.Event(), threading.Event()
    other_ran: list[int] = []

    def validate(value: Any) -> Any:
        if phase != "skip":
            entered.set()
            assert release.wait(_GUARD)
            return int(value) + 1
        return int(value)

    def skip(inputs: Any, context: Any) -> Any:
        if phase == "skip":
            entered.set()
            assert release.wait(_GUARD)
        return {"reason": "cached", "value": 4} if phase == "policy-output" else False

    step = create_steps()
    first = step(
        "first",
        skip=skip,
        output_schema=validator(validate),
        dry_run=_value(4) if phase == "dry-output" else None,
        run=_value(4),
    )
    other = step("other", run=lambda inputs, context: other_ran.append(6))
    pipeline = define_pipeline(
        id="slot", steps=[first, other], finalize=lambda outputs, context: outputs["first"]
    )
    job = background(
        lambda: pipeline.run(controls={"max_concurrency": 1, "dry_run": phase == "dry-output"})
    )

    wait_for(entered)
    assert other_ran == []
    release.set()
    assert job.result().value == (4 if phase == "skip" else 5)
    assert other_ran == [6]


@pytest.mark.parametrize("continue_on_error", [False, True])
def test_failures_drain_active_steps_before_finalizing_or_returning(
    continue_on_error: bool, background: Any, wait_for: Wait, thread_baseline: int
) -> None:
    """A failure stops new work (or not, with continue-on-error) but active steps finish first."""
    release, first_failed, second_entered = (threading.Event() for _ in range(3))
    failure = ValueError("first failure")
    finalized: list[Any] = []
    completed: list[str] = []
    later_ran: list[int] = []
    step = create_steps()

    def first_run(inputs: Any, context: Any) -> Any:
        raise failure

    def second_run(inputs: Any, context: Any) -> Any:
        second_entered.set()
        assert release.wait(_GUARD)
        raise ValueError("second failure")

    first = step("first", run=first_run)
    second = step("second", run=second_run)
    later = step("later", run=lambda inputs, context: later_ran.append(3) or 3)

    def finalize(outputs: dict[str, Any], context: Any) -> Any:
        finalized.append(dict(outputs))
        return 9

    hooks = {
        "on_step_fail": lambda r: first_failed.set() if r["stepId"] == "first" else None,
        "on_pipeline_complete": lambda r: completed.append(r["payload"]["status"]),
    }
    pipeline = define_pipeline(id="failure", steps=[first, second, later], finalize=finalize)

    def attempt() -> Any:
        with pytest.raises(PipelineExecutionError) as caught:
            pipeline.run_or_raise(
                controls={"max_concurrency": 2, "continue_on_error": continue_on_error},
                context={"hooks": hooks},
            )
        return caught.value

    job = background(attempt)
    wait_for(second_entered)
    wait_for(first_failed)
    assert finalized == [] and completed == []
    release.set()
    error = job.result()

    assert error.__cause__ is failure
    assert [e.step_id for e in error.result.errors] == ["first", "second"]
    later_report = error.result.steps[2]
    if continue_on_error:
        assert later_report.status == "completed"
        assert later_ran == [3]
        assert finalized == [{"later": 3}]
        assert error.result.finalized is True and error.result.value == 9
    else:
        assert (later_report.status, later_report.reason, later_report.dependency_id) == (
            "skipped",
            "fail-fast",
            "first",
        )
        assert later_report.message == "Not run because fail-fast stopped after first failed."
        assert later_report.attempt_id is None and later_report.started_at_ms is None
        assert later_ran == [] and finalized == []
    assert completed == ["failed"]


def test_fail_fast_keeps_plan_skips_and_skips_the_rest() -> None:
    """Under fail-fast, unstarted steps are `fail-fast` skips; planned skips keep their reason."""
    step = create_steps()
    boom = step("boom", run=lambda inputs, context: 1 / 0)
    filtered = step("filtered", run=_value(1))
    write = step("write", dry_run="skip", run=_value(2))
    after = step("after", depends_on=[write], run=_value(3))
    rest = step("rest", run=_value(4))
    run = define_pipeline(id="ff", steps=[boom, filtered, write, after, rest]).run(
        controls={"step_ids": ["boom", "write", "after", "rest"], "dry_run": True}
    )

    assert [(r.id, r.status, r.reason, r.dependency_id) for r in run.steps] == [
        ("boom", "failed", None, None),
        ("filtered", "skipped", "filtered", None),
        ("write", "skipped", "dry-run", None),
        ("after", "skipped", "unmet-dependency", "write"),
        ("rest", "skipped", "fail-fast", "boom"),
    ]
    assert [e.step_id for e in run.errors] == ["boom"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_best_effort_runs_unlock_dependents_after_failures_and_skips(concurrency: int) -> None:
    """With continue-on-error, failures and policy skips still settle every dependent,
    inline (concurrency 1) as on the pool."""
    step = create_steps()
    fail = step("fail", run=lambda inputs, context: 1 / 0)
    skipped = step("skipped", skip=lambda i, c: {"reason": "cached", "value": 4}, run=_value(1))
    required = step("required", depends_on=[fail], run=_value(1))
    gated = step("gated", skip_after_failure_of=[fail], run=_value(1))
    optional = step(
        "optional",
        optional_depends_on=[fail],
        depends_on=[skipped],
        run=lambda inputs, context: (sorted(inputs), inputs["skipped"]),
    )
    pipeline = define_pipeline(id="terminal", steps=[required, gated, optional, fail, skipped])
    run = pipeline.run(controls={"max_concurrency": concurrency, "continue_on_error": True})
    reports = {report.id: report for report in run.steps}

    assert (reports["required"].reason, reports["required"].dependency_id) == (
        "unmet-dependency",
        "fail",
    )
    assert (reports["gated"].reason, reports["gated"].dependency_id) == (
        "failed-dependency",
        "fail",
    )
    assert reports["optional"].status == "completed"
    assert (reports["skipped"].status, reports["skipped"].reason) == ("skipped", "policy")
    assert reports["skipped"].message == "cached"
    assert run.status == "failed"
    assert run.value == (["skipped"], 4)


def test_the_disposition_ladder_order() -> None:
    """Filtered beats a failed gate, which beats an unmet dependency, which beats dry-run."""
    step = create_steps()
    gate = step("gate", run=lambda inputs, context: 1 / 0)
    source = step("source", dry_run="skip", run=_value(1))
    all_three = step(
        "all_three",
        depends_on=[source],
        skip_after_failure_of=[gate],
        dry_run="skip",
        run=_value(2),
    )
    unmet_and_dry = step("unmet_and_dry", depends_on=[source], dry_run="skip", run=_value(3))
    only_dry = step("only_dry", dry_run="skip", run=_value(4))
    filtered = step("filtered", depends_on=[source], skip_after_failure_of=[gate], run=_value(5))
    pipeline = define_pipeline(
        id="ladder", steps=[gate, source, all_three, unmet_and_dry, only_dry, filtered]
    )
    selected = ["gate", "source", "all_three", "unmet_and_dry", "only_dry"]
    run = pipeline.run(controls={"dry_run": True, "continue_on_error": True, "step_ids": selected})

    assert [(r.id, r.reason, r.dependency_id) for r in run.steps[1:]] == [
        ("source", "dry-run", None),
        ("all_three", "failed-dependency", "gate"),
        ("unmet_and_dry", "unmet-dependency", "source"),
        ("only_dry", "dry-run", None),
        ("filtered", "filtered", None),
    ]


def test_a_cancelled_gate_also_skips_its_dependent() -> None:
    """A failure gate that was cancelled skips the gated step as `failed-dependency`."""

    def cancelled(inputs: Any, context: Any) -> Any:
        raise RunCancelledError("stopped by the step")

    step = create_steps()
    gate = step("gate", run=cancelled)
    publish = step("publish", skip_after_failure_of=[gate], run=_value(1))
    run = define_pipeline(id="gate", steps=[gate, publish]).run(
        controls={"continue_on_error": True}
    )

    assert (run.steps[1].reason, run.steps[1].dependency_id) == ("failed-dependency", "gate")
    assert run.status == "cancelled"


def test_policy_skip_results() -> None:
    """Falsy or blank decisions run; a reason string skips; `{reason, value}` publishes."""
    ran: list[str] = []
    step = create_steps()

    def make(step_id: str, decision: Any) -> Any:
        return step(
            step_id,
            skip=lambda inputs, context: decision,
            run=lambda inputs, context: ran.append(step_id) or step_id,
        )

    steps = [
        make("none", None),
        make("false", False),
        make("blank", "  "),
        make("blank_reason", {"reason": " ", "value": 1}),
        make("other_truthy", 1),
        make("reason", " up to date "),
        make("valued", {"reason": "cached", "value": {"rows": 2}}),
    ]
    use = step(
        "use",
        depends_on=[steps[5], steps[6]],
        run=lambda inputs, context: dict(inputs),
    )
    run = define_pipeline(id="policy", steps=[*steps, use]).run()

    assert ran == ["none", "false", "blank", "blank_reason", "other_truthy"]
    reports = {report.id: report for report in run.steps}
    assert (reports["reason"].status, reports["reason"].reason) == ("skipped", "policy")
    assert reports["reason"].message == "up to date"
    assert reports["reason"].attempt_id is None
    assert run.value == {"reason": None, "valued": {"rows": 2}}


def test_a_policy_skip_value_passes_the_output_schema_inside_an_attempt() -> None:
    """A skip value is validated, so an attempt is begun and recorded on the skip report."""
    step = create_steps()
    cached = step(
        "cached",
        skip=lambda inputs, context: {"reason": "cached", "value": "5"},
        output_schema=validator(int),
        run=_value(0),
    )
    run = define_pipeline(id="t", steps=[cached]).run(context={"run_id": "r"})

    assert run.value == 5
    report = run.steps[0]
    assert (report.status, report.reason, report.attempt_id) == ("skipped", "policy", "r:attempt:1")
    assert report.started_at_ms is not None


def test_a_raising_predicate_fails_its_step_inside_an_attempt() -> None:
    """A skip predicate that raises fails the step, recorded with an attempt."""

    def skip(inputs: Any, context: Any) -> Any:
        assert not hasattr(context, "attempt_id")
        raise LookupError("no cache")

    run = define_pipeline(id="t", steps=[create_steps()("s", skip=skip, run=_value(1))]).run()
    report = run.steps[0]

    assert report.status == "failed"
    assert report.attempt_id is not None
    assert report.error is not None and report.error.message == "no cache"


def test_dry_run_policies() -> None:
    """In a dry run `None` runs the handler, a callable previews instead, `"skip"` skips."""
    calls: list[str] = []
    step = create_steps()
    read = step("read", run=lambda i, c: calls.append(f"read:{c.dry_run}") or "rows")
    preview = step(
        "preview",
        depends_on=[read],
        dry_run=lambda i, c: calls.append("preview") or f"would write {i['read']}",
        output_schema=validator(str.upper),
        run=lambda i, c: calls.append("write") or "written",
    )
    write = step("write", run=lambda i, c: calls.append("real write"), dry_run="skip")
    after = step("after", depends_on=[write], run=lambda i, c: calls.append("after"))
    pipeline = define_pipeline(
        id="dry",
        steps=[read, preview, write, after],
        finalize=lambda outputs, context: outputs["preview"],
    )
    run = pipeline.run(controls={"dry_run": True})

    assert calls == ["read:True", "preview"]
    assert run.value == "WOULD WRITE ROWS"
    assert [(r.id, r.status, r.reason) for r in run.steps] == [
        ("read", "completed", None),
        ("preview", "completed", None),
        ("write", "skipped", "dry-run"),
        ("after", "skipped", "unmet-dependency"),
    ]
    calls.clear()
    pipeline.run()
    assert calls == ["read:False", "write", "real write", "after"]


@pytest.mark.parametrize("controls", [{"targets": ["optional"]}, {"dry_run": True}])
def test_filtered_and_dry_run_prerequisites_never_stall_the_dag(controls: dict[str, Any]) -> None:
    """Structurally skipped prerequisites still settle, so parallel runs finish."""
    step = create_steps()
    source = step("source", dry_run="skip", run=_value(1))
    required = step("required", depends_on=[source], run=_value(2))
    optional = step("optional", optional_depends_on=[source], run=lambda i, c: i.get("source", 3))
    pipeline = define_pipeline(id="sel", steps=[required, source, optional], targets=[optional])
    run = pipeline.run(controls={**controls, "max_concurrency": 4})

    assert run.value == 3
    assert len(run.steps) == 3


def test_invalid_concurrency_runs_no_user_code() -> None:
    """A bad `max_concurrency` fails before options are validated or any step runs."""
    called: list[str] = []

    def options(value: Any) -> Any:
        called.append("options")
        return value

    step = create_steps(validator(options))
    pipeline = define_pipeline(id="bad", steps=[step("work", run=lambda i, c: called.append("w"))])
    run = pipeline.run(controls={"max_concurrency": 0})

    assert [e.code for e in run.errors] == ["TUBELESS_RUN_CONCURRENCY_INVALID"]
    assert run.steps == ()
    assert called == []


def test_separate_runs_of_one_pipeline_run_at_the_same_time(background: Any) -> None:
    """Two runs on two threads are not serialised: both are inside a step at once."""
    barrier = threading.Barrier(2, timeout=_GUARD)
    pipeline = define_pipeline(
        id="shared", steps=[create_steps()("meet", run=lambda i, c: barrier.wait() >= 0)]
    )
    jobs = [background(pipeline.run) for _ in range(2)]

    assert [job.result().value for job in jobs] == [True, True]
    assert not barrier.broken


def test_steps_run_on_pool_threads_that_are_gone_after_the_run(thread_baseline: int) -> None:
    """With several slots, steps run off the caller's thread and no worker survives the run."""
    caller = threading.current_thread()
    seen: list[bool] = []
    step = create_steps()
    steps = [
        step(f"s{i}", run=lambda i, c: seen.append(threading.current_thread() is caller))
        for i in range(4)
    ]
    define_pipeline(id="pool", steps=steps).run(controls={"max_concurrency": 4})

    assert seen == [False] * 4


_RUN_BOUND = frozenset({"runId", "attemptId", "timestampMs", "durationMs"})


@pytest.mark.parametrize("continue_on_error", [True, False])
def test_inline_and_pooled_dispatch_send_the_same_records(continue_on_error: bool) -> None:
    """One step at a time on the calling thread (one slot) or on workers (two slots), a run
    sends the same records for policy skips, dry runs, failures, bad output and the skips
    that follow them."""
    step = create_steps()
    cached = step(
        "cached",
        skip=lambda i, c: {"reason": "cached", "value": "5"},
        output_schema=validator(int),
        run=_value(0),
    )
    preview = step("preview", depends_on=[cached], dry_run=lambda i, c: i["cached"], run=_value(1))
    boom = step("boom", depends_on=[preview], run=lambda i, c: 1 / 0)
    bad = step("bad", optional_depends_on=[boom], output_schema=validator(int), run=_value("x"))
    after = step("after", depends_on=[bad], run=_value(2))
    gated = step("gated", optional_depends_on=[after], skip_after_failure_of=[boom], run=_value(3))
    write = step("write", optional_depends_on=[gated], dry_run="skip", run=_value(4))
    pipeline = define_pipeline(id="same", steps=[cached, preview, boom, bad, after, gated, write])
    shapes = []
    for slots in (1, 2):
        sink = MemoryTraceSink()
        controls = {"max_concurrency": slots, "continue_on_error": continue_on_error}
        pipeline.run(controls={**controls, "dry_run": True}, context={"tracing": sink})
        shapes.append(
            [
                [(key, None if key in _RUN_BOUND else value) for key, value in record.items()]
                for record in sink.records
            ]
        )

    assert shapes[0] == shapes[1]
    names = [(dict(record)["name"], dict(record).get("stepId")) for record in shapes[0]]
    assert ("step.skipped", "cached") in names
    assert ("step.failed", "boom") in names
    assert (("step.failed", "bad") in names) is continue_on_error

"""Child pipelines: `from_pipeline`, `for_each_pipeline` and `iterate_pipeline`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink

_GUARD = 30.0
Wait = Callable[[threading.Event], None]


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _records(sink: MemoryTraceSink, pipeline_id: str, name: str) -> list[dict[str, Any]]:
    return [r for r in sink.records if r["pipelineId"] == pipeline_id and r["name"] == name]


def _doubling_child(seen: list[Any] | None = None) -> Any:
    step = create_steps()

    def double(inputs: Any, context: Any) -> Any:
        if seen is not None:
            seen.append(context)
        return context.options["n"] * 2

    work = step("double", run=double)
    return define_pipeline(id="child", steps=[work])


# -- from_pipeline ---------------------------------------------------------------------


def test_from_pipeline_publishes_the_child_value() -> None:
    """The wrapper's output is the child's value, or what `map_result` makes of it."""
    outer = create_steps()
    plain = outer.from_pipeline(
        "plain", pipeline=_doubling_child(), map_options=lambda inputs, context: {"n": 2}
    )
    mapped = outer.from_pipeline(
        "mapped",
        pipeline=_doubling_child(),
        map_options=lambda inputs, context: {"n": inputs["plain"]},
        map_result=lambda value, run, context: (value, run.pipeline_id, run.status),
        depends_on=[plain],
    )
    pipeline = define_pipeline(id="parent", steps=[plain, mapped])

    assert pipeline.run_or_raise() == (8, "child", "completed")


def test_a_child_gets_parent_options_identity_signal_and_services(
    tmp_path: Any, clock: Any, logger: Any
) -> None:
    """Without `map_options` the child sees the parent's options, links and the same signal."""
    seen: list[Any] = []
    signal = threading.Event()
    wrapper = create_steps().from_pipeline("child", pipeline=_doubling_child(seen))
    pipeline = define_pipeline(id="parent", steps=[wrapper])
    run = pipeline.run(
        {"n": 5},
        context={
            "signal": signal,
            "run_id": "parent-run",
            "correlation_id": "corr",
            "cwd": str(tmp_path),
            "now": clock,
            "log": logger,
        },
    )
    child_context = seen[0]

    assert run.value == 10
    assert child_context.options == {"n": 5}
    assert child_context.parent_run_id == "parent-run"
    assert child_context.correlation_id == "corr"
    assert child_context.run_id.startswith("child:") and child_context.run_id != "parent-run"
    assert child_context.signal is signal
    assert child_context.cwd == str(tmp_path)
    child_context.log.info("hello from the child")
    assert logger.lines == [("info", "hello from the child")]


def test_a_child_validates_the_options_it_is_given() -> None:
    """A child with an options schema validates what the wrapper passes it."""
    inner = create_steps({"type": "object", "required": ["n"]})
    child = define_pipeline(id="strict", steps=[inner("use", run=_value(1))])
    wrapper = create_steps().from_pipeline("child", pipeline=child)
    run = define_pipeline(id="parent", steps=[wrapper]).run({"m": 1})

    error = run.errors[0]
    assert (error.code, error.kind, error.step_id) == ("TUBELESS_CHILD_FAILED", "child", "child")
    assert error.message.startswith("Child pipeline strict failed at unknown step: ")
    assert "options validation failed" in error.message


def test_a_failing_child_fails_the_wrapper_step() -> None:
    """A child that does not complete fails its wrapper with `TUBELESS_CHILD_FAILED`."""
    inner = create_steps()

    def explode(inputs: Any, context: Any) -> Any:
        raise ConnectionError("database unavailable")

    child = define_pipeline(id="failing", steps=[inner("explode", run=explode)])
    wrapper = create_steps().from_pipeline("stage", pipeline=child)
    run = define_pipeline(id="parent", steps=[wrapper]).run()

    error = run.errors[0]
    assert (error.code, error.kind, error.phase, error.step_id) == (
        "TUBELESS_CHILD_FAILED",
        "child",
        "execution",
        "stage",
    )
    assert error.message == "Child pipeline failing failed at explode: database unavailable"
    assert error.source_code is None
    assert error.cause is not None and error.cause.name == "ConnectionError"


def test_an_invalid_child_plan_fails_the_wrapper_before_the_child_runs() -> None:
    """Bad child controls fail the wrapper step; no child handler runs."""
    calls: list[str] = []
    inner = create_steps()
    child = define_pipeline(id="kid", steps=[inner("work", run=lambda i, c: calls.append("w"))])
    wrapper = create_steps().from_pipeline("stage", pipeline=child, controls={"step_ids": ["wrk"]})
    run = define_pipeline(id="parent", steps=[wrapper]).run()

    assert calls == []
    assert run.steps[0].status == "failed"
    assert run.errors[0].code == "TUBELESS_CHILD_FAILED"
    assert run.errors[0].message == (
        "Child pipeline kid could not start: Pipeline kid requested unknown step ids: wrk. "
        'Did you mean "work"?'
    )


def test_child_controls_come_only_from_the_wrapper() -> None:
    """Selection and concurrency come from the child's own controls, not the parent's."""
    ran: list[str] = []
    inner = create_steps()
    a = inner("a", run=lambda i, c: ran.append("a"))
    b = inner("b", run=lambda i, c: ran.append("b"))
    child = define_pipeline(id="kid", steps=[a, b], targets=[a, b])
    wrapper = create_steps().from_pipeline(
        "stage",
        pipeline=child,
        controls=lambda inputs, context: {"targets": ["b"]},
    )
    other = create_steps()("other", run=_value(0))
    run = define_pipeline(id="parent", steps=[wrapper, other]).run(
        controls={"step_ids": ["stage"], "max_concurrency": 2}
    )

    assert ran == ["b"]
    assert [r.status for r in run.steps] == ["completed", "skipped"]


def test_a_dry_running_parent_forces_dry_run_on_children() -> None:
    """Children run dry when the parent does, even if their controls say otherwise."""
    calls: list[str] = []
    inner = create_steps()
    write = inner(
        "write",
        dry_run=lambda i, c: calls.append(f"preview:{c.dry_run}") or "preview",
        run=lambda i, c: calls.append("write") or "written",
    )
    child = define_pipeline(id="kid", steps=[write])
    wrapper = create_steps().from_pipeline("stage", pipeline=child, controls={"dry_run": False})
    pipeline = define_pipeline(id="parent", steps=[wrapper])

    assert pipeline.run_or_raise(controls={"dry_run": True}) == "preview"
    assert calls == ["preview:True"]
    assert pipeline.run_or_raise() == "written"


def test_a_wrapper_may_only_skip_in_dry_runs() -> None:
    """A wrapper's dry-run policy is `"skip"` or nothing; `"skip"` skips the whole child."""
    child = _doubling_child()
    with pytest.raises(TypeError, match="dry_run may only be 'skip'"):
        create_steps().from_pipeline("stage", pipeline=child, dry_run=_value(1))
    wrapper = create_steps().from_pipeline("stage", pipeline=child, dry_run="skip")
    run = define_pipeline(id="parent", steps=[wrapper]).run(controls={"dry_run": True})

    assert (run.steps[0].status, run.steps[0].reason) == ("skipped", "dry-run")


def test_child_records_link_to_the_parent(sink: MemoryTraceSink) -> None:
    """Child records carry `parentRunId`, the inherited correlation id and their own run id."""
    wrapper = create_steps().from_pipeline(
        "stage", pipeline=_doubling_child(), map_options=lambda i, c: {"n": 1}
    )
    define_pipeline(id="parent", steps=[wrapper]).run(
        context={"tracing": sink, "run_id": "p-1", "correlation_id": "c-1"}
    )
    child_records = [r for r in sink.records if r["pipelineId"] == "child"]

    assert child_records
    assert {r["parentRunId"] for r in child_records} == {"p-1"}
    assert {r["correlationId"] for r in child_records} == {"c-1"}
    assert len({r["runId"] for r in child_records}) == 1
    assert all("itemKey" not in r and "iteration" not in r for r in child_records)


def test_child_progress_reaches_the_parent_step() -> None:
    """Child step records are absorbed into progress reports of the wrapper step."""
    progress: list[dict[str, Any]] = []
    inner = create_steps()
    first = inner("first", name="First", run=_value(1))
    second = inner("second", depends_on=[first], run=_value(2))
    child = define_pipeline(id="kid", steps=[first, second])
    wrapper = create_steps().from_pipeline("stage", pipeline=child)
    define_pipeline(id="parent", steps=[wrapper]).run(
        context={"hooks": {"on_step_progress": lambda r: progress.append(r["payload"])}}
    )
    last = progress[-1]["progress"]

    assert (last["completed"], last["total"]) == (2, 2)
    assert [(row["id"], row["status"]) for row in last["details"]] == [
        ("first", "completed"),
        ("second", "completed"),
    ]
    assert last["details"][0]["name"] == "First"


# -- for_each_pipeline -----------------------------------------------------------------


def _fan_out(child: Any, items: list[Any], **config: Any) -> Any:
    wrapper = create_steps().for_each_pipeline(
        "fan",
        pipeline=child,
        items=lambda inputs, context: items,
        key=config.pop("key", lambda item, index: f"item-{item}"),
        map_options=config.pop("map_options", lambda item, index, inputs, context: {"n": item}),
        **config,
    )
    return define_pipeline(id="parent", steps=[wrapper])


def test_fan_out_runs_exactly_concurrency_children_at_once(thread_baseline: int) -> None:
    """Three slots: three children meet at a barrier of three, and never a fourth."""
    barrier = threading.Barrier(3, timeout=_GUARD)
    lock = threading.Lock()
    active = 0
    peak = 0
    inner = create_steps()

    def meet(inputs: Any, context: Any) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        barrier.wait()
        with lock:
            active -= 1
        return int(context.options["n"])

    child = define_pipeline(id="kid", steps=[inner("meet", run=meet)])
    run = _fan_out(child, list(range(6)), concurrency=3).run()

    assert run.value == [0, 1, 2, 3, 4, 5]
    assert peak == 3
    assert threading.active_count() == thread_baseline


def test_fan_out_results_keep_input_order(wait_for: Wait) -> None:
    """Results come back in input order even when later items finish first."""
    second_done = threading.Event()
    inner = create_steps()

    def work(inputs: Any, context: Any) -> str:
        if context.options["n"] == "first":
            wait_for(second_done)
        else:
            second_done.set()
        return str(context.options["n"]).upper()

    child = define_pipeline(id="kid", steps=[inner("work", run=work)])
    pipeline = _fan_out(
        child,
        ["first", "second"],
        concurrency=2,
        map_result=lambda value, run, item, index, context: f"{index}:{value}",
    )

    assert pipeline.run_or_raise() == ["0:FIRST", "1:SECOND"]


def test_duplicate_keys_fail_before_any_child_starts() -> None:
    """Repeated item keys fail the step before a single child runs."""
    calls: list[Any] = []
    inner = create_steps()
    child = define_pipeline(id="kid", steps=[inner("w", run=lambda i, c: calls.append(1))])
    run = _fan_out(child, [1, 2, 3, 4], key=lambda item, index: f"k{item % 2}").run()

    assert calls == []
    error = run.errors[0]
    assert (error.code, error.kind) == ("TUBELESS_CHILD_FAILED", "child")
    assert error.message == "Mapped child pipeline kid received duplicate item keys: k0, k1"


def test_item_keys_must_be_strings() -> None:
    """A key function returning a non-string fails the step before children run."""
    calls: list[Any] = []
    inner = create_steps()
    child = define_pipeline(id="kid", steps=[inner("w", run=lambda i, c: calls.append(1))])
    run = _fan_out(child, [1], key=lambda item, index: index).run()

    assert calls == []
    assert "key must return a string" in run.errors[0].message


def test_failed_items_are_reported_in_input_order_with_diagnostics() -> None:
    """Every item still runs; failures are listed by index with bounded causes."""
    inner = create_steps()

    def work(inputs: Any, context: Any) -> int:
        n = int(context.options["n"])
        if n % 2:
            raise ValueError(f"odd {n}")
        return n

    child = define_pipeline(id="kid", steps=[inner("work", run=work)])
    run = _fan_out(child, [0, 1, 2, 3], concurrency=2).run()
    error = run.errors[0]

    assert (error.code, error.kind, run.status) == ("TUBELESS_CHILD_FAILED", "child", "failed")
    assert error.message == (
        "Mapped child pipeline kid failed for 2 item(s): "
        "item-1: Child pipeline kid failed at work: odd 1; "
        "item-3: Child pipeline kid failed at work: odd 3"
    )
    assert error.fan_out is not None
    assert (error.fan_out.failure_count, error.fan_out.omitted_failure_count) == (2, 0)
    assert [(f.index, f.key, f.cancelled) for f in error.fan_out.failures] == [
        (1, "item-1", False),
        (3, "item-3", False),
    ]
    first = error.fan_out.failures[0].error
    assert first.name == "PipelineExecutionError"
    assert first.cause is not None and first.cause.message == "odd 1"


def test_fan_out_cancellation_drains_running_children(
    background: Any, wait_for: Wait, thread_baseline: int
) -> None:
    """Cancelling during a fan-out lets running children settle, starts no more, cancels."""
    signal = threading.Event()
    both_in = threading.Barrier(3, timeout=_GUARD)
    started: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()
    inner = create_steps()

    def work(inputs: Any, context: Any) -> int:
        n = int(context.options["n"])
        with lock:
            started.append(n)
        both_in.wait()
        try:
            context.sleep(3600)
        finally:
            with lock:
                finished.append(n)
        return n

    child = define_pipeline(id="kid", steps=[inner("work", run=work)])
    pipeline = _fan_out(child, [0, 1, 2, 3, 4], concurrency=2)

    def cancel() -> None:
        both_in.wait()
        signal.set()

    setter = background(cancel)
    run = pipeline.run(context={"signal": signal})
    setter.result()

    assert sorted(started) == [0, 1] and sorted(finished) == [0, 1]
    assert run.status == "cancelled"
    error = run.errors[0]
    assert (error.code, error.kind) == ("TUBELESS_RUN_CANCELLED", "cancellation")
    assert error.fan_out is not None
    assert [(f.index, f.cancelled) for f in error.fan_out.failures] == [(0, True), (1, True)]
    assert threading.active_count() == thread_baseline


def test_failure_wins_over_cancellation_among_children(background: Any, wait_for: Wait) -> None:
    """When one child failed and another was cancelled, the wrapper step failed."""
    signal = threading.Event()
    failing_in = threading.Event()
    inner = create_steps()

    def work(inputs: Any, context: Any) -> int:
        if context.options["n"] == 0:
            context.sleep(3600)
            return 0
        failing_in.set()
        assert context.signal.wait(_GUARD)
        raise ValueError("broke while stopping")

    child = define_pipeline(id="kid", steps=[inner("work", run=work)])
    pipeline = _fan_out(child, [0, 1], concurrency=2)
    setter = background(lambda: (wait_for(failing_in), signal.set()))
    run = pipeline.run(context={"signal": signal})
    setter.result()

    assert run.status == "failed"
    error = run.errors[0]
    assert error.code == "TUBELESS_CHILD_FAILED"
    assert error.fan_out is not None
    assert [(f.index, f.cancelled) for f in error.fan_out.failures] == [(0, True), (1, False)]


def test_fan_out_children_carry_their_item_keys(sink: MemoryTraceSink) -> None:
    """Each child run's records carry its item key and the parent run id."""
    run = _fan_out(_doubling_child(), [1, 2], concurrency=2).run(
        context={"tracing": sink, "run_id": "p-1"}
    )
    started = _records(sink, "child", "pipeline.started")

    assert run.value == [2, 4]
    assert sorted(r["itemKey"] for r in started) == ["item-1", "item-2"]
    assert {r["parentRunId"] for r in started} == {"p-1"}
    assert len({r["runId"] for r in started}) == 2


def test_fan_out_of_nothing_publishes_an_empty_list() -> None:
    """No items means no children and an empty result."""
    assert _fan_out(_doubling_child(), []).run_or_raise() == []


def test_fan_out_progress_counts_items_and_steps(sink: MemoryTraceSink) -> None:
    """Observed fan-outs report `N/M items` progress with item groups, whatever the threads."""
    progress: list[dict[str, Any]] = []
    inner = create_steps()
    a = inner("a", run=_value(1))
    b = inner("b", depends_on=[a], run=_value(2))
    child = define_pipeline(id="kid", steps=[a, b])
    items = list(range(40))
    run = _fan_out(child, items, concurrency=8, progress={"item_noun": "pages"}).run(
        context={
            "tracing": sink,
            "hooks": {"on_step_progress": lambda r: progress.append(r["payload"]["progress"])},
        }
    )

    assert run.status == "completed"
    last = progress[-1]
    assert (last["completed"], last["total"]) == (80, 80)
    assert last["message"].startswith("40/40 pages · 0 running")
    assert last["detailCount"] == 33
    assert last["details"][-1] == {"id": "+more", "name": "+8 more"}


# -- iterate_pipeline ------------------------------------------------------------------


def _iteration(
    transition: Any,
    *,
    max_iterations: int = 3,
    child_run: Any = None,
    **config: Any,
) -> tuple[Any, list[Any], list[int]]:
    """A parent iterating a child that adds one to its state."""
    seen: list[Any] = []
    initialised: list[int] = []
    inner = create_steps()

    def compute(inputs: Any, context: Any) -> Any:
        seen.append(context)
        if child_run is not None:
            return child_run(context)
        return context.options["value"] + 1

    work = inner("compute", run=compute)
    child = define_pipeline(id="kid", steps=[work], finalize=work)

    def initial_state(inputs: Any, context: Any) -> int:
        initialised.append(1)
        return 0

    repeat = create_steps().iterate_pipeline(
        "repeat",
        pipeline=child,
        max_iterations=max_iterations,
        initial_state=initial_state,
        map_options=lambda state, inputs, context: {"value": state},
        transition=transition,
        **config,
    )
    return define_pipeline(id="parent", steps=[repeat], finalize=repeat), seen, initialised


def _until_three(result: Any, state: Any, context: Any) -> Any:
    return (
        {"kind": "finish", "result": result} if result == 3 else {"kind": "next", "state": result}
    )


def test_iteration_repeats_until_finish(sink: MemoryTraceSink) -> None:
    """Each iteration is a fresh child run; the finish result is the step's output."""
    pipeline, seen, initialised = _iteration(_until_three)
    run = pipeline.run(context={"tracing": sink, "run_id": "p-1"})

    assert run.value == 3
    assert [context.options["value"] for context in seen] == [0, 1, 2]
    assert len({context.run_id for context in seen}) == 3
    assert initialised == [1]
    started = _records(sink, "kid", "pipeline.started")
    attempt = run.steps[0].attempt_id
    assert [r["iteration"] for r in started] == [
        {"runId": "p-1", "stepId": "repeat", "attemptId": attempt, "index": index}
        for index in (1, 2, 3)
    ]
    assert [r["itemKey"] for r in started] == ["iteration-1", "iteration-2", "iteration-3"]
    assert {r["parentRunId"] for r in started} == {"p-1"}


def test_iteration_stops_at_its_bound() -> None:
    """A `next` at the limit fails with `TUBELESS_ITERATION_LIMIT_REACHED`, no extra child."""
    progress: list[dict[str, Any]] = []
    pipeline, seen, _ = _iteration(_until_three, max_iterations=2)
    run = pipeline.run(
        context={"hooks": {"on_step_progress": lambda r: progress.append(r["payload"]["progress"])}}
    )

    assert len(seen) == 2
    assert run.status == "failed" and run.finalized is False
    error = run.errors[0]
    assert (error.code, error.source_code, error.step_id) == (
        "TUBELESS_STEP_FAILED",
        "TUBELESS_ITERATION_LIMIT_REACHED",
        "repeat",
    )
    groups = {row["id"]: row.get("status") for row in progress[-1]["details"]}
    assert groups["iteration-2"] == "failed"
    assert groups["iteration-1"] == "completed"


@pytest.mark.parametrize(
    "decision",
    [
        None,
        {},
        {"kind": "next"},
        {"kind": "finish"},
        {"kind": "finish", "result": 1, "state": 0},
        {"kind": "next", "state": 1, "extra": True},
        {"kind": "stop", "result": 1},
        ["finish", 1],
    ],
)
def test_malformed_transitions_are_rejected(decision: Any) -> None:
    """A transition that is not exactly next/state or finish/result fails the step."""
    pipeline, seen, _ = _iteration(lambda result, state, context: decision)
    run = pipeline.run()

    assert len(seen) == 1
    assert run.errors[0].source_code == "TUBELESS_ITERATION_INVALID_DECISION"


def test_a_finish_with_none_is_a_result() -> None:
    """`{"kind": "finish", "result": None}` finishes with `None`."""
    pipeline, _, _ = _iteration(lambda result, state, context: {"kind": "finish", "result": None})
    run = pipeline.run()

    assert run.status == "completed"
    assert run.finalized is True and run.value is None


def test_a_failing_child_stops_the_iteration_without_transition() -> None:
    """A failed iteration fails the step with `TUBELESS_CHILD_FAILED`; no transition runs."""
    transitions: list[Any] = []

    def explode(context: Any) -> Any:
        raise RuntimeError("child failed")

    pipeline, seen, _ = _iteration(
        lambda result, state, context: transitions.append(result), child_run=explode
    )
    run = pipeline.run()

    assert len(seen) == 1 and transitions == []
    assert run.errors[0].code == "TUBELESS_CHILD_FAILED"
    assert run.errors[0].message == "Child pipeline kid failed at compute: child failed"


def test_an_invalid_child_plan_stops_iteration_before_any_child() -> None:
    """Bad static child controls fail the step before the first child or transition."""
    transitions: list[Any] = []
    pipeline, seen, _ = _iteration(
        lambda result, state, context: transitions.append(result),
        controls={"max_concurrency": 0},
    )
    run = pipeline.run()

    assert seen == [] and transitions == []
    assert run.errors[0].code == "TUBELESS_CHILD_FAILED"
    assert "could not start" in run.errors[0].message


def test_iteration_children_run_dry_when_the_parent_does() -> None:
    """A dry-running parent forces every iteration into a dry run."""
    pipeline, seen, _ = _iteration(_until_three, controls={"dry_run": False})
    pipeline.run(controls={"dry_run": True})

    assert [context.dry_run for context in seen] == [True, True, True]


def test_the_iteration_relation_belongs_only_to_the_repeated_child(sink: MemoryTraceSink) -> None:
    """Grandchildren of an iteration link by `parentRunId` only, without `iteration`."""
    leaf = create_steps()
    grandchild = define_pipeline(id="grandchild", steps=[leaf("leaf", run=_value(5))])
    middle = create_steps().from_pipeline("nested", pipeline=grandchild)
    child = define_pipeline(id="kid", steps=[middle])
    repeat = create_steps().iterate_pipeline(
        "repeat",
        pipeline=child,
        max_iterations=1,
        initial_state=lambda inputs, context: 0,
        transition=lambda result, state, context: {"kind": "finish", "result": result},
    )
    run = define_pipeline(id="parent", steps=[repeat]).run(context={"tracing": sink})
    kid = _records(sink, "kid", "pipeline.started")[0]
    grand = _records(sink, "grandchild", "pipeline.started")[0]

    assert run.value == 5
    assert kid["iteration"]["index"] == 1
    assert "iteration" not in grand
    assert grand["parentRunId"] == kid["runId"]
    assert grand["itemKey"] == "iteration-1"


def test_iteration_arguments_are_checked_when_defined() -> None:
    """`max_iterations` must be a positive integer and the callbacks callable."""
    child = _doubling_child()
    factory = create_steps()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(TypeError, match="max_iterations must be a positive integer"):
            factory.iterate_pipeline(
                "r",
                pipeline=child,
                max_iterations=bad,
                initial_state=_value(0),
                transition=_value(None),
            )
    with pytest.raises(TypeError, match="callable transition"):
        factory.iterate_pipeline(
            "r", pipeline=child, max_iterations=1, initial_state=_value(0), transition=None
        )
    with pytest.raises(TypeError, match="pipeline made by define_pipeline"):
        factory.from_pipeline("r", pipeline=object())

"""`tubeless.pipeline.lowlevel`: the seam the agent (and other layers) run child pipelines by."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from tubeless.errors import PipelineExecutionError, RunCancelledError
from tubeless.pipeline import PipelineRun, RunControls, create_steps, define_pipeline, lowlevel
from tubeless.testing import MemoryTraceSink


def _failing_child() -> Any:
    step = create_steps()

    def boom(inputs: Any, context: Any) -> Any:
        raise ValueError("child broke")

    return define_pipeline(id="child", steps=[step("boom", run=boom)])


def _parent(run: Any) -> Any:
    step = create_steps()
    return define_pipeline(id="parent", steps=[step("call", run=run)])


def test_run_child_pipeline_returns_the_failed_report_without_raising() -> None:
    """A failed child comes back as its report, linked to the parent's run and item key."""
    child = _failing_child()
    seen: dict[str, Any] = {}

    def call(inputs: Any, context: Any) -> Any:
        run = lowlevel.run_child_pipeline(
            context, child, {}, controls=RunControls(), item_key="call-1"
        )
        seen["run"], seen["parent"] = run, context.run_id
        return run.status

    sink = MemoryTraceSink()
    parent = _parent(call).run(None, context={"tracing": sink})
    assert parent.status == "completed" and parent.value == "failed"
    child_run = seen["run"]
    assert child_run.parent_run_id == seen["parent"]
    started = [r for r in sink.records if r["pipelineId"] == "child"]
    assert started and all(r["itemKey"] == "call-1" for r in started)


def test_child_failure_names_the_step_and_keeps_the_cause() -> None:
    """`child_failure` words where the child failed, with its exception as `__cause__`."""
    child = _failing_child()
    plan = child.plan()

    def call(inputs: Any, context: Any) -> Any:
        run = lowlevel.run_child_pipeline(context, child, {}, controls=RunControls(), plan=plan)
        raise lowlevel.child_failure(child, plan, run)

    parent = _parent(call).run()
    error = parent.first_exception()
    assert isinstance(error, PipelineExecutionError)
    assert str(error) == "Child pipeline child failed at boom: child broke"
    assert isinstance(error.__cause__, ValueError)


def test_cancellation_helpers_tell_cancellation_from_failure() -> None:
    """`raise_if_cancelled` raises once the signal is set; `is_cancellation` reads the error."""
    signal = threading.Event()
    lowlevel.raise_if_cancelled(signal)
    signal.set()
    with pytest.raises(RunCancelledError) as raised:
        lowlevel.raise_if_cancelled(signal)
    assert str(raised.value) == lowlevel.cancellation_message(signal) == "Pipeline run aborted"
    assert lowlevel.is_cancellation(raised.value, signal)
    assert not lowlevel.is_cancellation(ValueError("unrelated"), signal)


def test_observed_is_false_without_a_sink_or_hooks() -> None:
    """`observed` is true only when something records the run."""
    seen: list[bool] = []
    parent = _parent(lambda inputs, context: seen.append(lowlevel.observed(context)))
    parent.run()
    parent.run(None, context={"tracing": MemoryTraceSink()})
    assert seen == [False, True]


def _lone(case: str) -> tuple[Any, RunControls]:
    """A one-step child pipeline behaving as `case` says, and the controls to run it with."""
    step = create_steps()
    controls = RunControls()

    def run(inputs: Any, context: Any) -> Any:
        if case in ("raises", "continue on error"):
            raise ValueError("step broke")
        if case == "cancels":
            context.signal.set()  # the step ends, then the run is cancelled
        return {"x": 1} if case != "bad output" else {"x": "one"}

    output = {"type": "object", "properties": {"x": {"type": "integer"}}}
    only = step("only", run=run, output_schema=output, dry_run=lambda i, c: {"x": 2})
    finalize: Any = only
    result_schema = None
    if case == "finalizer":
        finalize = lambda outputs, context: outputs["only"]["x"] + 1  # noqa: E731
    elif case == "bad result":
        result_schema = {"type": "string"}
    elif case == "continue on error":
        controls = RunControls(continue_on_error=True)
        finalize = lambda outputs, context: sorted(outputs)  # noqa: E731
    elif case == "dry run":
        controls = RunControls(dry_run=True)
    pipeline = define_pipeline(
        id="lone", steps=[only], finalize=finalize, result_schema=result_schema
    )
    return pipeline, controls


def _through_the_loop(controls: RunControls) -> RunControls:
    """`controls` that run a lone step through the scheduler's loop, not the one-step path
    (two slots: the step runs on a worker thread)."""
    return dataclasses.replace(controls, max_concurrency=2)


def _comparable(run: Any) -> dict[str, Any]:
    """A child run's report without what differs between two runs (ids and times)."""
    steps = [
        (s.id, s.status, s.attempt_id is not None, s.started_at_ms is not None, s.error)
        for s in run.steps
    ]
    kinds = [type(error).__name__ for error in run.exceptions]
    return {
        "status": run.status,
        "finalized": run.finalized,
        "value": run.value,
        "errors": run.errors,
        "steps": steps,
        "exceptions": kinds,
        "ordered": run.started_at_ms <= run.finished_at_ms,
    }


@pytest.mark.parametrize(
    "case",
    [
        "ok",
        "raises",
        "bad output",
        "finalizer",
        "bad result",
        "continue on error",
        "cancels",
        "dry run",
    ],
)
def test_a_lone_step_child_reports_as_the_scheduler_s_loop_would(case: str) -> None:
    """A one-step child run without the scheduler's loop, observed or not, gives the same
    report as the same child run through the loop."""
    reports: list[dict[str, Any]] = []

    def call(loop: bool) -> Any:
        def run(inputs: Any, context: Any) -> Any:
            child, controls = _lone(case)
            controls = _through_the_loop(controls) if loop else controls
            run = lowlevel.run_child_pipeline(context, child, {}, controls=controls)
            reports.append(_comparable(run))

        return run

    _parent(call(loop=False)).run()
    _parent(call(loop=False)).run(None, context={"tracing": MemoryTraceSink()})
    _parent(call(loop=True)).run(None, context={"tracing": MemoryTraceSink()})
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["status"] == (
        "completed"
        if case in ("ok", "finalizer", "dry run")
        else "cancelled"
        if case == "cancels"
        else "failed"
    )


@pytest.mark.parametrize("case", ["ok", "raises", "finalizer", "bad result", "cancels", "dry run"])
def test_run_child_value_skips_the_report_only_for_a_completed_lone_step(case: str) -> None:
    """`run_child_value` hands back the value alone exactly when the report would be
    thrown away: completed, and the step's output is the result as it is, observed or not;
    otherwise the report the scheduler's loop gives."""
    got: list[Any] = []

    def call(inputs: Any, context: Any) -> Any:
        child, controls = _lone(case)
        got.append(
            lowlevel.run_child_value(
                context, child, {}, controls=controls, plan=child.plan(controls)
            )
        )
        return None

    def call_through_the_loop(inputs: Any, context: Any) -> Any:
        child, controls = _lone(case)
        reported.append(
            lowlevel.run_child_pipeline(context, child, {}, controls=_through_the_loop(controls))
        )

    _parent(call).run()
    _parent(call).run(None, context={"tracing": MemoryTraceSink()})
    reported: list[PipelineRun] = []
    _parent(call_through_the_loop).run(None, context={"tracing": MemoryTraceSink()})
    if case in ("ok", "dry run"):
        assert all(isinstance(value, lowlevel.ChildValue) for value in got)
        assert [value.value for value in got] == [reported[0].value] * 2
        assert reported[0].value == ({"x": 1} if case == "ok" else {"x": 2})
    else:
        assert all(isinstance(run, PipelineRun) for run in got)
        assert [_comparable(run) for run in got] == [_comparable(reported[0])] * 2


_RUN_BOUND = frozenset({"runId", "parentRunId", "attemptId", "timestampMs", "durationMs"})


def _record_shapes(sink: MemoryTraceSink) -> list[list[tuple[str, Any]]]:
    """The child's records, fields in order, the values that differ between runs (ids and
    times) left out."""
    return [
        [(key, None if key in _RUN_BOUND else value) for key, value in record.items()]
        for record in sink.records
        if record["pipelineId"] == "lone"
    ]


@pytest.mark.parametrize(
    "case",
    [
        "ok",
        "raises",
        "bad output",
        "finalizer",
        "bad result",
        "continue on error",
        "cancels",
        "dry run",
    ],
)
def test_a_lone_step_child_run_sends_the_records_of_the_scheduler_s_loop(case: str) -> None:
    """A one-step child run without the scheduler's loop, for its value or its report,
    sends the records the same child sends run through the loop, in the same order."""
    sinks = {"value": MemoryTraceSink(), "report": MemoryTraceSink(), "loop": MemoryTraceSink()}

    def call_for_value(inputs: Any, context: Any) -> Any:
        child, controls = _lone(case)
        plan = child.plan(controls)
        lowlevel.run_child_value(context, child, {}, controls=controls, plan=plan)

    def call_for_report(inputs: Any, context: Any) -> Any:
        child, controls = _lone(case)
        lowlevel.run_child_pipeline(context, child, {}, controls=controls)

    def call_through_the_loop(inputs: Any, context: Any) -> Any:
        child, controls = _lone(case)
        lowlevel.run_child_pipeline(context, child, {}, controls=_through_the_loop(controls))

    _parent(call_for_value).run(None, context={"tracing": sinks["value"]})
    _parent(call_for_report).run(None, context={"tracing": sinks["report"]})
    _parent(call_through_the_loop).run(None, context={"tracing": sinks["loop"]})
    value, report, loop = (_record_shapes(sink) for sink in sinks.values())
    assert value == report == loop
    names = [dict(record)["name"] for record in value]
    assert names[:3] == ["pipeline.started", "step.planned", "step.running"]
    assert names[-1] == "pipeline.completed"

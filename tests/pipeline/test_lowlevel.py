"""`tubeless.pipeline.lowlevel`: the seam the agent (and other layers) run child pipelines by."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tubeless.errors import PipelineExecutionError, RunCancelledError
from tubeless.pipeline import RunControls, create_steps, define_pipeline, lowlevel
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

"""The one event stream: trace records delivered, serialised, to sinks and hooks."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tubeless.errors import Issue, SchemaIssues, TraceSinkError
from tubeless.pipeline import HOOK_NAMES, create_steps, define_pipeline
from tubeless.pipeline._handler_context import PROGRESS_INTERVAL_MS
from tubeless.schema import validator
from tubeless.testing import FakeClock, MemoryTraceSink
from tubeless.trace import validate_record

_GUARD = 30.0


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _simple() -> Any:
    step = create_steps()
    load = step("load", run=lambda inputs, context: context.log.info("rows", 3) or 3)
    skip = step("skip", skip=lambda inputs, context: "fresh", run=_value(0))
    return define_pipeline(id="simple", steps=[load, skip], finalize=lambda o, c: o["load"])


class HookRecorder:
    """A hook set with every hook, recording `(hook name, record name)` pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        for name in HOOK_NAMES:
            setattr(self, name, self._recorder(name))

    def _recorder(self, hook: str) -> Any:
        return lambda record: self.calls.append((hook, record["name"]))

    def names(self, hook: str) -> list[str]:
        return [record for called, record in self.calls if called == hook]


def test_sinks_get_every_record_of_a_run_in_order(sink: MemoryTraceSink) -> None:
    """A sink receives the run's records as they happen, from start to completion."""
    run = _simple().run(context={"tracing": sink, "run_id": "r-1"})
    records = sink.records

    assert [r["name"] for r in records] == [
        "pipeline.started",
        "step.planned",
        "step.planned",
        "step.running",
        "pipeline.log",
        "step.complete",
        "step.skipped",
        "pipeline.finalize.started",
        "pipeline.finalize.completed",
        "pipeline.completed",
    ]
    assert {r["runId"] for r in records} == {"r-1"}
    assert all(r["version"] == 3 and r["pipelineId"] == "simple" for r in records)
    log = records[4]
    assert log["payload"] == {"level": "log", "message": "rows 3"}
    assert (log["stepId"], log["attemptId"]) == ("load", run.steps[0].attempt_id)
    assert records[6]["payload"] == {"status": "skipped", "reason": "policy", "message": "fresh"}
    assert records[-1]["payload"] == {
        "status": "completed",
        "dryRun": False,
        "errorCount": 0,
        "finalized": True,
        "stepCount": 2,
    }
    started = records[0]["payload"]
    assert started["definitionIdentity"] == run.definition_identity.to_dict()
    assert started["definitionSnapshot"] == _simple().definition.to_dict()
    assert sink.flush_count == 1


def test_hooks_receive_the_records_their_names_promise() -> None:
    """Each hook gets its record kind; `on_record` all, `on_step_status` step status changes."""
    hooks = HookRecorder()
    step = create_steps()

    def work(inputs: Any, context: Any) -> int:
        context.report_progress(1, 2, "half")
        context.report_attempt(2, {"retry": True})
        return 1

    def fail(inputs: Any, context: Any) -> Any:
        raise ValueError("no")

    pipeline = define_pipeline(id="hooks", steps=[step("work", run=work), step("fail", run=fail)])
    pipeline.run(context={"hooks": hooks})

    assert hooks.names("on_pipeline_start") == ["pipeline.started"]
    assert hooks.names("on_step_plan") == ["step.planned", "step.planned"]
    assert hooks.names("on_step_start") == ["step.running", "step.running"]
    assert hooks.names("on_step_progress") == ["step.running"]
    assert hooks.names("on_step_attempt") == ["step.attempted"]
    assert hooks.names("on_step_complete") == ["step.complete"]
    assert hooks.names("on_step_fail") == ["step.failed"]
    assert hooks.names("on_pipeline_complete") == ["pipeline.completed"]
    assert hooks.names("on_finalize_start") == []
    every = hooks.names("on_record")
    assert every[0] == "pipeline.started" and every[-1] == "pipeline.completed"
    statuses = [name for name in every if name.startswith("step.") and name != "step.attempted"]
    assert hooks.names("on_step_status") == statuses


def test_finalize_hooks_and_errors() -> None:
    """Finalization reports its start and its failure, with the error."""
    errors: list[dict[str, Any]] = []
    hooks = {
        "on_finalize_start": lambda r: errors.append({"started": True}),
        "on_finalize_error": lambda r: errors.append(r["error"]),
    }

    def finalize(outputs: Any, context: Any) -> Any:
        raise RuntimeError("cannot finalize")

    pipeline = define_pipeline(
        id="fin", steps=[create_steps()("s", run=_value(1))], finalize=finalize
    )
    pipeline.run(context={"hooks": hooks})

    assert errors == [
        {"started": True},
        {
            "code": "TUBELESS_FINALIZATION_FAILED",
            "kind": "finalization",
            "phase": "finalization",
            "message": "cannot finalize",
        },
    ]


def test_hook_sets_are_called_in_order_and_isolated(logger: Any) -> None:
    """A raising hook set never breaks the run or later sets, and warns once."""
    calls: list[str] = []

    def broken(record: dict[str, Any]) -> None:
        calls.append("broken")
        raise RuntimeError("hook bug")

    hooks = [
        {"on_record": broken},
        {"on_record": lambda record: calls.append("healthy")},
    ]
    run = _simple().run(context={"hooks": hooks, "log": logger})

    assert run.status == "completed"
    assert calls == ["broken", "healthy"] * 10
    assert logger.messages("warning") == ["Pipeline hook on_record failed: hook bug"]


def test_hook_objects_and_mappings_are_accepted() -> None:
    """A hook set may be a mapping or an object with `on_*` methods, or a list of those."""
    seen: list[str] = []

    class Completion:
        def on_pipeline_complete(self, record: dict[str, Any]) -> None:
            seen.append("object")

    _simple().run(
        context={"hooks": [Completion(), {"on_pipeline_complete": lambda r: seen.append("map")}]}
    )
    assert seen == ["object", "map"]


def test_malformed_hooks_raise_type_error() -> None:
    """Unknown hook names and non-callable hooks are rejected before the run."""
    pipeline = _simple()

    with pytest.raises(TypeError, match="Unknown hook names: onStepStart"):
        pipeline.run(context={"hooks": {"onStepStart": print}})
    with pytest.raises(TypeError, match="Hook on_step_start must be callable"):
        pipeline.run(context={"hooks": {"on_step_start": "print"}})


def test_records_are_serialised_across_threads() -> None:
    """No two records are delivered at once, even when parallel steps log at once."""
    barrier = threading.Barrier(4, timeout=_GUARD)
    delivering = threading.Lock()
    overlaps: list[str] = []
    delivered: list[str] = []

    def on_record(record: dict[str, Any]) -> None:
        if not delivering.acquire(blocking=False):
            overlaps.append(record["name"])
            return
        try:
            delivered.append(record["name"])
        finally:
            delivering.release()

    def chatty(inputs: Any, context: Any) -> None:
        barrier.wait()
        for index in range(50):
            context.log.info("line", index)
            context.report_progress(index + 1, 50)

    step = create_steps()
    steps = [step(f"s{index}", run=chatty) for index in range(4)]
    run = define_pipeline(id="chatty", steps=steps).run(
        controls={"max_concurrency": 4},
        # Every progress report is due when the clock moves a full interval per reading.
        context={"hooks": {"on_record": on_record}, "now": FakeClock(tick=PROGRESS_INTERVAL_MS)},
    )

    assert run.status == "completed"
    assert overlaps == []
    assert delivered.count("pipeline.log") == 200
    assert delivered.count("step.running") == 4 + 200


def test_a_failing_sink_is_retired_with_one_warning(logger: Any) -> None:
    """A sink that raises is dropped for the rest of the run; hooks keep receiving records."""
    hooked: list[str] = []
    sink = MemoryTraceSink(fail_after=2)

    class Broken:
        def __init__(self) -> None:
            self.calls = 0

        def export(self, record: dict[str, Any]) -> None:
            self.calls += 1
            raise OSError("disk full")

    broken = Broken()
    run = _simple().run(
        context={"tracing": broken, "log": logger, "hooks": {"on_record": hooked.append}}
    )
    assert run.status == "completed"
    assert broken.calls == 1
    assert len(hooked) == 10
    assert logger.messages("warning") == [
        "Trace sink failed; later records of this run are dropped: disk full"
    ]

    other = type(logger)()
    _simple().run(context={"tracing": sink, "log": other})
    assert len(sink.records) == 2
    assert other.messages("warning") == ["Trace sink failed: MemoryTraceSink fails after 2 records"]
    assert sink.flush_count == 0


def test_a_partially_failing_sink_is_kept(logger: Any) -> None:
    """A sink reporting a partial failure warns each time and keeps receiving records."""

    class Partial:
        def __init__(self) -> None:
            self.calls = 0

        def export(self, record: dict[str, Any]) -> None:
            self.calls += 1
            if self.calls == 1:
                raise TraceSinkError("one destination retired", partial=True)

    partial = Partial()
    _simple().run(context={"tracing": partial, "log": logger})

    assert partial.calls == 10
    assert logger.messages("warning") == ["Trace sink failed: one destination retired"]


def test_trace_context_is_present_only_while_tracing(sink: MemoryTraceSink) -> None:
    """`context.trace` carries the run's identities when a sink is attached."""
    seen: list[Any] = []
    pipeline = define_pipeline(
        id="t", steps=[create_steps()("s", run=lambda i, c: seen.append(c.trace))]
    )
    pipeline.run(context={"tracing": sink, "run_id": "r", "correlation_id": "c"})
    pipeline.run(context={"hooks": {"on_record": lambda r: None}})

    assert seen == [
        {
            "runId": "r",
            "parentRunId": None,
            "correlationId": "c",
            "itemKey": None,
            "iteration": None,
        },
        None,
    ]


def test_every_record_of_a_busy_run_is_valid(sink: MemoryTraceSink, logger: Any) -> None:
    """Failures, skips, cancellations, children and progress all produce valid records."""
    inner = create_steps()

    def child_work(inputs: Any, context: Any) -> int:
        n = int(context.options["n"])
        context.report_progress(1, 1, f"item {n}", [{"id": "row", "status": "running"}])
        if n == 2:
            raise ValueError("bad item")
        return n

    child = define_pipeline(id="kid", steps=[inner("work", run=child_work)])
    outer = create_steps()

    def rejecting(value: Any) -> Any:
        raise SchemaIssues([Issue("too long", ("name",))])

    steps = [
        outer("logs", run=lambda i, c: c.log.warning("careful", {"a": [1]}) or 1),
        outer("policy", skip=lambda i, c: {"reason": "cached", "value": 2}, run=_value(0)),
        outer("invalid", output_schema=validator(rejecting), run=_value("x")),
        outer.for_each_pipeline(
            "fan",
            pipeline=child,
            items=lambda i, c: [1, 2, 3],
            key=lambda item, index: f"k{item}",
            map_options=lambda item, index, i, c: {"n": item},
            concurrency=2,
        ),
        outer.iterate_pipeline(
            "loop",
            pipeline=child,
            max_iterations=2,
            initial_state=lambda i, c: {"n": 1},
            transition=lambda result, state, c: {"kind": "next", "state": state},
        ),
        outer.from_pipeline("single", pipeline=child, map_options=lambda i, c: {"n": 3}),
        outer("attempts", run=lambda i, c: c.report_attempt(1, {"ok": True, "n": 1.5})),
    ]
    gate = outer("gated", skip_after_failure_of=[steps[2]], run=_value(1))

    def finalize(outputs: Any, context: Any) -> Any:
        context.log.error("finalizing")
        raise RuntimeError("final")

    pipeline = define_pipeline(id="busy", steps=[*steps, gate], finalize=finalize)
    run = pipeline.run(
        controls={"continue_on_error": True, "max_concurrency": 3},
        context={"tracing": sink, "log": logger, "correlation_id": "c"},
    )

    assert run.status == "failed"
    assert logger.messages("warning") == ['careful {"a": [1]}']
    records = sink.records
    for record in records:
        validate_record(record)
    names = {record["name"] for record in records}
    assert names >= {
        "pipeline.started",
        "step.planned",
        "step.running",
        "step.attempted",
        "pipeline.log",
        "step.complete",
        "step.skipped",
        "step.failed",
        "pipeline.finalize.started",
        "pipeline.finalize.failed",
        "pipeline.completed",
    }
    failed = [r for r in records if r["name"] == "step.failed" and r["pipelineId"] == "busy"]
    assert sorted(r["stepId"] for r in failed) == ["fan", "invalid", "loop"]
    assert all("stepId" not in r["error"] for r in failed)
    assert records[-1]["name"] == "pipeline.completed"
    assert records[-1]["error"]["code"] == "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED"


def test_wide_steps_keep_their_planned_records(sink: MemoryTraceSink, logger: Any) -> None:
    """A step with more than 128 dependencies or paths is planned with its lists bounded."""
    step = create_steps()
    sources = [step(f"source-{index}", run=_value(index)) for index in range(130)]
    join = step("join", depends_on=sources, optional_depends_on=[], run=_value("joined"))
    pipeline = define_pipeline(id="wide", steps=[*sources, join])
    pipeline.run(context={"tracing": sink, "log": logger})
    planned = [r for r in sink.records if r["name"] == "step.planned" and r["stepId"] == "join"]

    assert logger.messages("warning") == []
    assert len(planned) == 1
    assert planned[0]["payload"]["dependencies"] == [f"source-{i}" for i in range(128)]


def test_a_snapshot_beyond_the_trace_limits_is_left_out(sink: MemoryTraceSink, logger: Any) -> None:
    """A definition whose snapshot cannot be traced still starts its trace, with its identity."""
    pipeline = define_pipeline(id="large", steps=[create_steps()("x" * 4097, run=_value(1))])
    pipeline.run(context={"tracing": sink, "log": logger})
    records = sink.records

    assert logger.messages("warning") == []
    assert records[0]["name"] == "pipeline.started"
    assert "definitionSnapshot" not in records[0]["payload"]
    assert records[0]["payload"]["definitionIdentity"] == pipeline.definition.identity.to_dict()
    assert records[-1]["name"] == "pipeline.completed"


def test_unknown_progress_statuses_are_rejected(sink: MemoryTraceSink) -> None:
    """A detail row with a status outside the trace vocabulary raises `TypeError`."""
    raised: list[BaseException] = []

    def handler(inputs: Any, context: Any) -> None:
        try:
            context.report_progress(1, 2, None, [{"id": "row", "status": "busy"}])
        except TypeError as error:
            raised.append(error)

    define_pipeline(id="t", steps=[create_steps()("s", run=handler)]).run(context={"tracing": sink})
    assert len(raised) == 1


def test_an_empty_looking_sink_still_traces() -> None:
    """A sink that is falsy (it has a length of zero) is still a sink."""

    class ListSink(list[dict[str, Any]]):
        def export(self, record: dict[str, Any]) -> None:
            self.append(record)

    sink = ListSink()
    _simple().run(context={"tracing": sink})

    assert [record["name"] for record in sink][:1] == ["pipeline.started"]


def test_records_queued_behind_a_busy_deliverer_all_arrive_in_emission_order() -> None:
    """While one thread delivers to a slow sink, others queue: none is lost or reordered.

    A thread that finds the delivery token taken queues its record and returns; the
    deliverer drains the queue and looks again after giving the token back.
    """
    barrier = threading.Barrier(4, timeout=_GUARD)
    lines: list[str] = []
    busy = threading.Lock()
    overlaps: list[str] = []

    class SlowSink:
        def export(self, record: dict[str, Any]) -> None:
            if not busy.acquire(blocking=False):
                overlaps.append(record["name"])
                return
            try:
                if record["name"] == "pipeline.log":
                    # Let other threads run (and queue) while this record is delivered.
                    threading.Event().wait(0.0005)
                    lines.append(record["payload"]["message"])
            finally:
                busy.release()

    def chatty(inputs: Any, context: Any) -> None:
        barrier.wait()
        for index in range(100):
            context.log.info(f"{context.attempt_id[-1]}-{index}")

    step = create_steps()
    steps = [step(f"s{index}", run=chatty) for index in range(4)]
    run = define_pipeline(id="queued", steps=steps).run(
        controls={"max_concurrency": 4}, context={"tracing": SlowSink()}
    )

    assert run.status == "completed"
    assert overlaps == []
    assert len(lines) == 400
    by_attempt: dict[str, list[int]] = {}
    for line in lines:
        attempt, index = line.split("-")
        by_attempt.setdefault(attempt, []).append(int(index))
    assert sorted(by_attempt.values()) == [list(range(100))] * 4

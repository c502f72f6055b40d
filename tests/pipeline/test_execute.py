"""One run end to end: options, the run report, finalization and `run_or_raise`."""

from __future__ import annotations

import re
import threading
import uuid
from typing import Any

import pytest

from tubeless.errors import (
    Issue,
    PipelineExecutionError,
    RunCancelledError,
    SchemaIssues,
    TubelessError,
)
from tubeless.pipeline import RunContext, create_steps, define_pipeline, require_outputs
from tubeless.schema import validator


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _raise(error: BaseException) -> Any:
    def run(inputs: Any, context: Any) -> Any:
        raise error

    return run


def _rejecting(*issues: Issue) -> Any:
    def validate(value: Any) -> Any:
        raise SchemaIssues(issues)

    return validator(validate)


def test_a_completed_run_reports_every_step_in_plan_order(clock: Any) -> None:
    """A run returns one completed report per planned step and the finalized value."""
    step = create_steps()
    load = step("load", name="Load", description="Reads.", run=_value([1, 2]))
    total = step("total", depends_on=[load], run=lambda inputs, context: sum(inputs["load"]))
    pipeline = define_pipeline(id="sum", steps=[total, load])
    run = pipeline.run(context={"now": clock, "run_id": "run-1"})

    assert run.status == "completed"
    assert run.errors == ()
    assert run.finalized is True
    assert run.value == 3
    assert run.version == 2
    assert [(r.id, r.status, r.attempt_id) for r in run.steps] == [
        ("load", "completed", "run-1:attempt:1"),
        ("total", "completed", "run-1:attempt:2"),
    ]
    assert run.to_dict() == {
        "version": 2,
        "pipelineId": "sum",
        "runId": "run-1",
        "definitionIdentity": pipeline.definition.identity.to_dict(),
        "dryRun": False,
        "status": "completed",
        "startedAtMs": run.started_at_ms,
        "finishedAtMs": run.finished_at_ms,
        "errors": [],
        "steps": [
            {
                "id": "load",
                "status": "completed",
                "name": "Load",
                "description": "Reads.",
                "attemptId": "run-1:attempt:1",
                "startedAtMs": run.steps[0].started_at_ms,
                "finishedAtMs": run.steps[0].finished_at_ms,
            },
            {
                "id": "total",
                "status": "completed",
                "attemptId": "run-1:attempt:2",
                "startedAtMs": run.steps[1].started_at_ms,
                "finishedAtMs": run.steps[1].finished_at_ms,
            },
        ],
        "finalized": True,
        "value": 3,
    }
    assert run.started_at_ms < run.steps[0].started_at_ms < run.finished_at_ms


def test_run_ids_default_to_pipeline_id_and_a_uuid() -> None:
    """Without a run id the run gets `<pipeline id>:<uuid4>`."""
    pipeline = define_pipeline(id="ids", steps=[create_steps()("only", run=_value(1))])
    run_id = pipeline.run().run_id

    prefix, _, rest = run_id.partition(":")
    assert prefix == "ids"
    assert uuid.UUID(rest).version == 4
    assert uuid.UUID(rest).variant == uuid.RFC_4122
    assert str(uuid.UUID(rest)) == rest
    assert pipeline.run().run_id != run_id


def test_attempt_ids_count_in_base36() -> None:
    """The attempt sequence is counted per run and written in base 36."""
    step = create_steps()
    steps = [step(f"s{index}", run=_value(index)) for index in range(37)]
    run = define_pipeline(id="many", steps=steps).run(context={"run_id": "r"})

    assert [report.attempt_id for report in run.steps][34:] == [
        "r:attempt:z",
        "r:attempt:10",
        "r:attempt:11",
    ]


def test_handlers_see_the_run_context(tmp_path: Any, clock: Any) -> None:
    """Handlers get the options, identities, cwd, clock and the caller's very signal."""
    signal = threading.Event()
    seen: dict[str, Any] = {}

    def look(inputs: Any, context: Any) -> None:
        seen.update(
            options=context.options,
            run_id=context.run_id,
            parent_run_id=context.parent_run_id,
            correlation_id=context.correlation_id,
            cwd=context.cwd,
            signal=context.signal,
            dry_run=context.dry_run,
            attempt_id=context.attempt_id,
            now=context.now(),
            trace=context.trace,
        )

    pipeline = define_pipeline(id="ctx", steps=[create_steps()("look", run=look)])
    pipeline.run(
        {"x": 1},
        context=RunContext(
            signal=signal,
            run_id="run-7",
            parent_run_id="parent-1",
            correlation_id="corr-1",
            cwd=str(tmp_path),
            now=clock,
        ),
    )

    assert seen["options"] == {"x": 1}
    assert (seen["run_id"], seen["parent_run_id"], seen["correlation_id"]) == (
        "run-7",
        "parent-1",
        "corr-1",
    )
    assert seen["cwd"] == str(tmp_path)
    assert seen["signal"] is signal
    assert seen["dry_run"] is False
    assert seen["attempt_id"] == "run-7:attempt:1"
    assert seen["now"] >= 1_700_000_000_000
    assert seen["trace"] is None


def test_options_are_validated_once_before_any_step() -> None:
    """Options failing their schema fail the run with no step run and no step report."""
    calls: list[str] = []
    step = create_steps({"type": "object", "required": ["source"]})
    load = step("load", run=lambda inputs, context: calls.append("load"))
    pipeline = define_pipeline(id="opts", steps=[load])
    run = pipeline.run({"other": 1})

    assert calls == []
    assert run.status == "failed"
    assert run.steps == ()
    assert run.finalized is False
    error = run.errors[0]
    assert (error.code, error.phase, error.kind, error.step_id) == (
        "TUBELESS_OPTIONS_VALIDATION_FAILED",
        "execution",
        "validation",
        None,
    )
    assert error.message.startswith("Pipeline opts options validation failed: ")
    assert error.issues is not None and len(error.issues) == 1


def test_validated_options_reach_handlers_transformed() -> None:
    """Handlers see the options as the schema returned them."""
    step = create_steps(validator(lambda value: {"count": int(value["count"])}))
    double = step("double", run=lambda inputs, context: context.options["count"] * 2)

    assert define_pipeline(id="t", steps=[double]).run_or_raise({"count": "21"}) == 42


def test_options_default_to_an_empty_dict() -> None:
    """`run()` without options gives handlers `{}`."""
    pipeline = define_pipeline(id="t", steps=[create_steps()("o", run=lambda i, c: c.options)])
    assert pipeline.run_or_raise() == {}


def test_inputs_hold_required_and_published_optional_outputs() -> None:
    """Required deps are always keyed; an optional dep is keyed only when it published."""
    seen: list[dict[str, Any]] = []
    step = create_steps()
    a = step("a", run=_value(1))
    skipped = step("skipped", skip=lambda inputs, context: "not needed", run=_value(2))
    absent = step("absent", dry_run="skip", run=_value(3))
    use = step(
        "use",
        depends_on=[a, skipped],
        optional_depends_on=[absent],
        run=lambda inputs, context: seen.append(dict(inputs)),
    )
    define_pipeline(id="inputs", steps=[a, skipped, absent, use]).run(controls={"dry_run": True})

    assert seen == [{"a": 1, "skipped": None}]


def test_the_default_result_is_the_last_step_output() -> None:
    """Without `finalize` the value is the output of the last step in execution order."""
    step = create_steps()
    load = step("load", run=_value("loaded"))
    publish = step("publish", depends_on=[load], run=_value("published"))

    assert define_pipeline(id="d", steps=[publish, load]).run_or_raise() == "published"


def test_a_step_finalizer_returns_that_steps_output() -> None:
    """`finalize=step` returns the step's published output."""
    step = create_steps()
    load = step("load", run=_value("loaded"))
    publish = step("publish", depends_on=[load], run=_value("published"))

    assert define_pipeline(id="d", steps=[load, publish], finalize=load).run_or_raise() == "loaded"


def test_a_finalizer_gets_published_outputs_and_a_context() -> None:
    """A callable finalizer gets a dict of the published outputs and the run context."""
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", run=_value(None))
    gone = step("gone", dry_run="skip", run=_value(3))

    def finalize(outputs: dict[str, Any], context: Any) -> Any:
        return (outputs, context.run_id, context.dry_run)

    pipeline = define_pipeline(id="fin", steps=[a, b, gone], finalize=finalize)
    outputs, run_id, dry_run = pipeline.run_or_raise(
        controls={"dry_run": True}, context={"run_id": "r"}
    )
    assert (outputs, run_id, dry_run) == ({"a": 1, "b": None}, "r", True)


def test_require_outputs_fails_finalization_when_an_output_is_missing() -> None:
    """A missing required output fails finalization and names the missing step ids."""
    step = create_steps()
    a = step("a", dry_run="skip", run=_value(1))
    b = step("b", run=_value(None))
    finalize = require_outputs([a, b], lambda outputs, context: outputs)
    pipeline = define_pipeline(id="req", steps=[a, b], targets=[], finalize=finalize)

    run = pipeline.run(controls={"dry_run": True})
    assert run.status == "failed"
    assert run.finalized is False
    assert "value" not in run.to_dict()
    error = run.errors[0]
    assert (error.code, error.phase, error.kind, error.step_id, error.source_code) == (
        "TUBELESS_FINALIZATION_FAILED",
        "finalization",
        "finalization",
        "__finalize__",
        "TUBELESS_REQUIRED_OUTPUTS_MISSING",
    )
    assert error.message == (
        "Pipeline req finalizer requires outputs that were not published: "
        "a (skipped by the dry run: it has no dry-run preview, dry_run=)"
    )
    assert pipeline.run().value == {"a": 1, "b": None}


def test_a_none_result_is_still_a_value() -> None:
    """A finalized `None` is present in the run dict under `value`."""
    run = define_pipeline(id="none", steps=[create_steps()("n", run=_value(None))]).run()

    assert run.finalized is True
    assert run.to_dict()["value"] is None


def test_the_result_schema_validates_and_transforms_the_value() -> None:
    """The result schema's output is the run's value; a rejection fails finalization."""
    step = create_steps()
    number = step("number", run=_value("7"))
    good = define_pipeline(id="ok", steps=[number], result_schema=validator(int))
    bad = define_pipeline(
        id="bad", steps=[number], result_schema=_rejecting(Issue("Must be positive", ("n",)))
    )

    assert good.run_or_raise() == 7
    error = bad.run().errors[0]
    assert (error.code, error.phase, error.kind, error.step_id) == (
        "TUBELESS_FINAL_RESULT_VALIDATION_FAILED",
        "finalization",
        "validation",
        "__finalize__",
    )
    assert error.issues == (Issue("Must be positive", ("n",)),)
    assert error.message == "Pipeline bad final result validation failed: n: Must be positive"


def test_output_schemas_validate_and_transform_published_values() -> None:
    """An output schema transforms what a step publishes, and its issues fail the step."""
    step = create_steps()
    count = step("count", output_schema=validator(int), run=_value("4"))
    double = step("double", depends_on=[count], run=lambda i, c: i["count"] * 2)
    bad = step("bad", output_schema=_rejecting(Issue("Not publishable", ("slug",))), run=_value(1))

    assert define_pipeline(id="ok", steps=[count, double]).run_or_raise() == 8
    run = define_pipeline(id="bad", steps=[bad]).run()
    report = run.steps[0]
    assert report.status == "failed"
    assert report.attempt_id is not None
    assert report.error is not None
    assert report.error.code == "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED"
    assert report.error.issues == (Issue("Not publishable", ("slug",)),)


def test_a_throwing_validator_is_not_an_issue_list() -> None:
    """A validator that raises something else "threw while validating" and keeps the cause."""

    def broken(value: Any) -> Any:
        raise KeyError("schema bug")

    step = create_steps()
    run = define_pipeline(
        id="t", steps=[step("s", output_schema=validator(broken, vendor="mine"), run=_value(1))]
    ).run()
    error = run.errors[0]

    assert error.code == "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED"
    assert error.message == "Pipeline t step s output schema (mine) threw while validating"
    assert error.issues == ()
    assert error.cause is not None and error.cause.name == "KeyError"


def test_step_errors_keep_source_code_and_cause() -> None:
    """A failing step records the exception's `code` and its normalised cause chain."""

    class DeniedError(OSError):
        code = "EACCES"

    failure = TubelessError("cannot read rows", code="ENOENT")
    failure.__cause__ = DeniedError("denied")
    run = define_pipeline(id="t", steps=[create_steps()("load", run=_raise(failure))]).run()
    error = run.errors[0]

    assert error.format() == (
        "execution at step load [TUBELESS_STEP_FAILED] (ENOENT): cannot read rows; "
        "caused by EACCES: denied"
    )


def test_errors_are_ordered_run_steps_then_finalization() -> None:
    """Errors list step errors in plan order, then the finalization error."""
    step = create_steps()
    first = step("first", run=_raise(ValueError("one")))
    second = step("second", run=_raise(ValueError("two")))

    def finalize(outputs: Any, context: Any) -> Any:
        raise ValueError("three")

    run = define_pipeline(id="t", steps=[second, first], finalize=finalize).run(
        controls={"continue_on_error": True}
    )
    assert [(e.step_id, e.message) for e in run.errors] == [
        ("second", "two"),
        ("first", "one"),
        ("__finalize__", "three"),
    ]


def test_run_or_raise_returns_the_value_or_raises_with_the_run() -> None:
    """`run_or_raise` returns a completed value; otherwise it raises with the run attached."""
    original = ValueError("step failed")
    step = create_steps()
    pipeline = define_pipeline(id="boom", steps=[step("failing", run=_raise(original))])

    with pytest.raises(PipelineExecutionError) as caught:
        pipeline.run_or_raise()
    error = caught.value
    assert str(error) == (
        "Pipeline boom failed: execution at step failing [TUBELESS_STEP_FAILED]: step failed"
    )
    assert error.__cause__ is original
    assert error.code == "TUBELESS_STEP_FAILED"
    assert error.result.status == "failed"
    assert error.cancelled is False


def test_run_or_raise_says_cancelled_for_cancellation_only_runs() -> None:
    """A cancelled run raises a "cancelled" `PipelineExecutionError`."""
    signal = threading.Event()
    signal.set()
    pipeline = define_pipeline(id="stop", steps=[create_steps()("work", run=_value(1))])

    with pytest.raises(PipelineExecutionError) as caught:
        pipeline.run_or_raise(context={"signal": signal})
    assert str(caught.value) == (
        "Pipeline stop cancelled: execution at step work [TUBELESS_RUN_CANCELLED]: "
        "Pipeline run aborted"
    )
    assert caught.value.cancelled is True
    assert caught.value.__cause__ is None


def test_empty_step_ids_give_a_failed_run_not_an_exception() -> None:
    """`step_ids=[]` returns a failed run carrying the planning error; nothing runs."""
    calls: list[str] = []
    pipeline = define_pipeline(
        id="empty", steps=[create_steps()("work", run=lambda i, c: calls.append("work"))]
    )
    run = pipeline.run(controls={"step_ids": []})

    assert calls == []
    assert run.status == "failed"
    assert run.steps == ()
    assert [(e.code, e.phase) for e in run.errors] == [
        ("TUBELESS_PLANNING_STEP_SELECTION_EMPTY", "planning")
    ]
    with pytest.raises(PipelineExecutionError, match="STEP_SELECTION_EMPTY"):
        pipeline.run_or_raise(controls={"step_ids": []})


def test_malformed_controls_and_context_raise_type_error() -> None:
    """Unknown control keys, unknown context keys and a non-Event signal raise `TypeError`."""
    pipeline = define_pipeline(id="t", steps=[create_steps()("work", run=_value(1))])

    with pytest.raises(TypeError, match="Unknown run controls: dryRun"):
        pipeline.run(controls={"dryRun": True})
    with pytest.raises(TypeError, match="Unknown run context fields: runId"):
        pipeline.run(context={"runId": "x"})
    with pytest.raises(TypeError, match=r"signal must be a threading\.Event"):
        pipeline.run(context={"signal": True})
    with pytest.raises(TypeError, match="run_id must be a non-blank string"):
        pipeline.run(context={"run_id": " "})
    with pytest.raises(TypeError, match="tracing must be a trace sink"):
        pipeline.run(context={"tracing": object()})


def test_controls_and_context_are_keyword_only() -> None:
    """`run` and `run_or_raise` refuse controls or context given by position."""
    pipeline = define_pipeline(id="t", steps=[create_steps()("work", run=_value(1))])

    for method in (pipeline.run, pipeline.run_or_raise):
        with pytest.raises(TypeError, match="positional argument"):
            method({}, {"dry_run": True})
        with pytest.raises(TypeError, match="positional argument"):
            method({}, None, {"run_id": "r"})
    assert pipeline.run({}, controls={"dry_run": True}, context={"run_id": "r"}).dry_run
    assert pipeline.run_or_raise({}, controls=None, context=None) == 1


def test_a_failing_run_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """Failures, a raising hook, a broken sink and step logs print nothing by themselves."""

    class BrokenSink:
        def export(self, record: dict[str, Any]) -> None:
            raise OSError("disk full")

    def hook(record: dict[str, Any]) -> None:
        raise RuntimeError("hook bug")

    def noisy(inputs: Any, context: Any) -> Any:
        context.log.error("about to fail")
        raise ValueError("step failed")

    pipeline = define_pipeline(id="quiet", steps=[create_steps()("noisy", run=noisy)])
    run = pipeline.run(context={"hooks": {"on_record": hook}, "tracing": BrokenSink()})
    with pytest.raises(PipelineExecutionError):
        pipeline.run_or_raise()

    assert run.status == "failed"
    assert capsys.readouterr() == ("", "")


def test_a_cancelled_error_from_a_handler_cancels_the_step() -> None:
    """A handler raising `RunCancelledError` is a cancellation even with the signal unset."""
    run = define_pipeline(
        id="t", steps=[create_steps()("s", run=_raise(RunCancelledError("stop")))]
    ).run()

    assert run.status == "cancelled"
    assert run.steps[0].status == "cancelled"
    assert run.errors[0].code == "TUBELESS_RUN_CANCELLED"


def test_run_reports_dry_run() -> None:
    """Dry runs are flagged on the report and on every context."""
    seen: list[bool] = []
    pipeline = define_pipeline(
        id="dry", steps=[create_steps()("s", run=lambda i, c: seen.append(c.dry_run))]
    )
    run = pipeline.run(controls={"dry_run": True})

    assert run.dry_run is True and run.to_dict()["dryRun"] is True
    assert seen == [True]
    assert re.fullmatch(r"dry:[0-9a-f-]{36}", run.run_id)


def test_pydantic_options_are_validated_and_transformed() -> None:
    """A pydantic model as options schema gives handlers the model and reports its issues."""
    pydantic = pytest.importorskip("pydantic")

    class Options(pydantic.BaseModel):
        count: int

    step = create_steps(Options)
    pipeline = define_pipeline(id="typed", steps=[step("read", run=lambda i, c: c.options)])

    value = pipeline.run_or_raise({"count": "3"})
    assert isinstance(value, Options) and value.count == 3
    error = pipeline.run({"count": "many"}).errors[0]
    assert error.code == "TUBELESS_OPTIONS_VALIDATION_FAILED"
    assert error.issues is not None and error.issues[0].path == ("count",)


def test_causal_errors_hide_the_derived_missing_output_error() -> None:
    """A failed step explains the missing required output, so only its error is causal."""
    steps = create_steps()

    def explode(inputs: Any, context: Any) -> None:
        raise RuntimeError("boom")

    load = steps.step("load", run=explode)
    publish = steps.step("publish", run=lambda inputs, context: 1, depends_on=[load])
    pipeline = define_pipeline(id="causal", steps=[load, publish], finalize=publish)
    run = pipeline.run(controls={"continue_on_error": True})
    codes = [error.source_code or error.code for error in run.errors]
    assert codes == ["TUBELESS_STEP_FAILED", "TUBELESS_REQUIRED_OUTPUTS_MISSING"]
    assert [error.code for error in run.causal_errors()] == ["TUBELESS_STEP_FAILED"]


def test_causal_errors_keep_a_missing_output_nobody_explains() -> None:
    """A filtered (not failed) step leaves the missing-output error as the explanation."""
    steps = create_steps()
    load = steps.step("load", run=lambda inputs, context: 1)
    other = steps.step("other", run=lambda inputs, context: 2)
    pipeline = define_pipeline(id="unexplained", steps=[load, other], targets=[], finalize=load)
    run = pipeline.run(controls={"step_ids": ["other"]})
    assert run.causal_errors() == run.errors
    assert run.errors[0].source_code == "TUBELESS_REQUIRED_OUTPUTS_MISSING"

"""The error catalog, produced through the real API, and the error records and exceptions."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tubeless.errors import (
    ERROR_CODE_CLASSIFICATION,
    PIPELINE_ERROR_CODES,
    Diagnostic,
    ErrorCause,
    FanOutDiagnostics,
    FanOutFailure,
    Issue,
    PipelineDefinitionError,
    PipelineExecutionError,
    SchemaIssues,
    ToolError,
    TubelessError,
    format_diagnostic,
    is_pipeline_error_code,
    normalize_cause,
)
from tubeless.pipeline import Step, create_steps, define_pipeline, require_outputs
from tubeless.schema import validator

# Phase and kind of every code, copied from the table in core.md section 8.2.
EXPECTED: Mapping[str, tuple[str, str]] = {
    **dict.fromkeys(
        [
            "TUBELESS_DEFINITION_DEPENDENCY_CONTRADICTORY",
            "TUBELESS_DEFINITION_DEPENDENCY_CYCLE",
            "TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE",
            "TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS",
            "TUBELESS_DEFINITION_DEPENDENCY_SELF_REFERENCE",
            "TUBELESS_DEFINITION_FINALIZER_STEP_NOT_IN_STEPS",
            "TUBELESS_DEFINITION_IMPLEMENTATION_VERSION_INVALID",
            "TUBELESS_DEFINITION_OPTIONS_SCHEMA_CONFLICT",
            "TUBELESS_DEFINITION_PIPELINE_ID_BLANK",
            "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK",
            "TUBELESS_DEFINITION_PIPELINE_DESCRIPTION_BLANK",
            "TUBELESS_DEFINITION_STEP_ID_BLANK",
            "TUBELESS_DEFINITION_STEP_NAME_BLANK",
            "TUBELESS_DEFINITION_STEP_ID_RESERVED",
            "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE",
            "TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH",
            "TUBELESS_DEFINITION_TARGET_NOT_IN_STEPS",
            "TUBELESS_DEFINITION_TARGETS_DUPLICATE",
        ],
        ("definition", "definition"),
    ),
    **dict.fromkeys(
        [
            "TUBELESS_PLANNING_SELECTION_CONFLICT",
            "TUBELESS_PLANNING_STEP_SELECTION_DUPLICATE",
            "TUBELESS_PLANNING_STEP_SELECTION_EMPTY",
            "TUBELESS_PLANNING_STEP_UNKNOWN",
            "TUBELESS_PLANNING_TARGET_SELECTION_DUPLICATE",
            "TUBELESS_PLANNING_TARGET_SELECTION_EMPTY",
            "TUBELESS_PLANNING_TARGET_UNDECLARED",
            "TUBELESS_PLANNING_TARGET_UNKNOWN",
        ],
        ("planning", "selection"),
    ),
    "TUBELESS_RUN_CONCURRENCY_INVALID": ("planning", "validation"),
    "TUBELESS_OPTIONS_VALIDATION_FAILED": ("execution", "validation"),
    "TUBELESS_STEP_FAILED": ("execution", "step"),
    "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED": ("execution", "validation"),
    "TUBELESS_CHILD_FAILED": ("execution", "child"),
    "TUBELESS_RUN_CANCELLED": ("execution", "cancellation"),
    "TUBELESS_FINALIZATION_FAILED": ("finalization", "finalization"),
    "TUBELESS_FINAL_RESULT_VALIDATION_FAILED": ("finalization", "validation"),
    "TUBELESS_FINALIZATION_CANCELLED": ("finalization", "cancellation"),
}


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _raise(error: BaseException) -> Any:
    def run(inputs: Any, context: Any) -> Any:
        raise error

    return run


def _rejecting(message: str) -> Any:
    def validate(value: Any) -> Any:
        raise SchemaIssues([message])

    return validator(validate)


def _first_definition_error(**kwargs: Any) -> Diagnostic:
    kwargs.setdefault("id", "codes")
    with pytest.raises(PipelineDefinitionError) as caught:
        define_pipeline(**kwargs)
    return caught.value.errors[0]


def _first_run_error(pipeline: Any, **arguments: Any) -> Diagnostic:
    return pipeline.run(**arguments).errors[0]


def _rewire(step: Step, **fields: Any) -> Step:
    """Point an existing step at other steps, as only a hand-built graph can."""
    for name, value in fields.items():
        object.__setattr__(step, name, value)
    return step


def _selection() -> Any:
    step = create_steps()
    build = step("build", run=_value("built"))
    write = step("write", depends_on=[build], run=_value("written"))
    return define_pipeline(id="codes", steps=[build, write], targets=[write])


def _planned(controls: dict[str, Any]) -> Diagnostic:
    return _selection().plan(controls).errors[0]


def _contradictory() -> Diagnostic:
    step = create_steps()
    source = step("source", run=_value(1))
    both = step("both", depends_on=[source], optional_depends_on=[source], run=_value(2))
    return _first_definition_error(steps=[source, both])


def _cycle() -> Diagnostic:
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", depends_on=[a], run=_value(2))
    _rewire(a, depends_on=(b,))
    return _first_definition_error(steps=[a, b])


def _duplicate_dependency() -> Diagnostic:
    step = create_steps()
    source = step("source", run=_value(1))
    return _first_definition_error(
        steps=[source, step("twice", depends_on=[source, source], run=_value(2))]
    )


def _not_in_steps() -> Diagnostic:
    step = create_steps()
    build = step("build", run=_value(1))
    return _first_definition_error(steps=[step("write", depends_on=[build], run=_value(2))])


def _self_reference() -> Diagnostic:
    loop = create_steps()("loop", run=_value(1))
    return _first_definition_error(steps=[_rewire(loop, skip_after_failure_of=(loop,))])


def _finalizer_not_in_steps() -> Diagnostic:
    step = create_steps()
    foreign = step("foreign", run=_value(1))
    return _first_definition_error(
        steps=[step("included", run=_value(2))],
        finalize=require_outputs([foreign], lambda outputs, context: outputs),
    )


def _options_conflict() -> Diagnostic:
    first = create_steps(validator(lambda value: value, vendor="a"))("first", run=_value(1))
    second = create_steps(validator(lambda value: value, vendor="b"))("second", run=_value(2))
    return _first_definition_error(steps=[first, second])


def _only() -> list[Step]:
    return [create_steps()("only", run=_value(1))]


def _target_finalizer_mismatch() -> Diagnostic:
    step = create_steps()
    load = step("load", run=_value(1))
    normalize = step("normalize", depends_on=[load], run=_value(2))
    return _first_definition_error(
        steps=[load, normalize],
        targets=[load],
        finalize=require_outputs([normalize], lambda outputs, context: outputs),
    )


def _target_not_in_steps() -> Diagnostic:
    step = create_steps()
    return _first_definition_error(
        steps=[step("included", run=_value(1))], targets=[step("foreign", run=_value(2))]
    )


def _targets_duplicate() -> Diagnostic:
    included = create_steps()("included", run=_value(1))
    return _first_definition_error(steps=[included], targets=[included, included])


def _options_invalid() -> Diagnostic:
    step = create_steps({"type": "object", "required": ["source"]})
    pipeline = define_pipeline(id="codes", steps=[step("load", run=_value("never"))])
    return _first_run_error(pipeline, options={"src": "rows.json"})


def _step_failed() -> Diagnostic:
    step = create_steps()
    pipeline = define_pipeline(id="codes", steps=[step("f", run=_raise(ValueError("no")))])
    return _first_run_error(pipeline)


def _output_invalid() -> Diagnostic:
    step = create_steps()
    publish = step("publish", output_schema=_rejecting("Not publishable"), run=_value("draft"))
    return _first_run_error(define_pipeline(id="codes", steps=[publish]))


def _child_failed() -> Diagnostic:
    inner = create_steps()
    child = define_pipeline(
        id="child", steps=[inner("explode", run=_raise(ConnectionError("database unavailable")))]
    )
    stage = create_steps().from_pipeline("stage", pipeline=child)
    return _first_run_error(define_pipeline(id="codes", steps=[stage]))


def _run_cancelled() -> Diagnostic:
    signal = threading.Event()
    signal.set()
    pipeline = define_pipeline(id="codes", steps=[create_steps()("work", run=_value(1))])
    return _first_run_error(pipeline, context={"signal": signal})


def _finalization_failed() -> Diagnostic:
    def finalize(outputs: Any, context: Any) -> Any:
        raise RuntimeError("finalize failed")

    pipeline = define_pipeline(id="codes", steps=_only(), finalize=finalize)
    return _first_run_error(pipeline)


def _final_result_invalid() -> Diagnostic:
    pipeline = define_pipeline(id="codes", steps=_only(), result_schema=_rejecting("Must be big"))
    return _first_run_error(pipeline)


def _finalization_cancelled() -> Diagnostic:
    def work(inputs: Any, context: Any) -> bool:
        context.signal.set()
        return True

    pipeline = define_pipeline(id="codes", steps=[create_steps()("work", run=work)])
    return _first_run_error(pipeline)


PRODUCERS: Mapping[str, Callable[[], Diagnostic]] = {
    "TUBELESS_DEFINITION_DEPENDENCY_CONTRADICTORY": _contradictory,
    "TUBELESS_DEFINITION_DEPENDENCY_CYCLE": _cycle,
    "TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE": _duplicate_dependency,
    "TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS": _not_in_steps,
    "TUBELESS_DEFINITION_DEPENDENCY_SELF_REFERENCE": _self_reference,
    "TUBELESS_DEFINITION_FINALIZER_STEP_NOT_IN_STEPS": _finalizer_not_in_steps,
    "TUBELESS_DEFINITION_IMPLEMENTATION_VERSION_INVALID": lambda: _first_definition_error(
        steps=_only(), implementation_version="x" * 257
    ),
    "TUBELESS_DEFINITION_OPTIONS_SCHEMA_CONFLICT": _options_conflict,
    "TUBELESS_DEFINITION_PIPELINE_ID_BLANK": lambda: _first_definition_error(id=" ", steps=_only()),
    "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK": lambda: _first_definition_error(
        steps=_only(), name="  "
    ),
    "TUBELESS_DEFINITION_PIPELINE_DESCRIPTION_BLANK": lambda: _first_definition_error(
        steps=_only(), description="\t"
    ),
    "TUBELESS_DEFINITION_STEP_ID_BLANK": lambda: _first_definition_error(
        steps=[create_steps()(" ", run=_value(1))]
    ),
    "TUBELESS_DEFINITION_STEP_NAME_BLANK": lambda: _first_definition_error(
        steps=[create_steps()("named", name=" ", run=_value(1))]
    ),
    "TUBELESS_DEFINITION_STEP_ID_RESERVED": lambda: _first_definition_error(
        steps=[create_steps()("__finalize__", run=_value(1))]
    ),
    "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE": lambda: _first_definition_error(steps=_only() * 2),
    "TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH": _target_finalizer_mismatch,
    "TUBELESS_DEFINITION_TARGET_NOT_IN_STEPS": _target_not_in_steps,
    "TUBELESS_DEFINITION_TARGETS_DUPLICATE": _targets_duplicate,
    "TUBELESS_PLANNING_SELECTION_CONFLICT": lambda: _planned(
        {"step_ids": ["build"], "targets": ["write"]}
    ),
    "TUBELESS_PLANNING_STEP_SELECTION_DUPLICATE": lambda: _planned(
        {"step_ids": ["build", "build"]}
    ),
    "TUBELESS_PLANNING_STEP_SELECTION_EMPTY": lambda: _planned({"step_ids": []}),
    "TUBELESS_PLANNING_STEP_UNKNOWN": lambda: _planned({"step_ids": ["missing"]}),
    "TUBELESS_PLANNING_TARGET_SELECTION_DUPLICATE": lambda: _planned(
        {"targets": ["write", "write"]}
    ),
    "TUBELESS_PLANNING_TARGET_SELECTION_EMPTY": lambda: _planned({"targets": []}),
    "TUBELESS_PLANNING_TARGET_UNDECLARED": lambda: _planned({"targets": ["build"]}),
    "TUBELESS_PLANNING_TARGET_UNKNOWN": lambda: _planned({"targets": ["missing"]}),
    "TUBELESS_RUN_CONCURRENCY_INVALID": lambda: _planned({"max_concurrency": 0}),
    "TUBELESS_OPTIONS_VALIDATION_FAILED": _options_invalid,
    "TUBELESS_STEP_FAILED": _step_failed,
    "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED": _output_invalid,
    "TUBELESS_CHILD_FAILED": _child_failed,
    "TUBELESS_RUN_CANCELLED": _run_cancelled,
    "TUBELESS_FINALIZATION_FAILED": _finalization_failed,
    "TUBELESS_FINAL_RESULT_VALIDATION_FAILED": _final_result_invalid,
    "TUBELESS_FINALIZATION_CANCELLED": _finalization_cancelled,
}


def test_the_catalog_is_frozen_and_complete() -> None:
    """The catalog is an immutable tuple naming exactly the codes of the table."""
    assert isinstance(PIPELINE_ERROR_CODES, tuple)
    assert sorted(PIPELINE_ERROR_CODES) == sorted(EXPECTED)
    assert sorted(PRODUCERS) == sorted(EXPECTED)
    assert dict(ERROR_CODE_CLASSIFICATION) == EXPECTED
    with pytest.raises(TypeError):
        ERROR_CODE_CLASSIFICATION["TUBELESS_NEW"] = ("execution", "step")  # type: ignore[index]
    assert is_pipeline_error_code("TUBELESS_STEP_FAILED")
    assert not is_pipeline_error_code("TUBELESS_UNKNOWN")
    assert not is_pipeline_error_code(None)


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_each_code_has_its_phase_and_kind(code: str) -> None:
    """The real API reports the code with the phase and kind of the catalog table."""
    error = PRODUCERS[code]()

    assert error.code == code
    assert (error.phase, error.kind) == EXPECTED[code]


def test_definition_errors_list_every_problem() -> None:
    """`PipelineDefinitionError` carries every problem and renders them all in its message."""
    step = create_steps()
    blank = step(" ", run=_value(1))
    error: PipelineDefinitionError | None = None
    try:
        define_pipeline(id="bad", steps=[blank, blank], name=" ")
    except PipelineDefinitionError as caught:
        error = caught
    assert error is not None

    assert isinstance(error, TubelessError)
    assert error.pipeline_id == "bad"
    assert [problem.code for problem in error.errors] == [
        "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK",
        "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE",
        "TUBELESS_DEFINITION_STEP_ID_BLANK",
        "TUBELESS_DEFINITION_STEP_ID_BLANK",
    ]
    assert error.code == "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK"
    assert str(error) == "Invalid pipeline bad: " + "; ".join(
        format_diagnostic(problem) for problem in error.errors
    )
    assert str(PipelineDefinitionError("empty", [])) == "Invalid pipeline empty"


def test_execution_errors_carry_the_run_and_the_original_exception() -> None:
    """`run_or_raise` raises with the formatted first error and the original as `__cause__`."""
    original = PermissionError("denied")
    original.code = "EACCES"  # type: ignore[attr-defined]
    step = create_steps()
    pipeline = define_pipeline(
        id="boom",
        steps=[step("first", run=_raise(original)), step("second", run=_raise(ValueError("x")))],
    )

    with pytest.raises(PipelineExecutionError) as caught:
        pipeline.run_or_raise(controls={"continue_on_error": True})
    error = caught.value
    assert str(error) == (
        "Pipeline boom failed: execution at step first [TUBELESS_STEP_FAILED] (EACCES): denied"
    )
    assert error.__cause__ is original
    assert error.code == "TUBELESS_STEP_FAILED"
    assert len(error.result.errors) == 2
    assert str(PipelineExecutionError(error.result, "custom")) == "custom"


def test_cause_chains_are_normalised() -> None:
    """Each link keeps message, class name and string `code`; the chain is JSON-safe."""
    root = OSError("disk")
    root.code = "EIO"  # type: ignore[attr-defined]
    middle = RuntimeError("write failed")
    middle.__cause__ = root
    cause = normalize_cause(middle)

    assert cause == ErrorCause(
        message="write failed",
        name="RuntimeError",
        cause=ErrorCause(message="disk", name="OSError", source_code="EIO"),
    )
    assert json.loads(json.dumps(cause.to_dict())) == {
        "message": "write failed",
        "name": "RuntimeError",
        "cause": {"message": "disk", "name": "OSError", "sourceCode": "EIO"},
    }
    assert normalize_cause(42) == ErrorCause(message="42")


def test_cause_chains_stop_at_depth_eight() -> None:
    """Eight links are kept; the next reads "Cause chain truncated"."""
    errors = [ValueError(f"level {index}") for index in range(12)]
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    link: ErrorCause | None = normalize_cause(errors[0])
    messages = []
    while link is not None:
        messages.append(link.message)
        link = link.cause

    assert messages == [f"level {index}" for index in range(8)] + ["Cause chain truncated"]


def test_circular_causes_are_cut() -> None:
    """An exception met again in its own chain becomes "Circular cause"."""
    a, b = ValueError("a"), ValueError("b")
    a.__cause__ = b
    b.__cause__ = a

    assert normalize_cause(a).deepest() == ErrorCause(message="Circular cause")


def test_properties_that_raise_count_as_missing() -> None:
    """A raising `code` or `__str__` never breaks normalisation."""

    class AwkwardError(Exception):
        @property
        def code(self) -> str:
            raise RuntimeError("no code for you")

    class UnprintableError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("cannot print")

    assert normalize_cause(AwkwardError("odd")) == ErrorCause(message="odd", name="AwkwardError")
    assert normalize_cause(UnprintableError()).message == "Unknown raised value"
    step = create_steps()
    run = define_pipeline(id="odd", steps=[step("s", run=_raise(AwkwardError("odd")))]).run()
    assert (run.errors[0].message, run.errors[0].source_code) == ("odd", None)


def test_the_one_line_format() -> None:
    """`<phase>[ at step <id>] [<code>][ (<source>)]: <message>[; caused by[ <code>]: <msg>]`."""
    full = Diagnostic(
        code="TUBELESS_STEP_FAILED",
        kind="step",
        phase="execution",
        message="cannot read rows",
        step_id="load",
        source_code="ENOENT",
        cause=ErrorCause(
            message="wrapped", cause=ErrorCause(message="denied", source_code="EACCES")
        ),
    )
    bare = Diagnostic(
        code="TUBELESS_PLANNING_STEP_UNKNOWN",
        kind="selection",
        phase="planning",
        message="unknown",
        cause=ErrorCause(message="root"),
    )

    assert full.format() == (
        "execution at step load [TUBELESS_STEP_FAILED] (ENOENT): cannot read rows; "
        "caused by EACCES: denied"
    )
    assert format_diagnostic(bare) == (
        "planning [TUBELESS_PLANNING_STEP_UNKNOWN]: unknown; caused by: root"
    )


def test_pipeline_error_wire_form() -> None:
    """`to_dict()` uses camelCase keys and leaves absent fields out."""
    failure = FanOutFailure(
        index=2, key="k", key_truncated=False, cancelled=True, error=ErrorCause(message="stop")
    )
    error = Diagnostic(
        code="TUBELESS_CHILD_FAILED",
        kind="child",
        phase="execution",
        message="failed",
        step_id="fan",
        issues=(Issue("bad", ("rows", 0)), Issue("root")),
        fan_out=FanOutDiagnostics(failures=(failure,), failure_count=3, omitted_failure_count=2),
    )

    assert error.to_dict() == {
        "code": "TUBELESS_CHILD_FAILED",
        "kind": "child",
        "phase": "execution",
        "message": "failed",
        "stepId": "fan",
        "issues": [{"message": "bad", "path": ["rows", 0]}, {"message": "root"}],
        "fanOut": {
            "failures": [
                {
                    "index": 2,
                    "key": "k",
                    "keyTruncated": False,
                    "cancelled": True,
                    "error": {"message": "stop"},
                }
            ],
            "failureCount": 3,
            "omittedFailureCount": 2,
        },
    }
    assert Issue("bad", ("rows", 0)).render() == "rows.0: bad"


def test_schema_issues_accept_several_forms() -> None:
    """Issues may be given as `Issue`s, mappings or strings; none at all means one issue."""
    issues = SchemaIssues([Issue("a"), {"message": "b", "path": ["x", 1]}, "c"]).issues

    assert issues == (Issue("a"), Issue("b", ("x", 1)), Issue("c"))
    assert SchemaIssues([]).issues == (Issue("Invalid value"),)


def test_schema_issues_are_a_tubeless_error_and_a_value_error() -> None:
    """`SchemaIssues` carries a code under `TubelessError` and is still a `ValueError`."""
    error = SchemaIssues([{"message": "Expected text", "path": ["name"]}])

    assert isinstance(error, TubelessError)
    assert isinstance(error, ValueError)
    assert error.code == "TUBELESS_SCHEMA_ISSUES"
    assert error.message == str(error) == "name: Expected text"
    with pytest.raises(ValueError, match="Expected text"):
        raise error


def test_tool_errors_check_their_code_and_message() -> None:
    """A `ToolError` needs a non-blank code of at most 256 characters and a bounded message."""
    assert ToolError("NOT_FOUND", "no such page").code == "NOT_FOUND"
    for code, message in ((" ", "m"), ("x" * 257, "m"), ("C", "m" * 4097)):
        with pytest.raises(ValueError):
            ToolError(code, message)

"""The static graph: execution order and the eager definition checks of `define_pipeline`."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.errors import PipelineDefinitionError
from tubeless.pipeline import Step, create_steps, define_pipeline, require_outputs


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _rewire(step: Step, **fields: Any) -> None:
    """Point an existing step at other steps, as only a hand-built graph can (cycles)."""
    for name, value in fields.items():
        object.__setattr__(step, name, value)


def _definition_errors(**kwargs: Any) -> PipelineDefinitionError:
    with pytest.raises(PipelineDefinitionError) as caught:
        define_pipeline(**kwargs)
    return caught.value


def test_steps_run_after_their_prerequisites_with_ties_in_definition_order() -> None:
    """Execution order puts prerequisites first and keeps definition order among the rest."""
    step = create_steps()
    build = step("build", run=_value(1))
    write = step("write", depends_on=[build], run=_value(2))
    lint = step("lint", run=_value(3))
    gate = step("gate", run=_value(4))
    publish = step(
        "publish", optional_depends_on=[lint], skip_after_failure_of=[gate], run=_value(5)
    )
    pipeline = define_pipeline(id="order", steps=[write, publish, build, lint, gate])

    assert pipeline.step_ids == ("write", "publish", "build", "lint", "gate")
    assert [s.id for s in pipeline.plan().steps] == ["build", "write", "lint", "gate", "publish"]


def test_an_already_ordered_list_keeps_its_order() -> None:
    """A definition already in dependency order is executed in exactly that order."""
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", run=_value(2))
    c = step("c", depends_on=[a], run=_value(3))
    pipeline = define_pipeline(id="ordered", steps=[a, b, c])

    assert [s.id for s in pipeline.plan().steps] == ["a", "b", "c"]


def test_default_target_is_the_last_step_in_execution_order() -> None:
    """Without `targets` the last step in execution order is the one declared target."""
    step = create_steps()
    load = step("load", run=_value(1))
    publish = step("publish", depends_on=[load], run=_value(2))

    assert define_pipeline(id="defaults", steps=[publish, load]).target_ids == ("publish",)
    assert define_pipeline(id="none", steps=[publish, load], targets=[]).target_ids == ()


def test_every_definition_problem_is_listed_at_once() -> None:
    """One `PipelineDefinitionError` lists every problem, each with its code."""
    step = create_steps()
    outside = step("outside", run=_value(0))
    source = step("source", run=_value(1))
    twice = step("twice", depends_on=[source, source], run=_value(2))
    both = step("both", depends_on=[source], optional_depends_on=[source], run=_value(3))
    missing = step("missing", depends_on=[outside], run=_value(4))
    unnamed = step("unnamed", name="  ", run=_value(5))
    reserved = step("__finalize__", run=_value(6))
    blank = step(" ", run=_value(7))
    error = _definition_errors(
        id="broken",
        name=" ",
        description="",
        implementation_version="",
        steps=[source, twice, both, missing, unnamed, reserved, blank, source],
        targets=[twice, twice, outside],
        finalize=require_outputs([outside], lambda outputs, context: None),
    )

    assert error.pipeline_id == "broken"
    assert [problem.code for problem in error.errors] == [
        "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK",
        "TUBELESS_DEFINITION_PIPELINE_DESCRIPTION_BLANK",
        "TUBELESS_DEFINITION_IMPLEMENTATION_VERSION_INVALID",
        "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE",
        "TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE",
        "TUBELESS_DEFINITION_DEPENDENCY_CONTRADICTORY",
        "TUBELESS_DEFINITION_STEP_NAME_BLANK",
        "TUBELESS_DEFINITION_STEP_ID_RESERVED",
        "TUBELESS_DEFINITION_STEP_ID_BLANK",
        "TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS",
        "TUBELESS_DEFINITION_TARGETS_DUPLICATE",
        "TUBELESS_DEFINITION_TARGET_NOT_IN_STEPS",
        "TUBELESS_DEFINITION_FINALIZER_STEP_NOT_IN_STEPS",
    ]
    assert all(problem.phase == "definition" for problem in error.errors)
    assert error.code == "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK"
    for problem in error.errors:
        assert problem.format() in str(error)


def test_problem_messages_name_the_offending_steps() -> None:
    """Messages name duplicate ids, the missing edge and the repeated dependency field."""
    step = create_steps()
    outside = step("outside", run=_value(0))
    source = step("source", run=_value(1))
    twice = step("twice", skip_after_failure_of=[source, source], run=_value(2))
    missing = step("missing", optional_depends_on=[outside], run=_value(3))
    error = _definition_errors(id="named", steps=[source, twice, missing, twice])
    messages = {problem.code: problem for problem in error.errors}

    assert messages["TUBELESS_DEFINITION_STEP_IDS_DUPLICATE"].message == (
        "Pipeline named has duplicate step ids: twice"
    )
    repeated = messages["TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE"]
    assert repeated.message == "Pipeline named step twice repeats skip_after_failure_of: source"
    assert repeated.step_id == "twice"
    assert messages["TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS"].message == (
        "Pipeline named references step(s) not included in its steps list: missing -> outside"
    )


def test_a_cycle_is_a_definition_error() -> None:
    """Steps that depend on each other fail with `TUBELESS_DEFINITION_DEPENDENCY_CYCLE`."""
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", depends_on=[a], run=_value(2))
    _rewire(a, skip_after_failure_of=(b,))
    error = _definition_errors(id="cyclic", steps=[a, b])

    assert [problem.code for problem in error.errors] == ["TUBELESS_DEFINITION_DEPENDENCY_CYCLE"]
    assert error.errors[0].message == "Pipeline cyclic has a dependency cycle"


def test_a_step_cannot_depend_on_itself() -> None:
    """A self-reference is reported per dependency field, with the step id."""
    step = create_steps()
    loop = step("loop", run=_value(1))
    _rewire(loop, depends_on=(loop,))
    error = _definition_errors(id="self", steps=[loop])

    problem = error.errors[0]
    assert problem.code == "TUBELESS_DEFINITION_DEPENDENCY_SELF_REFERENCE"
    assert problem.step_id == "loop"
    assert problem.message == "Pipeline self step loop cannot reference itself in depends_on"


def test_targets_must_cover_the_finalizers_required_outputs() -> None:
    """Each target's closure must contain every step a `require_outputs` finalizer needs."""
    step = create_steps()
    load = step("load", run=_value(1))
    gate = step("gate", run=_value(2))
    normalize = step("normalize", depends_on=[load], skip_after_failure_of=[gate], run=_value(3))
    finalize = require_outputs([normalize, gate], lambda outputs, context: outputs)
    error = _definition_errors(
        id="mismatch", steps=[load, gate, normalize], targets=[load, normalize], finalize=finalize
    )

    assert [(p.code, p.step_id) for p in error.errors] == [
        ("TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH", "load")
    ]
    assert error.errors[0].message == (
        "Pipeline mismatch target load cannot satisfy required finalizer output(s): normalize, gate"
    )
    assert define_pipeline(
        id="fine", steps=[load, gate, normalize], targets=[normalize], finalize=finalize
    ).target_ids == ("normalize",)


def test_a_step_finalizer_counts_as_a_required_output() -> None:
    """`finalize=step` requires that step, so targets that cannot reach it are rejected."""
    step = create_steps()
    load = step("load", run=_value(1))
    other = step("other", run=_value(2))
    error = _definition_errors(id="finalize", steps=[load, other], targets=[other], finalize=load)

    assert error.errors[0].code == "TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH"


def test_steps_from_different_options_scopes_cannot_mix() -> None:
    """Steps of two `create_steps(schema)` calls conflict; schema-less scopes mix freely."""
    first = create_steps({"type": "object"})("first", run=_value(1))
    second = create_steps({"type": "object"})("second", run=_value(2))
    error = _definition_errors(id="mixed", steps=[first, second])

    assert [p.code for p in error.errors] == ["TUBELESS_DEFINITION_OPTIONS_SCHEMA_CONFLICT"]
    plain = create_steps()("plain", run=_value(3))
    other_plain = create_steps()("other", run=_value(4))
    assert define_pipeline(id="plain", steps=[plain, other_plain]).step_ids == ("plain", "other")


def test_wrong_argument_types_raise_type_error() -> None:
    """Arguments of the wrong type raise `TypeError`, not a definition error."""
    step = create_steps()
    ok = step("ok", run=_value(1))
    with pytest.raises(TypeError):
        step("bad", run="not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        step("bad", depends_on=["ok"], run=_value(1))  # type: ignore[list-item]
    with pytest.raises(TypeError):
        step("bad", dry_run="run", run=_value(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        define_pipeline(id="p", steps=ok)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        define_pipeline(id="p", steps=[ok], finalize=42)

"""Planning: selection reasons, plan-time dispositions and planning errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tubeless.pipeline import RunControls, SelectionReason, create_steps, define_pipeline


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _forbidden(*args: Any) -> Any:
    raise AssertionError("planning must not call user code")


def _reasons(plan: Any, step_id: str) -> list[dict[str, str]]:
    step = next(s for s in plan.steps if s.id == step_id)
    return [reason.to_dict() for reason in step.selection_reasons]


def _codes(plan: Any) -> list[str]:
    return [error.code for error in plan.errors]


@pytest.fixture
def publishing() -> Any:
    """load -> publish (required), hint -> publish (optional), validate gates publish."""
    step = create_steps()
    load = step("load", run=_forbidden)
    hint = step("hint", run=_forbidden)
    validate = step("validate", depends_on=[load], run=_forbidden)
    publish = step(
        "publish",
        depends_on=[load],
        optional_depends_on=[hint],
        skip_after_failure_of=[validate],
        dry_run="skip",
        skip=_forbidden,
        run=_forbidden,
    )
    unrelated = step("unrelated", run=_forbidden)
    return define_pipeline(
        id="publishing",
        steps=[load, hint, validate, publish, unrelated],
        targets=[publish, unrelated],
        finalize=_forbidden,
    )


def test_without_a_filter_every_step_is_selected_for_all(publishing: Any) -> None:
    """No selection control gives every step the single reason `all`."""
    plan = publishing.plan()

    assert plan.ok and plan.errors == ()
    assert [(s.id, s.selected, s.skip_reason) for s in plan.steps] == [
        ("load", True, None),
        ("hint", True, None),
        ("validate", True, None),
        ("publish", True, None),
        ("unrelated", True, None),
    ]
    assert all(_reasons(plan, s.id) == [{"kind": "all"}] for s in plan.steps)


def test_step_ids_are_an_exact_filter_without_prerequisites(publishing: Any) -> None:
    """`step_ids` selects exactly those steps; unselected prerequisites leave dependents unmet."""
    plan = publishing.plan({"step_ids": ["publish", "hint"]})

    assert [(s.id, s.selected, s.skip_reason) for s in plan.steps] == [
        ("load", False, "filtered"),
        ("hint", True, None),
        ("validate", False, "filtered"),
        ("publish", True, "unmet-dependency"),
        ("unrelated", False, "filtered"),
    ]
    assert _reasons(plan, "publish") == [{"kind": "exact"}]
    assert _reasons(plan, "load") == [{"kind": "not-selected"}]


def test_targets_select_their_closure_with_every_reason(publishing: Any) -> None:
    """Targets pull in required deps and gates; optional deps are named but not selected."""
    plan = publishing.plan({"targets": ["publish"]})

    assert [(s.id, s.selected, s.skip_reason) for s in plan.steps] == [
        ("load", True, None),
        ("hint", False, "filtered"),
        ("validate", True, None),
        ("publish", True, None),
        ("unrelated", False, "filtered"),
    ]
    assert _reasons(plan, "publish") == [{"kind": "target", "targetId": "publish"}]
    assert _reasons(plan, "validate") == [
        {"kind": "failure-gate", "dependentId": "publish", "targetId": "publish"}
    ]
    assert _reasons(plan, "hint") == [
        {"kind": "optional-only", "dependentId": "publish", "targetId": "publish"}
    ]
    assert _reasons(plan, "unrelated") == [{"kind": "outside-target-closure"}]


def test_a_shared_prerequisite_lists_every_path_depth_first(publishing: Any) -> None:
    """Each path that reaches a step is listed once, in depth-first walk order."""
    plan = publishing.plan({"targets": ["publish", "unrelated"]})

    assert _reasons(plan, "load") == [
        {"kind": "required-dependency", "dependentId": "publish", "targetId": "publish"},
        {"kind": "required-dependency", "dependentId": "validate", "targetId": "publish"},
    ]
    assert _reasons(plan, "unrelated") == [{"kind": "target", "targetId": "unrelated"}]


def test_depth_first_order_follows_a_dependency_before_the_next_one() -> None:
    """A prerequisite reached through an earlier dependency lists that path first."""
    step = create_steps()
    base = step("base", run=_forbidden)
    middle = step("middle", depends_on=[base], run=_forbidden)
    top = step("top", depends_on=[middle, base], run=_forbidden)
    pipeline = define_pipeline(id="paths", steps=[base, middle, top])

    assert _reasons(pipeline.plan({"targets": ["top"]}), "base") == [
        {"kind": "required-dependency", "dependentId": "middle", "targetId": "top"},
        {"kind": "required-dependency", "dependentId": "top", "targetId": "top"},
    ]


def test_a_selected_step_keeps_only_its_selecting_reasons() -> None:
    """A step that is optional for one target and required by another keeps only `required`."""
    step = create_steps()
    shared = step("shared", run=_forbidden)
    reader = step("reader", optional_depends_on=[shared], run=_forbidden)
    writer = step("writer", depends_on=[shared], run=_forbidden)
    pipeline = define_pipeline(id="mixed", steps=[shared, reader, writer], targets=[reader, writer])

    assert _reasons(pipeline.plan({"targets": ["reader", "writer"]}), "shared") == [
        {"kind": "required-dependency", "dependentId": "writer", "targetId": "writer"}
    ]


def test_dry_run_plans_show_skips_and_unmet_dependents() -> None:
    """`dry_run` marks `"skip"` steps `dry-run` and their required dependents `unmet-dependency`."""
    step = create_steps()
    write = step("write", dry_run="skip", run=_forbidden)
    preview = step("preview", dry_run=_forbidden, run=_forbidden)
    after = step("after", depends_on=[write], run=_forbidden)
    reader = step("reader", optional_depends_on=[write], run=_forbidden)
    pipeline = define_pipeline(id="dry", steps=[write, preview, after, reader])
    plan = pipeline.plan({"dry_run": True})

    assert plan.dry_run is True
    assert [(s.id, s.dry_run, s.skip_reason) for s in plan.steps] == [
        ("write", "skip", "dry-run"),
        ("preview", "custom", None),
        ("after", "run", "unmet-dependency"),
        ("reader", "run", None),
    ]
    assert [s.skip_reason for s in pipeline.plan().steps] == [None, None, None, None]


def test_plan_to_dict_is_the_wire_form(publishing: Any) -> None:
    """`to_dict()` gives camelCase keys and leaves absent fields out."""
    data = publishing.plan({"targets": ["publish"], "dry_run": True}).to_dict()

    assert data["pipelineId"] == "publishing"
    assert data["dryRun"] is True
    assert data["ok"] is True
    assert data["errors"] == []
    assert data["steps"][3] == {
        "id": "publish",
        "dependencies": ["load"],
        "optionalDependencies": ["hint"],
        "skipAfterFailureOf": ["validate"],
        "dryRun": "skip",
        "runtimeSkipPossible": True,
        "selected": True,
        "selectionReasons": [{"kind": "target", "targetId": "publish"}],
        "skipReason": "dry-run",
    }
    assert "skipReason" not in data["steps"][0]


def test_every_planning_error_is_collected(publishing: Any) -> None:
    """Bad controls give `ok=False`, no steps, and every error at once."""
    plan = publishing.plan(
        {
            "step_ids": ["load", "load", "lod"],
            "targets": ["publish", "publish", "nope", "load"],
            "max_concurrency": 0,
        }
    )

    assert plan.ok is False
    assert plan.steps == ()
    assert _codes(plan) == [
        "TUBELESS_RUN_CONCURRENCY_INVALID",
        "TUBELESS_PLANNING_SELECTION_CONFLICT",
        "TUBELESS_PLANNING_STEP_SELECTION_DUPLICATE",
        "TUBELESS_PLANNING_STEP_UNKNOWN",
        "TUBELESS_PLANNING_TARGET_SELECTION_DUPLICATE",
        "TUBELESS_PLANNING_TARGET_UNKNOWN",
        "TUBELESS_PLANNING_TARGET_UNDECLARED",
    ]
    assert all(error.phase == "planning" for error in plan.errors)
    assert plan.errors[0].kind == "validation"
    assert {error.kind for error in plan.errors[1:]} == {"selection"}


def test_empty_selections_are_errors(publishing: Any) -> None:
    """`step_ids=[]` and `targets=[]` are planning errors, not "select nothing"."""
    assert _codes(publishing.plan({"step_ids": []})) == ["TUBELESS_PLANNING_STEP_SELECTION_EMPTY"]
    assert _codes(publishing.plan({"targets": []})) == ["TUBELESS_PLANNING_TARGET_SELECTION_EMPTY"]
    assert publishing.plan({"targets": []}).errors[0].message == (
        "Pipeline publishing received an empty targets list; omit targets to run every step, "
        "or pass at least one target step id"
    )


def test_unknown_ids_get_a_near_miss_suggestion(publishing: Any) -> None:
    """An unknown id close to a known one is answered with a suggestion."""
    assert publishing.plan({"step_ids": ["publsh"]}).errors[0].message == (
        'Pipeline publishing requested unknown step ids: publsh. Did you mean "publish"?'
    )
    assert publishing.plan({"step_ids": ["deploy"]}).errors[0].message == (
        "Pipeline publishing requested unknown step ids: deploy"
    )
    undeclared = publishing.plan({"targets": ["load"]}).errors[0]
    assert undeclared.code == "TUBELESS_PLANNING_TARGET_UNDECLARED"
    assert undeclared.message == "Pipeline publishing requested undeclared targets: load"


@pytest.mark.parametrize("bad", [0, -1, 1.5, math.nan, math.inf, True, "2", 2**53])
def test_max_concurrency_must_be_a_safe_positive_integer(publishing: Any, bad: object) -> None:
    """Anything but an integer in 1..2**53-1 is `TUBELESS_RUN_CONCURRENCY_INVALID`."""
    plan = publishing.plan({"max_concurrency": bad})

    assert _codes(plan) == ["TUBELESS_RUN_CONCURRENCY_INVALID"]
    assert plan.errors[0].message.startswith(
        "Pipeline publishing max_concurrency must be a positive integer, got "
    )


def test_malformed_controls_raise_type_error(publishing: Any) -> None:
    """Unknown keys and values of the wrong type raise `TypeError` at once."""
    with pytest.raises(TypeError, match="Unknown run controls: stepIds"):
        publishing.plan({"stepIds": ["load"]})
    with pytest.raises(TypeError, match="dry_run must be a bool"):
        publishing.plan({"dry_run": "yes"})
    with pytest.raises(TypeError, match="step_ids must be a list of strings"):
        publishing.plan({"step_ids": "load"})
    with pytest.raises(TypeError, match="targets must contain strings"):
        publishing.plan({"targets": [1]})
    with pytest.raises(TypeError):
        publishing.plan(["load"])


def test_run_controls_objects_plan_like_dicts(publishing: Any) -> None:
    """A `RunControls` gives the same plan as the equivalent dict, and plans are reused."""
    by_object = publishing.plan(RunControls(targets=["publish"], dry_run=True))
    by_dict = publishing.plan({"targets": ("publish",), "dry_run": True})

    assert by_object == by_dict
    assert publishing.plan({"targets": ["publish"], "dry_run": True}) is by_dict


def test_selection_reason_selects() -> None:
    """Only `not-selected`, `optional-only` and `outside-target-closure` do not select."""
    selecting = ["all", "exact", "target", "required-dependency", "failure-gate"]
    assert all(SelectionReason(kind).selects for kind in selecting)
    assert not any(
        SelectionReason(kind).selects
        for kind in ("not-selected", "optional-only", "outside-target-closure")
    )


def test_a_rejected_concurrency_never_leaks_into_other_plans(publishing: Any) -> None:
    """`True` and `1.0` equal `1` in Python, yet plans for them stay apart from the default."""
    assert publishing.plan({"max_concurrency": True}).ok is False
    assert publishing.plan({"max_concurrency": 1.0}).ok is False
    assert publishing.plan().ok is True
    assert publishing.plan({"max_concurrency": 1}).ok is True
    assert publishing.plan({"max_concurrency": True}).ok is False


def test_long_chains_plan_without_recursion_limits() -> None:
    """A target at the end of a 3000-step chain selects every step."""
    step = create_steps()
    steps: list[Any] = []
    for index in range(3000):
        steps.append(step(f"s{index}", depends_on=steps[-1:], run=_forbidden))
    pipeline = define_pipeline(id="chain", steps=steps)
    plan = pipeline.plan({"targets": ["s2999"]})

    assert plan.ok and all(s.selected for s in plan.steps)
    assert _reasons(plan, "s0") == [
        {"kind": "required-dependency", "dependentId": "s1", "targetId": "s2999"}
    ]

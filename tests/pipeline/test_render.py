"""Text renderings: the human plan and the Mermaid flowchart, in the reference's exact format."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.pipeline import create_steps, define_pipeline, escape_mermaid_label, render_plan


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _forbidden(*args: Any) -> Any:
    raise AssertionError("rendering must not call user code")


@pytest.fixture
def fixture_pipeline() -> Any:
    """The reference's planning fixture: load -> publish, hint optional for publish."""
    step = create_steps()
    load = step("load", run=_forbidden)
    hint = step("hint", run=_forbidden)
    publish = step("publish", depends_on=[load], optional_depends_on=[hint], run=_forbidden)
    return define_pipeline(id="planning-fixture", steps=[load, hint, publish])


def test_plan_text_explains_target_selection(fixture_pipeline: Any) -> None:
    """With explain on, each line carries its disposition and selection reasons."""
    plan = fixture_pipeline.plan({"targets": ["publish"]})

    assert render_plan(plan) == "\n".join(
        [
            "Pipeline planning-fixture: plan (ok=true, dryRun=false, steps=3)",
            "  - load: run (required by publish for target publish)",
            "  - hint: skip: filtered (optional-only input to publish for target publish)",
            "  - publish: run (target publish)",
        ]
    )
    assert plan.render() == render_plan(plan)


def test_plan_text_without_explanations(fixture_pipeline: Any) -> None:
    """With explain off, lines keep only the disposition."""
    plan = fixture_pipeline.plan({"targets": ["publish"]})

    assert render_plan(plan, explain=False) == "\n".join(
        [
            "Pipeline planning-fixture: plan (ok=true, dryRun=false, steps=3)",
            "  - load: run",
            "  - hint: skip: filtered",
            "  - publish: run",
        ]
    )


def test_plan_text_all_selection_renders_no_annotation(fixture_pipeline: Any) -> None:
    """The `all` reason adds nothing, so an unfiltered plan shows bare dispositions."""
    assert render_plan(fixture_pipeline.plan({"dry_run": True})) == "\n".join(
        [
            "Pipeline planning-fixture: plan (ok=true, dryRun=true, steps=3)",
            "  - load: run",
            "  - hint: run",
            "  - publish: run",
        ]
    )


def test_plan_text_names_descriptions_and_policy_annotations() -> None:
    """Names show as `Name [id]`, descriptions after ` - `, and "policy may skip" comes first."""
    step = create_steps()
    load = step("load", name="Load Rows", description="Read source rows.", run=_forbidden)
    cache = step("cache", skip=_forbidden, run=_forbidden)
    gate = step("gate", skip=_forbidden, run=_forbidden)
    write = step(
        "write",
        depends_on=[load, cache],
        skip_after_failure_of=[gate],
        dry_run="skip",
        skip=_forbidden,
        run=_forbidden,
    )
    pipeline = define_pipeline(id="fixture", steps=[load, cache, gate, write])

    assert render_plan(pipeline.plan({"targets": ["write"], "dry_run": True})) == "\n".join(
        [
            "Pipeline fixture: plan (ok=true, dryRun=true, steps=4)",
            "  - Load Rows [load]: run (required by write for target write) - Read source rows.",
            "  - cache: run (policy may skip; required by write for target write)",
            "  - gate: run (policy may skip; failure gate for write for target write)",
            "  - write: skip: dry-run (target write)",
        ]
    )
    assert render_plan(pipeline.plan({"step_ids": ["load", "cache"]})) == "\n".join(
        [
            "Pipeline fixture: plan (ok=true, dryRun=false, steps=4)",
            "  - Load Rows [load]: run (exact selection) - Read source rows.",
            "  - cache: run (policy may skip; exact selection)",
            "  - gate: skip: filtered (not selected)",
            "  - write: skip: filtered (not selected)",
        ]
    )
    assert render_plan(pipeline.plan(), explain=False).splitlines()[1] == (
        "  - Load Rows [load]: run - Read source rows."
    )


def test_plan_text_outside_target_closure() -> None:
    """A step no target reaches renders `outside target closure`."""
    step = create_steps()
    a = step("a", run=_forbidden)
    b = step("b", run=_forbidden)
    pipeline = define_pipeline(id="two", steps=[a, b], targets=[a, b])

    assert render_plan(pipeline.plan({"targets": ["a"]})).splitlines()[2] == (
        "  - b: skip: filtered (outside target closure)"
    )


def test_plan_text_nested_pipelines() -> None:
    """Wrapper steps show their child pipeline, fan-out or bounded iteration."""
    inner = create_steps()
    first = inner("first", run=_forbidden)
    second = inner("second", depends_on=[first], run=_forbidden)
    child = define_pipeline(id="child", steps=[first, second])
    outer = create_steps()
    single = outer.from_pipeline("single", pipeline=child, description="Run it once.")
    fan = outer.for_each_pipeline(
        "fan", pipeline=child, items=_forbidden, key=_forbidden, concurrency=2, name="Fan Out"
    )
    repeat = outer.iterate_pipeline(
        "repeat",
        pipeline=child,
        max_iterations=5,
        initial_state=_forbidden,
        transition=_forbidden,
    )
    pipeline = define_pipeline(id="parent", steps=[single, fan, repeat])

    assert render_plan(pipeline.plan()) == "\n".join(
        [
            "Pipeline parent: plan (ok=true, dryRun=false, steps=3)",
            "  - single: run -> child pipeline child (2 declared steps) - Run it once.",
            "  - Fan Out [fan]: run -> fan-out pipeline child (2 declared steps)",
            "  - repeat: run -> iteration (at most 5) pipeline child (2 declared steps)",
        ]
    )


def test_plan_text_lists_errors(fixture_pipeline: Any) -> None:
    """A rejected plan renders its header with no steps and one `  ! ` line per error."""
    plan = fixture_pipeline.plan({"step_ids": ["hint"], "targets": [], "max_concurrency": 0})

    assert render_plan(plan) == "\n".join(
        [
            "Pipeline planning-fixture: plan (ok=false, dryRun=false, steps=0)",
            "  ! planning [TUBELESS_RUN_CONCURRENCY_INVALID]: Pipeline planning-fixture "
            "max_concurrency must be a positive integer, got 0",
            "  ! planning [TUBELESS_PLANNING_SELECTION_CONFLICT]: Pipeline planning-fixture "
            "cannot combine exact step_ids filtering with dependency-aware targets",
            "  ! planning [TUBELESS_PLANNING_TARGET_SELECTION_EMPTY]: Pipeline planning-fixture "
            "received an empty targets list; omit targets to run every step, or pass at least "
            "one target step id",
        ]
    )


def test_mermaid_renders_every_edge_kind_with_escaped_labels() -> None:
    """Labels are escaped, descriptions joined by an em dash, and each edge kind drawn."""
    step = create_steps()
    source = step(
        "source",
        name='Load "Rows" #1 & <raw>',
        description="Read safely.\nNo mutation.",
        run=_forbidden,
    )
    hint = step("hint", run=_forbidden)
    validate = step("validate", run=_forbidden)
    gate = step("gate", description="Checks rules.", run=_forbidden)
    publish = step(
        "publish",
        depends_on=[source],
        optional_depends_on=[hint, validate],
        skip_after_failure_of=[validate, gate],
        run=_forbidden,
    )
    pipeline = define_pipeline(id="diagrammed", steps=[source, hint, validate, gate, publish])

    assert pipeline.to_mermaid(direction="LR", include_descriptions=True) == "\n".join(
        [
            "flowchart LR",
            '  step0["Load #quot;Rows#quot; #35;1 #38; #60;raw#62; — Read safely. No mutation."]',
            '  step1["hint"]',
            '  step2["validate"]',
            '  step3["gate — Checks rules."]',
            '  step4["publish"]',
            "",
            "  step0 --> step4",
            "  step1 -. optional input .-> step4",
            "  step2 -. optional input + failure gate .-> step4",
            "  step3 -. failure gate .-> step4",
            "",
        ]
    )


def test_mermaid_defaults_to_top_down_labels_without_descriptions() -> None:
    """The default is `TD` with display names only, and no blank line when there are no edges."""
    step = create_steps()
    normalize = step(
        "normalize-data", name="Normalize Data", description="Not shown.", run=_forbidden
    )
    pipeline = define_pipeline(id="defaults", steps=[normalize])

    assert pipeline.to_mermaid() == 'flowchart TD\n  step0["Normalize Data"]\n'


def test_mermaid_uses_definition_order_for_node_ids() -> None:
    """Node ids follow definition order even when execution order differs."""
    step = create_steps()
    load = step("load", run=_forbidden)
    publish = step("publish", depends_on=[load], run=_forbidden)
    pipeline = define_pipeline(id="order", steps=[publish, load])

    assert pipeline.to_mermaid(direction="BT") == "\n".join(
        ["flowchart BT", '  step0["publish"]', '  step1["load"]', "", "  step1 --> step0", ""]
    )


def test_mermaid_rejects_unknown_directions(fixture_pipeline: Any) -> None:
    """Only BT, LR, RL, TB and TD are accepted."""
    for direction in ("BT", "LR", "RL", "TB", "TD"):
        assert fixture_pipeline.to_mermaid(direction=direction).startswith(f"flowchart {direction}")
    with pytest.raises(ValueError, match="Invalid Mermaid flowchart direction: sideways"):
        fixture_pipeline.to_mermaid(direction="sideways")


def test_mermaid_label_escaping_replaces_control_characters() -> None:
    """Newlines and control characters become spaces; Mermaid syntax characters are entities."""
    assert escape_mermaid_label("a\r\nb\rc\nd\te\x7ff\x85g") == "a b c d e f g"
    assert escape_mermaid_label('#&"<>') == "#35;#38;#quot;#60;#62;"


def test_mermaid_marks_bounded_iterations() -> None:
    """An iteration wrapper's node label ends with its bound, after any description."""
    inner = create_steps()
    child = define_pipeline(id="child", steps=[inner("work", run=_forbidden)])
    repeat = create_steps().iterate_pipeline(
        "repeat",
        pipeline=child,
        max_iterations=3,
        initial_state=_forbidden,
        transition=_forbidden,
        description="Ask <again>.",
    )
    pipeline = define_pipeline(id="loop", steps=[repeat])

    assert pipeline.to_mermaid() == 'flowchart TD\n  step0["repeat (at most 3 iterations)"]\n'
    assert pipeline.to_mermaid(include_descriptions=True) == (
        'flowchart TD\n  step0["repeat — Ask #60;again#62;. (at most 3 iterations)"]\n'
    )

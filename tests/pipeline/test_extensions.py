"""Run extensions: the one typed slot a layer above the core owns in a run and its children."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.pipeline import RunContext, RunControls, create_steps, define_pipeline, lowlevel

SHARED: lowlevel.RunExtension[str] = lowlevel.RunExtension("shared", inherited=True)
OWN: lowlevel.RunExtension[str] = lowlevel.RunExtension("own")


def _checked(value: object) -> None:
    if not isinstance(value, int):
        raise TypeError("context counted must be an int")


COUNTED: lowlevel.RunExtension[int] = lowlevel.RunExtension("counted", check=_checked)


def _seen_by(seen: list[tuple[Any, Any]]) -> Any:
    def look(inputs: Any, context: Any) -> str:
        seen.append((lowlevel.extension_of(context, SHARED), lowlevel.extension_of(context, OWN)))
        return "ok"

    return look


def test_a_root_run_carries_its_context_extensions_and_children_inherit_some() -> None:
    """The root sees every value; a `from_pipeline` child sees only the inherited key's."""
    seen: list[tuple[Any, Any]] = []
    step = create_steps()
    child = define_pipeline(id="child", steps=[step("look", run=_seen_by(seen))])
    outer = create_steps()
    root_look = outer.step("look", run=_seen_by(seen))
    nested = outer.from_pipeline("nested", pipeline=child, depends_on=[root_look])
    pipeline = define_pipeline(id="parent", steps=[root_look, nested])

    run = pipeline.run(context={"extensions": {SHARED: "tree", OWN: "root"}})

    assert run.status == "completed"
    assert seen == [("tree", "root"), ("tree", None)]


def test_a_step_hands_values_to_one_child_run_alone() -> None:
    """`run_child_pipeline(..., extensions=)` reaches that child and no later sibling."""
    seen: list[tuple[Any, Any]] = []
    step = create_steps()
    child = define_pipeline(id="child", steps=[step("look", run=_seen_by(seen))])

    def start_two(inputs: Any, context: Any) -> None:
        for extensions in ({OWN: "first"}, None):
            lowlevel.run_child_pipeline(
                context, child, None, controls=RunControls(), extensions=extensions
            )

    pipeline = define_pipeline(id="parent", steps=[create_steps()("start", run=start_two)])

    assert pipeline.run().status == "completed"
    assert seen == [(None, "first"), (None, None)]


def test_set_extension_reaches_children_started_later() -> None:
    """A value a step sets for an inherited key is carried by the children it starts next."""
    seen: list[tuple[Any, Any]] = []
    step = create_steps()
    child = define_pipeline(id="child", steps=[step("look", run=_seen_by(seen))])

    def start(inputs: Any, context: Any) -> None:
        lowlevel.set_extension(context, SHARED, "set")
        lowlevel.run_child_pipeline(context, child, None, controls=RunControls())

    pipeline = define_pipeline(id="parent", steps=[create_steps()("start", run=start)])

    assert pipeline.run().status == "completed"
    assert seen == [("set", None)]


@pytest.mark.parametrize(
    ("extensions", "message"),
    [
        ([("not", "a mapping")], "mapping of RunExtension"),
        ({"shared": "a string key"}, "keyed by RunExtension"),
        ({COUNTED: "three"}, "counted must be an int"),
    ],
)
def test_bad_extensions_are_rejected_before_the_run(extensions: Any, message: str) -> None:
    """A context's extensions must be keyed by `RunExtension` and pass the key's check."""
    pipeline = define_pipeline(id="p", steps=[create_steps()("s", run=lambda i, c: 1)])
    with pytest.raises(TypeError, match=message):
        pipeline.run(context=RunContext(extensions=extensions))


def test_only_real_context_fields_can_be_bound_and_only_once() -> None:
    """`bind_context_field` refuses unknown fields and a second key for a bound field."""
    with pytest.raises(ValueError, match="not a RunContext field"):
        lowlevel.bind_context_field("nothing", OWN)
    with pytest.raises(ValueError, match="already bound"):
        lowlevel.bind_context_field("approvals", OWN)


def test_bound_context_fields_keep_their_checks() -> None:
    """The agent layer's fields are checked as before: a blank execution key is a TypeError."""
    pipeline = define_pipeline(id="p", steps=[create_steps()("s", run=lambda i, c: 1)])
    with pytest.raises(TypeError, match="execution_key must be a non-blank string"):
        pipeline.run(context={"execution_key": " "})
    with pytest.raises(TypeError, match="approvals must be a mapping"):
        pipeline.run(context={"approvals": ["a"]})
    with pytest.raises(TypeError, match=r"cassette must be a tubeless\.testing\.Cassette"):
        pipeline.run(context={"cassette": object()})

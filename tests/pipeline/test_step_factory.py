"""`create_steps`: the step options every factory shares, and how a stray keyword fails."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.pipeline import Step, StepFactory, StepOptions, create_steps, define_pipeline


def _child() -> Any:
    step = create_steps()
    return define_pipeline(id="child", steps=[step("leaf", run=lambda inputs, context: 1)])


def _factories(step: StepFactory) -> dict[str, Any]:
    """Each factory method with the arguments of its own it requires."""
    child = _child()
    return {
        "step": lambda **kw: step.step("made", run=lambda inputs, context: 1, **kw),
        "from_pipeline": lambda **kw: step.from_pipeline("made", pipeline=child, **kw),
        "for_each_pipeline": lambda **kw: step.for_each_pipeline(
            "made", pipeline=child, items=lambda i, c: [], key=lambda item, index: "k", **kw
        ),
        "iterate_pipeline": lambda **kw: step.iterate_pipeline(
            "made",
            pipeline=child,
            max_iterations=2,
            initial_state=lambda i, c: {},
            transition=lambda value, state, c: {"kind": "finish", "result": value},
            **kw,
        ),
    }


@pytest.mark.parametrize(
    "method", ["step", "from_pipeline", "for_each_pipeline", "iterate_pipeline"]
)
def test_every_factory_forwards_the_step_options(method: str) -> None:
    """Each factory puts every `StepOptions` key on the step it makes."""
    step = create_steps()
    first = step("first", run=lambda inputs, context: 1)
    second = step("second", run=lambda inputs, context: 2)
    gate = step("gate", run=lambda inputs, context: 3)

    def never(inputs: Any, context: Any) -> bool:
        return False

    options: StepOptions = {
        "name": "Made",
        "description": "What it does",
        "depends_on": [first],
        "optional_depends_on": [second],
        "skip_after_failure_of": [gate],
        "skip": never,
    }
    made = _factories(step)[method](**options)

    assert isinstance(made, Step)
    assert (made.name, made.description) == ("Made", "What it does")
    assert made.depends_on == (first,)
    assert made.optional_depends_on == (second,)
    assert made.skip_after_failure_of == (gate,)
    assert made.skip is never
    assert (made.nested is None) == (method == "step")


@pytest.mark.parametrize(
    "method", ["step", "from_pipeline", "for_each_pipeline", "iterate_pipeline"]
)
def test_a_stray_keyword_fails_as_python_would(method: str) -> None:
    """An unknown keyword raises Python's own `TypeError` message, before any other check."""

    def reference(*, name: object = None) -> None:
        """A function without `depend_on`: what Python says for the same mistake."""

    reference.__qualname__ = f"StepFactory.{method}"
    with pytest.raises(TypeError) as expected:
        reference(depend_on=[])  # type: ignore[call-arg]
    with pytest.raises(TypeError) as raised:
        _factories(create_steps())[method](depend_on=[], name=42)
    assert str(raised.value) == str(expected.value)
    assert str(raised.value) == (
        f"StepFactory.{method}() got an unexpected keyword argument 'depend_on'"
    )


def test_calling_the_factory_is_its_step_method() -> None:
    """`step(...)` and `step.step(...)` check the same options with the same words."""
    step = create_steps()
    with pytest.raises(TypeError, match=r"StepFactory\.step\(\) got an unexpected keyword"):
        step("a", run=lambda inputs, context: 1, title="A")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="name must be a string"):
        step("a", run=lambda inputs, context: 1, name=42)  # type: ignore[typeddict-item]

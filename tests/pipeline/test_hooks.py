"""Hooks: the `PipelineHooks` protocol and the hook sets a run accepts."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.pipeline import HOOK_NAMES, PipelineHooks, create_steps, define_pipeline
from tubeless.pipeline._hooks import normalize_hooks


def _pipeline() -> Any:
    step = create_steps()
    load = step("load", run=lambda inputs, context: 1)
    fail = step("fail", run=lambda inputs, context: 1 / 0, depends_on=[load])
    return define_pipeline(id="hooked", steps=[load, fail])


def test_hook_names_are_the_protocols_methods_in_order() -> None:
    """`HOOK_NAMES` lists exactly the hooks `PipelineHooks` declares, in declaration order."""
    declared = [name for name in vars(PipelineHooks) if name.startswith("on_")]

    assert tuple(declared) == HOOK_NAMES


def test_a_subclass_gets_only_the_hooks_it_overrides() -> None:
    """Hooks a `PipelineHooks` subclass inherits are not called; its overrides are."""

    class Failures(PipelineHooks):
        def __init__(self) -> None:
            self.failed: list[str] = []

        def on_step_fail(self, record: dict[str, Any]) -> None:
            self.failed.append(record["stepId"])

    hooks = Failures()
    (hook_set,) = normalize_hooks(hooks)
    run = _pipeline().run(context={"hooks": hooks})

    assert list(hook_set) == ["on_step_fail"]
    assert run.status == "failed"
    assert hooks.failed == ["fail"]


def test_a_subclass_with_no_overrides_adds_no_hook_set() -> None:
    """A bare `PipelineHooks()` subclass instance contributes nothing to call."""

    class Nothing(PipelineHooks):
        pass

    assert normalize_hooks(Nothing()) == ()
    assert normalize_hooks([Nothing(), {"on_record": print}]) == ({"on_record": print},)


def test_plain_objects_and_mappings_still_work() -> None:
    """Any object with `on_*` methods, a mapping and a list of them are hook sets too."""

    class Plain:
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_pipeline_complete(self, record: dict[str, Any]) -> None:
            self.names.append(record["name"])

    plain = Plain()
    seen: list[str] = []
    _pipeline().run(
        context={"hooks": [plain, {"on_step_plan": lambda r: seen.append(r["stepId"])}]}
    )

    assert plain.names == ["pipeline.completed"]
    assert seen == ["load", "fail"]


def test_an_overridden_hook_that_is_not_callable_is_rejected() -> None:
    """A subclass that sets a hook to a non-callable fails with `TypeError` naming it."""

    class Broken(PipelineHooks):
        on_log = "print"  # type: ignore[assignment]

    with pytest.raises(TypeError, match="Hook on_log must be callable"):
        normalize_hooks(Broken())

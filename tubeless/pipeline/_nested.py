"""Child-pipeline steps: `from_pipeline`, `for_each_pipeline` and `iterate_pipeline`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless.pipeline._controls import controls_to_dict, resolve_controls

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline
    from tubeless.pipeline._steps import SkipPredicate, Step, StepFactory

NestedMode = Literal["single", "for-each", "iterate"]


@dataclasses.dataclass(frozen=True, slots=True)
class NestedPipeline:
    """What a wrapper step runs: shown in plans, hashed into definition identity."""

    mode: NestedMode
    """`single`, `for-each` or `iterate`."""
    pipeline: Pipeline
    """The child pipeline."""
    concurrency: int | Literal["dynamic"] | None = None
    """For `for-each`: the static bound on concurrent children, or `dynamic`."""
    max_iterations: int | None = None
    """For `iterate`: the bound on iterations."""
    controls: Mapping[str, Any] | None = None
    """For `iterate`: static child controls in wire form."""

    def to_dict(self, *, with_identity: bool = True) -> dict[str, Any]:
        """Return the plan/snapshot form `{mode, pipelineId, stepIds, identity?, ...}`."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "pipelineId": self.pipeline.id,
            "stepIds": list(self.pipeline.step_ids),
        }
        if with_identity:
            out["identity"] = self.pipeline.definition.identity.to_dict()
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.max_iterations is not None:
            out["maxIterations"] = self.max_iterations
        if self.controls is not None:
            out["controls"] = dict(self.controls)
        return out


def _check_pipeline(pipeline: object, step_id: str) -> Pipeline:
    from tubeless.pipeline._define import Pipeline

    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"Step {step_id!r} requires a pipeline made by define_pipeline")
    return pipeline


def _check_callable(value: object, field: str, step_id: str, *, required: bool) -> None:
    if value is None and not required:
        return
    if not callable(value):
        raise TypeError(f"Step {step_id!r} requires a callable {field}")


def _check_wrapper_dry_run(dry_run: object, step_id: str) -> Literal["skip"] | None:
    if dry_run is None or dry_run == "skip":
        return dry_run
    raise TypeError(f"Step {step_id!r} wraps a child pipeline: dry_run may only be 'skip'")


def _check_controls(controls: Any, step_id: str) -> None:
    if controls is None or callable(controls):
        return
    try:
        resolve_controls(controls)
    except TypeError as error:
        raise TypeError(f"Step {step_id!r} controls: {error}") from None


def _step_fields(
    name: str | None,
    description: str | None,
    depends_on: Sequence[Step] | None,
    optional_depends_on: Sequence[Step] | None,
    skip_after_failure_of: Sequence[Step] | None,
    skip: SkipPredicate | None,
    dry_run: Literal["skip"] | None,
) -> dict[str, Any]:
    """The ordinary step fields every child-pipeline wrapper accepts."""
    return {
        "name": name,
        "description": description,
        "depends_on": depends_on,
        "optional_depends_on": optional_depends_on,
        "skip_after_failure_of": skip_after_failure_of,
        "skip": skip,
        "dry_run": dry_run,
    }


def _wrapper(
    factory: StepFactory,
    step_id: str,
    run: Callable[..., Any],
    nested: NestedPipeline,
    common: dict[str, Any],
) -> Step:
    dry_run = _check_wrapper_dry_run(common.pop("dry_run", None), step_id)
    step = factory.step(step_id, run=run, dry_run=dry_run, **common)
    return dataclasses.replace(step, nested=nested)


def build_from_pipeline(
    factory: StepFactory,
    id: str,
    *,
    pipeline: Pipeline,
    map_options: Callable[[Mapping[str, Any], Any], Any] | None = None,
    controls: Any = None,
    map_result: Callable[[Any, Any, Any], Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    depends_on: Sequence[Step] | None = None,
    optional_depends_on: Sequence[Step] | None = None,
    skip_after_failure_of: Sequence[Step] | None = None,
    skip: SkipPredicate | None = None,
    dry_run: Literal["skip"] | None = None,
) -> Step:
    """Define a step whose output is one child run's value (or `map_result(...)`)."""
    from tubeless.pipeline._child_run import SingleChildRunner

    child = _check_pipeline(pipeline, id)
    _check_callable(map_options, "map_options", id, required=False)
    _check_callable(map_result, "map_result", id, required=False)
    _check_controls(controls, id)
    runner = SingleChildRunner(id, child, map_options, controls, map_result)
    common = _step_fields(
        name, description, depends_on, optional_depends_on, skip_after_failure_of, skip, dry_run
    )
    return _wrapper(factory, id, runner, NestedPipeline("single", child), common)


def _check_concurrency(concurrency: object, step_id: str) -> int | Literal["dynamic"]:
    if callable(concurrency):
        return "dynamic"
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise TypeError(f"Step {step_id!r} concurrency must be a positive integer")
    return concurrency


def build_for_each_pipeline(
    factory: StepFactory,
    id: str,
    *,
    pipeline: Pipeline,
    items: Callable[[Mapping[str, Any], Any], Sequence[Any]],
    key: Callable[[Any, int], str],
    map_options: Callable[[Any, int, Mapping[str, Any], Any], Any] | None = None,
    concurrency: int | Callable[[Mapping[str, Any], Any], int] = 1,
    controls: Any = None,
    map_result: Callable[[Any, Any, Any, int, Any], Any] | None = None,
    progress: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    depends_on: Sequence[Step] | None = None,
    optional_depends_on: Sequence[Step] | None = None,
    skip_after_failure_of: Sequence[Step] | None = None,
    skip: SkipPredicate | None = None,
    dry_run: Literal["skip"] | None = None,
) -> Step:
    """Define a step that runs one child per item; its output lists results in input order."""
    from tubeless.pipeline._fan_out import FanOutRunner

    child = _check_pipeline(pipeline, id)
    _check_callable(items, "items(inputs, context)", id, required=True)
    _check_callable(key, "key(item, index)", id, required=True)
    _check_callable(map_options, "map_options", id, required=False)
    _check_callable(map_result, "map_result", id, required=False)
    _check_controls(controls, id)
    static_concurrency = _check_concurrency(concurrency, id)
    runner = FanOutRunner(
        step_id=id,
        pipeline=child,
        items=items,
        key=key,
        map_options=map_options,
        concurrency=concurrency,
        controls=controls,
        map_result=map_result,
        progress=dict(progress or {}),
    )
    common = _step_fields(
        name, description, depends_on, optional_depends_on, skip_after_failure_of, skip, dry_run
    )
    nested = NestedPipeline("for-each", child, concurrency=static_concurrency)
    return _wrapper(factory, id, runner, nested, common)


def build_iterate_pipeline(
    factory: StepFactory,
    id: str,
    *,
    pipeline: Pipeline,
    max_iterations: int,
    initial_state: Callable[[Mapping[str, Any], Any], Any],
    transition: Callable[[Any, Any, Any], Any],
    map_options: Callable[[Any, Mapping[str, Any], Any], Any] | None = None,
    controls: Mapping[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    depends_on: Sequence[Step] | None = None,
    optional_depends_on: Sequence[Step] | None = None,
    skip_after_failure_of: Sequence[Step] | None = None,
    skip: SkipPredicate | None = None,
    dry_run: Literal["skip"] | None = None,
) -> Step:
    """Define a step that repeats a child run until `transition` returns a finish."""
    from tubeless.pipeline._child_run import IterationRunner

    child = _check_pipeline(pipeline, id)
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise TypeError(f"Step {id!r} max_iterations must be a positive integer")
    if max_iterations < 1:
        raise TypeError(f"Step {id!r} max_iterations must be a positive integer")
    _check_callable(initial_state, "initial_state(inputs, context)", id, required=True)
    _check_callable(transition, "transition(result, state, context)", id, required=True)
    _check_callable(map_options, "map_options", id, required=False)
    static = None if controls is None else controls_to_dict(resolve_controls(controls))
    runner = IterationRunner(
        step_id=id,
        pipeline=child,
        max_iterations=max_iterations,
        initial_state=initial_state,
        transition=transition,
        map_options=map_options,
        controls=controls,
    )
    common = _step_fields(
        name, description, depends_on, optional_depends_on, skip_after_failure_of, skip, dry_run
    )
    nested = NestedPipeline("iterate", child, max_iterations=max_iterations, controls=static)
    return _wrapper(factory, id, runner, nested, common)

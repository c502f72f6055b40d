"""`create_steps` and its `StepFactory`: ordinary steps and child-pipeline steps.

The child-pipeline steps (`from_pipeline`, `for_each_pipeline`, `iterate_pipeline`) are
checked here and run by the handlers in `_child_runs` and `_fan_out`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless._types import ControlsLike, SchemaLike, StepOptions, check_keywords
from tubeless.pipeline._child_runs import IterationRunner, SingleChildRunner
from tubeless.pipeline._controls import controls_to_dict, resolve_controls
from tubeless.pipeline._define import Pipeline
from tubeless.pipeline._fan_out import FanOutRunner
from tubeless.pipeline._handler_context import StepContext
from tubeless.pipeline._run_result import PipelineRun
from tubeless.pipeline._steps import (
    DryRunPolicy,
    NestedPipeline,
    Step,
    StepHandler,
    StepInputs,
    step_tuple,
)
from tubeless.schema import Schema, as_schema

if TYPE_CHECKING:
    # Only for type checkers (annotations stay strings): `typing.Unpack` is 3.11+.
    from typing_extensions import Unpack

ChildControls = ControlsLike | None
"""Controls of a child run: `RunControls`, a dict of the same keys, or `None`."""
ItemControls = Callable[[Any, int, StepInputs, StepContext], ChildControls]
"""`controls(item, index, inputs, context)` of one `for_each_pipeline` child."""


def _check_dry_run(policy: object, step_id: str) -> DryRunPolicy:
    if policy is None or policy == "skip" or callable(policy):
        return policy
    raise TypeError(f"Step {step_id!r} dry_run must be None, 'skip' or a callable")


def _check_text(value: object, field: str, step_id: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"Step {step_id!r} {field} must be a string")


def _check_pipeline(pipeline: object, step_id: str) -> Pipeline:
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


def _check_controls(controls: object, step_id: str) -> None:
    if controls is None or callable(controls):
        return
    try:
        resolve_controls(controls)  # type: ignore[arg-type]
    except TypeError as error:
        raise TypeError(f"Step {step_id!r} controls: {error}") from None


def _check_concurrency(concurrency: object, step_id: str) -> int | Literal["dynamic"]:
    if callable(concurrency):
        return "dynamic"
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise TypeError(f"Step {step_id!r} concurrency must be a positive integer")
    return concurrency


def _check_max_iterations(max_iterations: object, step_id: str) -> int:
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise TypeError(f"Step {step_id!r} max_iterations must be a positive integer")
    if max_iterations < 1:
        raise TypeError(f"Step {step_id!r} max_iterations must be a positive integer")
    return max_iterations


class StepFactory:
    """Builds steps bound to one pipeline's domain-options schema (see `create_steps`)."""

    __slots__ = ("_scope", "options_schema")

    def __init__(self, options_schema: SchemaLike | None = None) -> None:
        self._scope = options_schema
        self.options_schema: Schema | None = (
            None if options_schema is None else as_schema(options_schema, label="Options")
        )

    def step(
        self,
        id: str,
        *,
        run: StepHandler,
        dry_run: DryRunPolicy = None,
        output_schema: SchemaLike | None = None,
        **options: Unpack[StepOptions],
    ) -> Step:
        """Define an ordinary step.

        Args:
            id: the step id.
            run: `run(inputs, context)`: the work; its return value is the step's output.
            dry_run: `None` runs `run` in dry runs, `"skip"` skips the step, a callable
                `preview(inputs, context)` runs instead.
            output_schema: validates (and may transform) the published output.
            **options: the `StepOptions`: `name`, `description`, `depends_on`,
                `optional_depends_on`, `skip_after_failure_of`, `skip`.

        Raises:
            TypeError: when a field has the wrong type (blank ids and graph mistakes are
                reported by `define_pipeline`).
        """
        check_keywords(options, StepOptions, "StepFactory.step")
        if not isinstance(id, str):
            raise TypeError(f"Step id must be a string, got {id!r}")
        if not callable(run):
            raise TypeError(f"Step {id!r} requires a callable run(inputs, context)")
        skip = options.get("skip")
        if skip is not None and not callable(skip):
            raise TypeError(f"Step {id!r} skip must be a callable predicate")
        gates = options.get("skip_after_failure_of")
        return Step(
            id=id,
            run=run,
            name=_check_text(options.get("name"), "name", id),
            description=_check_text(options.get("description"), "description", id),
            depends_on=step_tuple(options.get("depends_on"), "depends_on", id),
            optional_depends_on=step_tuple(
                options.get("optional_depends_on"), "optional_depends_on", id
            ),
            skip_after_failure_of=step_tuple(gates, "skip_after_failure_of", id),
            dry_run=_check_dry_run(dry_run, id),
            output_schema=(
                None
                if output_schema is None
                else as_schema(output_schema, label=f"Step {id} output")
            ),
            skip=skip,
            options_scope=self._scope,
            options_schema=self.options_schema,
        )

    __call__ = step

    def _wrapper(
        self,
        id: str,
        run: StepHandler,
        nested: NestedPipeline,
        dry_run: object,
        options: StepOptions,
    ) -> Step:
        checked = _check_wrapper_dry_run(dry_run, id)
        step = self.step(id, run=run, dry_run=checked, **options)
        return dataclasses.replace(step, nested=nested)

    def from_pipeline(
        self,
        id: str,
        *,
        pipeline: Pipeline,
        map_options: Callable[[StepInputs, StepContext], Any] | None = None,
        controls: ChildControls | Callable[[StepInputs, StepContext], ChildControls] = None,
        map_result: Callable[[Any, PipelineRun, StepContext], Any] | None = None,
        dry_run: Literal["skip"] | None = None,
        **options: Unpack[StepOptions],
    ) -> Step:
        """Define a step that runs `pipeline` once as a child run.

        Args:
            id: the step id.
            pipeline: the child pipeline (made by `define_pipeline`).
            map_options: `map_options(inputs, context)` -> the child's options (default:
                the parent's options).
            controls: the child's controls, or `controls(inputs, context)` returning them;
                a dry-running parent always dry-runs its child.
            map_result: `map_result(value, child_run, context)` -> the step's output
                (default: the child's value).
            dry_run: `"skip"` skips the step in dry runs; `None` runs the child dry.
            **options: the `StepOptions`: `name`, `description`, `depends_on`,
                `optional_depends_on`, `skip_after_failure_of`, `skip`.

        Raises:
            TypeError: for a field of the wrong type.
        """
        check_keywords(options, StepOptions, "StepFactory.from_pipeline")
        child = _check_pipeline(pipeline, id)
        _check_callable(map_options, "map_options", id, required=False)
        _check_callable(map_result, "map_result", id, required=False)
        _check_controls(controls, id)
        runner = SingleChildRunner(id, child, map_options, controls, map_result)
        return self._wrapper(id, runner, NestedPipeline("single", child), dry_run, options)

    def for_each_pipeline(
        self,
        id: str,
        *,
        pipeline: Pipeline,
        items: Callable[[StepInputs, StepContext], Sequence[Any]],
        key: Callable[[Any, int], str],
        map_options: Callable[[Any, int, StepInputs, StepContext], Any] | None = None,
        concurrency: int | Callable[[StepInputs, StepContext], int] = 1,
        controls: ChildControls | ItemControls = None,
        map_result: Callable[[Any, PipelineRun, Any, int, StepContext], Any] | None = None,
        progress: Mapping[str, Any] | None = None,
        dry_run: Literal["skip"] | None = None,
        **options: Unpack[StepOptions],
    ) -> Step:
        """Define a step that runs `pipeline` once per item; its output lists results in order.

        Args:
            id: the step id.
            pipeline: the child pipeline (made by `define_pipeline`).
            items: `items(inputs, context)` -> the items, one child run each.
            key: `key(item, index)` -> the item's unique string key (its `itemKey`).
            map_options: `map_options(item, index, inputs, context)` -> the child's
                options (default: the parent's options).
            concurrency: the bound on children running at once, or
                `concurrency(inputs, context)` returning it.
            controls: each child's controls, or `controls(item, index, inputs, context)`.
            map_result: `map_result(value, child_run, item, index, context)` -> the
                item's entry in the output (default: the child's value).
            progress: `item_noun` (default `"items"`) and `detail_limit` (default 32) of
                the step's progress rows.
            dry_run: `"skip"` skips the step in dry runs; `None` runs the children dry.
            **options: the `StepOptions`: `name`, `description`, `depends_on`,
                `optional_depends_on`, `skip_after_failure_of`, `skip`.

        Raises:
            TypeError: for a field of the wrong type.
        """
        check_keywords(options, StepOptions, "StepFactory.for_each_pipeline")
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
            progress=progress or {},
        )
        nested = NestedPipeline("for-each", child, concurrency=static_concurrency)
        return self._wrapper(id, runner, nested, dry_run, options)

    def iterate_pipeline(
        self,
        id: str,
        *,
        pipeline: Pipeline,
        max_iterations: int,
        initial_state: Callable[[StepInputs, StepContext], Any],
        transition: Callable[[Any, Any, StepContext], Any],
        map_options: Callable[[Any, StepInputs, StepContext], Any] | None = None,
        controls: ChildControls = None,
        dry_run: Literal["skip"] | None = None,
        **options: Unpack[StepOptions],
    ) -> Step:
        """Define a step that repeats `pipeline` until `transition` returns a finish.

        Args:
            id: the step id.
            pipeline: the child pipeline (made by `define_pipeline`), run once per iteration.
            max_iterations: the bound on iterations; reaching it with a `next` fails the
                step with `TUBELESS_ITERATION_LIMIT_REACHED`.
            initial_state: `initial_state(inputs, context)` -> the first state.
            transition: `transition(value, state, context)` -> `{"kind": "next",
                "state": ...}` or `{"kind": "finish", "result": ...}`.
            map_options: `map_options(state, inputs, context)` -> the child's options
                (default: the state).
            controls: static controls of every iteration's child run.
            dry_run: `"skip"` skips the step in dry runs; `None` runs the children dry.
            **options: the `StepOptions`: `name`, `description`, `depends_on`,
                `optional_depends_on`, `skip_after_failure_of`, `skip`.

        Raises:
            TypeError: for a field of the wrong type.
        """
        check_keywords(options, StepOptions, "StepFactory.iterate_pipeline")
        child = _check_pipeline(pipeline, id)
        bound = _check_max_iterations(max_iterations, id)
        _check_callable(initial_state, "initial_state(inputs, context)", id, required=True)
        _check_callable(transition, "transition(result, state, context)", id, required=True)
        _check_callable(map_options, "map_options", id, required=False)
        static = None if controls is None else controls_to_dict(resolve_controls(controls))
        runner = IterationRunner(
            step_id=id,
            pipeline=child,
            max_iterations=bound,
            initial_state=initial_state,
            transition=transition,
            map_options=map_options,
            controls=controls,
        )
        nested = NestedPipeline("iterate", child, max_iterations=bound, controls=static)
        return self._wrapper(id, runner, nested, dry_run, options)


def create_steps(options_schema: SchemaLike | None = None) -> StepFactory:
    """Return a step factory bound to one pipeline's domain options.

    Args:
        options_schema: validates the options of every run (a JSON Schema dict, a pydantic
            model or TypeAdapter, or an object with `validate`); `None` accepts anything.

    Returns:
        A `StepFactory`: call it (or its `step` method) to define steps, and use its
        `from_pipeline`, `for_each_pipeline` and `iterate_pipeline` for child pipelines.
    """
    return StepFactory(options_schema)

"""Child runs started from a step: how they attach, and the `from_pipeline` and
`iterate_pipeline` handlers (the `for_each_pipeline` handler is in `_fan_out`)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from tubeless._diagnostics import is_waiting
from tubeless._types import Hook
from tubeless._usage import Usage
from tubeless.errors import (
    IterationError,
    PipelineExecutionError,
)
from tubeless.pipeline._child_progress import (
    IterationProgress,
    SingleChildProgress,
)
from tubeless.pipeline._classify import is_cancellation
from tubeless.pipeline._controls import RunControls, child_controls, resolve_controls
from tubeless.pipeline._execute import execute_run
from tubeless.pipeline._extensions import USAGE_METER, RunExtension
from tubeless.pipeline._handler_context import (
    ExecutionContext,
    StepContext,
    raise_if_cancelled,
    scope_of,
)
from tubeless.pipeline._plan import PipelinePlan
from tubeless.pipeline._run_result import ChildValue, PipelineRun

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline

T = TypeVar("T")


def observed(context: ExecutionContext) -> bool:
    """Whether the run behind `context` builds records (so progress is worth building)."""
    return scope_of(context).observer is not None


def child_failure(
    pipeline: Pipeline, plan: PipelinePlan, result: PipelineRun, *, item_key: str | None = None
) -> PipelineExecutionError:
    """The error a parent step raises for a child run that did not complete.

    Its `__cause__` is the exception behind the child's first error; `item_key` (an
    agent's call id) names the child in the error, for a person reading where it failed.
    """
    if not plan.ok:
        first = plan.errors[0].message if plan.errors else "invalid plan"
        message = f"Child pipeline {pipeline.id} could not start: {first}"
    else:
        where, why = _first_failure(result)
        message = f"Child pipeline {pipeline.id} failed at {where}: {why}"
    error = PipelineExecutionError(result, message)
    error.__cause__ = result.first_exception()
    error.item_key = item_key
    return error


def record_lock(context: ExecutionContext) -> AbstractContextManager[Any] | None:
    """The lock that serialises the records of the run tree behind `context`, if observed."""
    channel = scope_of(context).services.channel
    return None if channel is None else channel.lock


def run_child_pipeline(
    context: StepContext,
    pipeline: Pipeline,
    options: Any,
    *,
    controls: RunControls,
    plan: PipelinePlan | None = None,
    hooks: Sequence[dict[str, Hook]] = (),
    item_key: str | None = None,
    iteration: dict[str, Any] | None = None,
    options_checked: bool = False,
    extensions: Mapping[RunExtension[Any], Any] | None = None,
) -> PipelineRun:
    """Run `pipeline` as a child of the step behind `context`; return its report.

    The child shares the parent's signal, trace channel, logger, clock and working
    directory; it never raises for a run failure (see `child_failure`). With
    `options_checked`, `options` were already validated by the child's own options schema
    (its transform runs once) and are used as they are. `extensions` are values for this
    child's run alone, beside the inherited ones (see `extension_of`).
    """
    return execute_run(
        pipeline,
        options,
        controls,
        parent=scope_of(context),
        hooks=tuple(hooks),
        item_key=item_key,
        iteration=iteration,
        options_checked=options_checked,
        plan=plan,
        extensions=extensions,
    )


def run_child_value(
    context: StepContext,
    pipeline: Pipeline,
    options: Any,
    *,
    controls: RunControls,
    plan: PipelinePlan,
    item_key: str | None = None,
) -> PipelineRun | ChildValue:
    """`run_child_pipeline` for a child whose value alone matters once it completes.

    When nothing observes the child and its lone step completes with the result as it
    is, this returns that value (`ChildValue`) without building the report; otherwise the
    report, as `run_child_pipeline` gives it.
    """
    return execute_run(
        pipeline,
        options,
        controls,
        parent=scope_of(context),
        item_key=item_key,
        plan=plan,
        report=False,
    )


def extension_of(context: ExecutionContext, key: RunExtension[T]) -> T | None:
    """The value of `key` the run behind `context` carries, or `None`."""
    value: T | None = scope_of(context).extensions.get(key)
    return value


def set_extension(context: ExecutionContext, key: RunExtension[T], value: T) -> None:
    """Have the run behind `context` carry `value` for `key` (its child runs started
    later inherit it when the key is `inherited`)."""
    scope_of(context).extensions[key] = value


def thread_pool_of(context: ExecutionContext) -> concurrent.futures.ThreadPoolExecutor | None:
    """The thread pool given in the root run's context (child runs share it), or `None`."""
    return scope_of(context).services.thread_pool


def meter_usage(context: ExecutionContext, read: Callable[[], Usage]) -> None:
    """Have the report of the run behind `context` carry `read()` as its `usage`.

    `read` is called once, when the run's report is made (after every step settled).
    """
    scope_of(context).extensions[USAGE_METER] = read


def item_key_of(context: ExecutionContext) -> str | None:
    """The item key of the run behind `context` (`None` for a root run)."""
    return scope_of(context).item_key


def run_child(
    context: StepContext,
    pipeline: Pipeline,
    options: Any,
    *,
    controls: RunControls,
    plan: PipelinePlan,
    hooks: Sequence[dict[str, Hook]] = (),
    item_key: str | None = None,
    iteration: dict[str, Any] | None = None,
) -> PipelineRun:
    """Run a child with a precomputed plan (as `run_child_pipeline`); raise unless it completed.

    Raises:
        PipelineExecutionError: when the plan was rejected or the run did not complete.
    """
    result = run_child_pipeline(
        context,
        pipeline,
        options,
        controls=controls,
        plan=plan,
        hooks=hooks,
        item_key=item_key,
        iteration=iteration,
    )
    if not plan.ok or result.status != "completed":
        raise child_failure(pipeline, plan, result)
    return result


def _first_failure(result: PipelineRun) -> tuple[str, str]:
    step = next((s for s in result.steps if s.status in ("failed", "cancelled")), None)
    error = step.error if step is not None and step.error else (result.errors or (None,))[0]
    where = step.id if step is not None else (error.step_id if error else None)
    return where or "unknown step", error.message if error else "unknown error"


def resolved_controls(controls: object, parent: ExecutionContext, *args: Any) -> RunControls:
    """A child's controls: static or `controls(*args)`, dry run forced by the parent."""
    configured = controls(*args) if callable(controls) else controls
    return child_controls(resolve_controls(configured), parent.dry_run)  # type: ignore[arg-type]


class SingleChildRunner:
    """The handler of a `from_pipeline` step."""

    def __init__(
        self,
        step_id: str,
        pipeline: Pipeline,
        map_options: Callable[..., Any] | None,
        controls: object,
        map_result: Callable[..., Any] | None,
    ) -> None:
        self.step_id = step_id
        self.pipeline = pipeline
        self.map_options = map_options
        self.controls = controls
        self.map_result = map_result

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        options = self.map_options(inputs, context) if self.map_options else context.options
        controls = resolved_controls(self.controls, context, inputs, context)
        plan = self.pipeline.plan(controls)
        hooks = []
        if observed(context):
            hooks.append(SingleChildProgress(plan, context.offer_progress).tracker.hooks)
        item_key = scope_of(context).item_key
        result = run_child(
            context,
            self.pipeline,
            options,
            controls=controls,
            plan=plan,
            hooks=hooks,
            item_key=item_key,
        )
        if self.map_result:
            return self.map_result(result.value, result, context)
        return result.value


class IterationRunner:
    """The handler of an `iterate_pipeline` step."""

    def __init__(
        self,
        *,
        step_id: str,
        pipeline: Pipeline,
        max_iterations: int,
        initial_state: Callable[[Mapping[str, Any], StepContext], Any],
        transition: Callable[[Any, Any, StepContext], Any],
        map_options: Callable[[Any, Mapping[str, Any], StepContext], Any] | None = None,
        controls: RunControls | Mapping[str, Any] | None = None,
        unit: str = "iteration",
        first_index: int = 1,
    ) -> None:
        """Repeat `pipeline` (at most `max_iterations` runs) from `initial_state(inputs, context)`.

        Each iteration runs the child with `map_options(state, inputs, context)` (default:
        the state itself); `transition(value, state, context)` then returns
        `{"kind": "next", "state": ...}` or `{"kind": "finish", "result": ...}`. Progress
        counts iterations against the limit in `unit`s (`turn 3 (limit 6)` for an agent).
        `first_index` numbers the first iteration (a resumed loop goes on counting).
        """
        self.step_id = step_id
        self.pipeline = pipeline
        self.max_iterations = max_iterations
        self.initial_state = initial_state
        self.transition = transition
        self.map_options = map_options
        self.controls = controls
        self.unit = unit
        self.first_index = first_index

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        state = self.initial_state(inputs, context)
        progress = (
            IterationProgress(self.max_iterations, context.offer_progress, unit=self.unit)
            if observed(context)
            else None
        )
        controls = resolved_controls(self.controls, context)
        plan = self.pipeline.plan(controls)
        index = self.first_index - 1
        while True:
            index += 1
            raise_if_cancelled(context.signal)
            hooks = [progress.track(index, plan)] if progress else []
            try:
                kind, value = self._iterate(index, state, inputs, context, (controls, plan), hooks)
            except Exception as error:
                # The group fails with its child, transition or bound, as the step does.
                if progress:
                    if is_cancellation(error, context.signal):
                        progress.settle("cancelled")
                    else:
                        progress.settle("pending" if is_waiting(error) else "failed")
                raise
            if progress:
                progress.settle("completed")
            if kind == "finish":
                return value
            state = value

    def _iterate(
        self,
        index: int,
        state: Any,
        inputs: Mapping[str, Any],
        context: StepContext,
        planned: tuple[RunControls, PipelinePlan],
        hooks: Sequence[dict[str, Hook]],
    ) -> tuple[str, Any]:
        """Run iteration `index` and its transition; return the decision."""
        options = self.map_options(state, inputs, context) if self.map_options else state
        relation = {
            "runId": scope_of(context).run_id,
            "stepId": self.step_id,
            "attemptId": context.attempt_id,
            "index": index,
        }
        controls, plan = planned
        result = run_child(
            context,
            self.pipeline,
            options,
            controls=controls,
            plan=plan,
            hooks=hooks,
            item_key=f"iteration-{index}",
            iteration=relation,
        )
        kind, value = self._decision(self.transition(result.value, state, context))
        if kind == "next" and index >= self.max_iterations:
            raise IterationError(
                f"Iteration step {self.step_id} reached its limit of "
                f"{self.max_iterations} iterations",
                code="TUBELESS_ITERATION_LIMIT_REACHED",
            )
        return kind, value

    def _decision(self, decision: object) -> tuple[str, Any]:
        if isinstance(decision, Mapping):
            kind = decision.get("kind")
            if kind == "next" and set(decision) == {"kind", "state"}:
                return "next", decision["state"]
            if kind == "finish" and set(decision) == {"kind", "result"}:
                return "finish", decision["result"]
        raise IterationError(
            f"Iteration step {self.step_id} transition must return "
            '{"kind": "next", "state": ...} or {"kind": "finish", "result": ...}',
            code="TUBELESS_ITERATION_INVALID_DECISION",
        )

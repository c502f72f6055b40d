"""Running child pipelines from a step: one child, one per item, or one per iteration."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tubeless.errors import (
    ChildPipelineError,
    ErrorCause,
    FanOutDiagnostics,
    FanOutFailure,
    IterationError,
    PipelineExecutionError,
    RunCancelledError,
    normalize_cause,
)
from tubeless.pipeline._child_progress import (
    FanOutProgress,
    IterationProgress,
    SingleChildProgress,
)
from tubeless.pipeline._classify import is_cancellation
from tubeless.pipeline._context import (
    ExecutionContext,
    StepContext,
    cancellation_message,
    raise_if_cancelled,
    scope_of,
)
from tubeless.pipeline._controls import RunControls, child_controls, resolve_controls
from tubeless.pipeline._execute import ChildLink, execute_run
from tubeless.pipeline._observe import Hook
from tubeless.pipeline._plan import PipelinePlan
from tubeless.pipeline._pool import run_lazily
from tubeless.pipeline._report import PipelineRun

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline

FAN_OUT_FAILURE_LIMIT = 32
_TEXT_LIMIT = 1024


def child_link(
    context: ExecutionContext,
    *,
    hooks: Sequence[dict[str, Hook]] = (),
    item_key: str | None = None,
    iteration: dict[str, Any] | None = None,
) -> ChildLink:
    """How a child run started from `context`'s step attaches to its run."""
    scope = scope_of(context)
    return ChildLink(
        parent_run_id=scope.run_id,
        correlation_id=scope.correlation_id,
        signal=scope.signal,
        log=scope.log,
        now=scope.now,
        sleep=scope.sleep,
        cwd=scope.cwd,
        channel=scope.channel,
        hooks=tuple(hooks),
        item_key=item_key,
        iteration=iteration,
    )


def observed(context: ExecutionContext) -> bool:
    """Whether the run behind `context` builds records (so progress is worth building)."""
    return scope_of(context).observer is not None


def child_failure(
    pipeline: Pipeline, plan: PipelinePlan, result: PipelineRun
) -> PipelineExecutionError:
    """The error a parent step raises for a child run that did not complete.

    Its `__cause__` is the exception behind the child's first error.
    """
    if not plan.ok:
        first = plan.errors[0].message if plan.errors else "invalid plan"
        message = f"Child pipeline {pipeline.id} could not start: {first}"
    else:
        where, why = _first_failure(result)
        message = f"Child pipeline {pipeline.id} failed at {where}: {why}"
    error = PipelineExecutionError(result, message)
    error.__cause__ = result.first_exception()
    return error


def record_lock(context: ExecutionContext) -> AbstractContextManager[Any] | None:
    """The lock that serialises the records of the run tree behind `context`, if observed."""
    channel = scope_of(context).channel
    return None if channel is None else channel.lock


def run_child(
    pipeline: Pipeline,
    options: Any,
    controls: RunControls,
    plan: PipelinePlan,
    link: ChildLink,
) -> PipelineRun:
    """Run a child with a precomputed plan; raise unless it completed.

    Raises:
        PipelineExecutionError: when the plan was rejected or the run did not complete.
    """
    result = execute_run(pipeline, options, controls, link=link, plan=plan)
    if not plan.ok or result.status != "completed":
        raise child_failure(pipeline, plan, result)
    return result


def _first_failure(result: PipelineRun) -> tuple[str, str]:
    step = next((s for s in result.steps if s.status in ("failed", "cancelled")), None)
    error = step.error if step is not None and step.error else (result.errors or (None,))[0]
    where = step.id if step is not None else (error.step_id if error else None)
    return where or "unknown step", error.message if error else "unknown error"


def _resolved(controls: object, parent: ExecutionContext, *args: Any) -> RunControls:
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
        controls = _resolved(self.controls, context, inputs, context)
        plan = self.pipeline.plan(controls)
        hooks = []
        if observed(context):
            hooks.append(SingleChildProgress(plan, context.report_progress).tracker.hooks)
        link = child_link(context, hooks=hooks, item_key=scope_of(context).item_key)
        result = run_child(self.pipeline, options, controls, plan, link)
        if self.map_result:
            return self.map_result(result.value, result, context)
        return result.value


class FanOutRunner:
    """The handler of a `for_each_pipeline` step."""

    def __init__(self, **config: Any) -> None:
        self.step_id: str = config["step_id"]
        self.pipeline: Pipeline = config["pipeline"]
        self.items: Callable[..., Sequence[Any]] = config["items"]
        self.key: Callable[[Any, int], str] = config["key"]
        self.map_options: Callable[..., Any] | None = config["map_options"]
        self.concurrency: Any = config["concurrency"]
        self.controls: object = config["controls"]
        self.map_result: Callable[..., Any] | None = config["map_result"]
        self.progress: dict[str, Any] = config["progress"]

    def _keys(self, items: Sequence[Any]) -> list[str]:
        keys = [self.key(item, index) for index, item in enumerate(items)]
        for key in keys:
            if not isinstance(key, str):
                raise ChildPipelineError(
                    f"Mapped child pipeline {self.pipeline.id} key must return a string, "
                    f"got {key!r}"
                )
        duplicates = sorted(key for key, count in Counter(keys).items() if count > 1)
        if duplicates:
            raise ChildPipelineError(
                f"Mapped child pipeline {self.pipeline.id} received duplicate item keys: "
                f"{', '.join(duplicates)}"
            )
        return keys

    def _concurrency(self, inputs: Mapping[str, Any], context: StepContext) -> int:
        value = (
            self.concurrency(inputs, context) if callable(self.concurrency) else self.concurrency
        )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ChildPipelineError(
                f"Mapped child pipeline {self.pipeline.id} concurrency must be a positive "
                f"integer, got {value!r}"
            )
        return value

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> list[Any]:
        items = list(self.items(inputs, context))
        keys = self._keys(items)
        concurrency = self._concurrency(inputs, context)
        progress = None
        if observed(context):
            progress = FanOutProgress(
                keys,
                len(self.pipeline.step_ids),
                context.report_progress,
                item_noun=str(self.progress.get("item_noun", "items")),
                detail_limit=int(self.progress.get("detail_limit", 32)),
                lock=record_lock(context),
            )
            progress.publish()
        batch = _FanOutBatch(self, items, keys, inputs, context, progress)
        signal = context.signal
        run_lazily(len(items), concurrency, batch.run_item, lambda: not batch.stop_if(signal))
        return batch.results()


class _FanOutBatch:
    """The state of one fan-out: results in input order and failures."""

    def __init__(
        self,
        runner: FanOutRunner,
        items: list[Any],
        keys: list[str],
        inputs: Mapping[str, Any],
        context: StepContext,
        progress: FanOutProgress | None,
    ) -> None:
        self._runner = runner
        self._items = items
        self._keys = keys
        self._inputs = inputs
        self._context = context
        self._progress = progress
        self._values: list[Any] = [None] * len(items)
        self._failures: list[tuple[int, BaseException]] = []
        self._lock = threading.Lock()
        self._scheduler_error: RunCancelledError | None = None

    def stop_if(self, signal: threading.Event) -> bool:
        if signal.is_set() and self._scheduler_error is None:
            self._scheduler_error = RunCancelledError(cancellation_message(signal))
        return signal.is_set()

    def run_item(self, index: int) -> None:
        runner, context, key, item = (
            self._runner,
            self._context,
            self._keys[index],
            self._items[index],
        )
        try:
            raise_if_cancelled(context.signal)
            options = (
                runner.map_options(item, index, self._inputs, context)
                if runner.map_options
                else context.options
            )
            controls = _resolved(runner.controls, context, item, index, self._inputs, context)
            plan = runner.pipeline.plan(controls)
            hooks = [self._progress.track(key, plan)] if self._progress else []
            result = run_child(
                runner.pipeline,
                options,
                controls,
                plan,
                child_link(context, hooks=hooks, item_key=key),
            )
            value = result.value
            if runner.map_result:
                value = runner.map_result(value, result, item, index, context)
            self._values[index] = value
            if self._progress:
                self._progress.settle(key, "completed")
        except Exception as error:
            with self._lock:
                self._failures.append((index, error))
            if self._progress:
                cancelled = is_cancellation(error, context.signal)
                self._progress.settle(key, "cancelled" if cancelled else "failed")

    def results(self) -> list[Any]:
        if not self._failures and self._scheduler_error is None:
            return self._values
        raise self._error()

    def _error(self) -> ChildPipelineError:
        signal = self._context.signal
        failures = sorted(self._failures, key=lambda entry: entry[0])
        cancelled = all(is_cancellation(error, signal) for _, error in failures)
        primary = next((e for _, e in failures if not is_cancellation(e, signal)), None)
        primary = primary or (failures[0][1] if failures else self._scheduler_error)
        pipeline_id = self._runner.pipeline.id
        if failures:
            details = "; ".join(f"{self._keys[i]}: {e}" for i, e in failures)
            message = (
                f"Mapped child pipeline {pipeline_id} failed for {len(failures)} item(s): {details}"
            )
        else:
            message = f"Mapped child pipeline {pipeline_id} failed: {self._scheduler_error}"
        error = ChildPipelineError(
            message, cancelled=cancelled, fan_out=self._diagnostics(failures)
        )
        error.__cause__ = primary
        return error

    def _diagnostics(self, failures: list[tuple[int, BaseException]]) -> FanOutDiagnostics:
        signal = self._context.signal
        kept = [
            FanOutFailure(
                index=index,
                key=self._keys[index][:_TEXT_LIMIT],
                key_truncated=len(self._keys[index]) > _TEXT_LIMIT,
                cancelled=is_cancellation(error, signal),
                error=_bounded_cause(error),
            )
            for index, error in failures[:FAN_OUT_FAILURE_LIMIT]
        ]
        return FanOutDiagnostics(
            failures=tuple(kept),
            failure_count=len(failures),
            omitted_failure_count=len(failures) - len(kept),
        )


def _bounded(link: ErrorCause | None) -> ErrorCause | None:
    if link is None:
        return None
    return ErrorCause(
        message=link.message[:_TEXT_LIMIT],
        name=None if link.name is None else link.name[:_TEXT_LIMIT],
        source_code=None if link.source_code is None else link.source_code[:_TEXT_LIMIT],
        cause=_bounded(link.cause),
    )


def _bounded_cause(error: BaseException) -> ErrorCause:
    """The error's cause chain with every string cut to 1024 characters."""
    bounded = _bounded(normalize_cause(error))
    assert bounded is not None
    return bounded


class IterationRunner:
    """The handler of an `iterate_pipeline` step."""

    def __init__(self, **config: Any) -> None:
        self.step_id: str = config["step_id"]
        self.pipeline: Pipeline = config["pipeline"]
        self.max_iterations: int = config["max_iterations"]
        self.initial_state: Callable[..., Any] = config["initial_state"]
        self.transition: Callable[..., Any] = config["transition"]
        self.map_options: Callable[..., Any] | None = config["map_options"]
        self.controls: object = config["controls"]

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        state = self.initial_state(inputs, context)
        progress = (
            IterationProgress(self.max_iterations, context.report_progress)
            if observed(context)
            else None
        )
        controls = _resolved(self.controls, context)
        plan = self.pipeline.plan(controls)
        index = 0
        while True:
            index += 1
            raise_if_cancelled(context.signal)
            hooks = [progress.track(index, plan)] if progress else []
            try:
                kind, value = self._iterate(index, state, inputs, context, (controls, plan), hooks)
            except Exception as error:
                # The group fails with its child, transition or bound, as the step does.
                if progress:
                    cancelled = is_cancellation(error, context.signal)
                    progress.settle("cancelled" if cancelled else "failed")
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
        link = child_link(context, hooks=hooks, item_key=f"iteration-{index}", iteration=relation)
        result = run_child(self.pipeline, options, *planned, link)
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

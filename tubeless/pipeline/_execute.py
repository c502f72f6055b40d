"""One run of a pipeline: plan, options, steps, finalization, and the run report."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from tubeless._types import Hook
from tubeless._usage import NO_USAGE
from tubeless.errors import Diagnostic
from tubeless.pipeline._classify import finalization_error, to_diagnostic
from tubeless.pipeline._controls import RunContext, RunControls
from tubeless.pipeline._extensions import (
    USAGE_METER,
    RunExtension,
    child_extensions,
    root_extensions,
)
from tubeless.pipeline._handler_context import (
    ExecutionContext,
    RunScope,
    StepContext,
    default_logger,
    default_now,
    default_sleep,
    raise_if_cancelled,
)
from tubeless.pipeline._hooks import normalize_hooks
from tubeless.pipeline._observe import RunObserver, TraceChannel
from tubeless.pipeline._plan import PipelinePlan
from tubeless.pipeline._run_result import (
    RUN_MODEL_VERSION,
    ChildValue,
    PipelineRun,
    StepReport,
    run_status,
)
from tubeless.pipeline._schedule import StepScheduler, runs_alone, trace_error
from tubeless.pipeline._steps import FINALIZE_STEP_ID, Step
from tubeless.schema import validate_boundary
from tubeless.trace import TRACE_LIST_LIMIT
from tubeless.trace.lowlevel import SharedPayload

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline


_random_bits = random.getrandbits


def new_run_id(pipeline_id: str) -> str:
    """`<pipeline id>:<random UUID version 4>`, made without the `uuid` module's overhead.

    The bits come from `random` (seeded from the OS, reseeded in a forked child), not
    from `os.urandom`: a run id is unique, not secret, and a system call per child run
    hands the GIL to another thread in the middle of the harness. Two 64-bit draws give
    the 122 random bits; the version nibble (4) and the RFC 4122 variant bits (10) are set.
    """
    high, low = _random_bits(64), _random_bits(64)
    return "%s:%08x-%04x-4%03x-%04x-%012x" % (  # noqa: UP031 (faster than f-string slices)
        pipeline_id,
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFF,
        0x8000 | (low >> 48) & 0x3FFF,
        low & 0xFFFFFFFFFFFF,
    )


def _scope_for_root(
    pipeline_id: str, context: RunContext, dry_run: bool
) -> tuple[RunScope, tuple[dict[str, Hook], ...]]:
    log = context.log or default_logger()
    hooks = normalize_hooks(context.hooks)
    channel = TraceChannel(context.tracing, log) if context.tracing is not None or hooks else None
    return RunScope(
        pipeline_id=pipeline_id,
        run_id=context.run_id or new_run_id(pipeline_id),
        parent_run_id=context.parent_run_id,
        correlation_id=context.correlation_id,
        item_key=None,
        iteration=None,
        signal=context.signal if context.signal is not None else threading.Event(),
        log=log,
        now=context.now or default_now,
        sleep=context.sleep or default_sleep,
        cwd=context.cwd or os.getcwd(),
        dry_run=dry_run,
        channel=channel,
        extensions=root_extensions(context),
        thread_pool=context.thread_pool,
    ), hooks


def _scope_for_child(
    pipeline_id: str,
    parent: RunScope,
    item_key: str | None,
    iteration: dict[str, Any] | None,
    dry_run: bool,
    extensions: Mapping[RunExtension[Any], Any] | None = None,
) -> RunScope:
    """A child run's scope: the parent's signal, channel, logger, clock, sleep and cwd.

    The child waits here while a sink slower than the run has a full queue (its start is
    where the thread holds none of the run's locks).
    """
    if parent.channel is not None:
        parent.channel.wait_for_room()
    return RunScope(
        pipeline_id=pipeline_id,
        run_id=new_run_id(pipeline_id),
        parent_run_id=parent.run_id,
        correlation_id=parent.correlation_id,
        item_key=item_key,
        iteration=iteration,
        signal=parent.signal,
        log=parent.log,
        now=parent.now,
        sleep=parent.sleep,
        cwd=parent.cwd,
        dry_run=dry_run,
        channel=parent.channel,
        extensions=child_extensions(parent.extensions, extensions),
        thread_pool=parent.thread_pool,
    )


def _observer(scope: RunScope, hooks: Sequence[dict[str, Hook]]) -> RunObserver | None:
    channel = scope.channel
    if channel is None or not (channel.tracing or hooks):
        return None
    base: dict[str, Any] = {"pipelineId": scope.pipeline_id, "runId": scope.run_id}
    for key, value in (
        ("correlationId", scope.correlation_id),
        ("parentRunId", scope.parent_run_id),
        ("itemKey", scope.item_key),
        ("iteration", scope.iteration),
    ):
        if value is not None:
            base[key] = value
    return RunObserver(channel, hooks, base, scope.now)


def execute_run(
    pipeline: Pipeline,
    options: Any,
    controls: RunControls,
    *,
    context: RunContext | None = None,
    parent: RunScope | None = None,
    hooks: tuple[dict[str, Hook], ...] = (),
    item_key: str | None = None,
    iteration: dict[str, Any] | None = None,
    options_checked: bool = False,
    plan: PipelinePlan | None = None,
    extensions: Mapping[RunExtension[Any], Any] | None = None,
) -> PipelineRun:
    """Run `pipeline` once: a root run (`context`) or a child run of the run behind `parent`.

    A child takes `hooks` (the run tree's trackers), `item_key` and `iteration`; with
    `options_checked`, its options were already validated by its own schema (used as is);
    `extensions` are values for the child's run beside those it inherits.
    """
    if parent is None:
        scope, hooks = _scope_for_root(pipeline.id, context or RunContext(), controls.dry_run)
    else:
        scope = _scope_for_child(
            pipeline.id, parent, item_key, iteration, controls.dry_run, extensions
        )
    scope.observer = _observer(scope, hooks)
    run = _Run(pipeline, scope, controls, plan or pipeline.plan(controls))
    try:
        return run.execute(options, checked=options_checked)
    finally:
        if parent is None and scope.channel is not None:
            scope.channel.held.stop()
            scope.channel.settle()
            scope.channel.flush()


def execute_for_value(
    pipeline: Pipeline,
    options: Any,
    controls: RunControls,
    *,
    parent: RunScope,
    item_key: str | None,
    plan: PipelinePlan,
) -> PipelineRun | ChildValue:
    """Run a child as `execute_run` does (with no hooks of its own), for its value: one
    whose lone step completes with the result as it is returns that value alone
    (`ChildValue`), without the report it would throw away, and sends the same records."""
    scope = _scope_for_child(pipeline.id, parent, item_key, None, controls.dry_run)
    scope.observer = _observer(scope, ())
    run = _Run(pipeline, scope, controls, plan)
    step = _value_step(pipeline, plan, controls)
    if step is not None and not scope.signal.is_set():
        scope.options = options
        return run.execute_alone(step, report=False)
    return run.execute(options, report=False)


def _value_step(pipeline: Pipeline, plan: PipelinePlan, controls: RunControls) -> Step | None:
    """The lone step of a plan whose output is its run's result as it is, if it has one:
    what `execute` would run alone, with no options to validate and nothing to finalize.
    Worked out once per plan (a step runs alone only at a concurrency of 1)."""
    if controls.max_concurrency != 1:
        return None
    memo = plan.memo
    if "value step" not in memo:
        order = pipeline.execution_order
        lone = (
            plan.ok
            and pipeline.options_schema is None
            and pipeline.result_schema is None
            and runs_alone(order, plan.steps, 1, plan.dry_run)
            and order[0].skip is None
            and pipeline.finalize_step_id == order[0].id
        )
        memo["value step"] = order[0] if lone else None
    step: Step | None = memo["value step"]
    return step


class _Run:
    """The lifecycle of one run around its scheduler."""

    def __init__(
        self, pipeline: Pipeline, scope: RunScope, controls: RunControls, plan: PipelinePlan
    ) -> None:
        self._pipeline = pipeline
        self._scope = scope
        self._controls = controls
        self._plan = plan
        self._started = scope.now()
        self._errors: list[Diagnostic] = []
        self._exceptions: list[BaseException | None] = []

    def _emit(self, name: str, **fields: Any) -> None:
        """Emit a finalize record: its payload is always empty, the rest the library's."""
        observer = self._scope.observer
        if observer is not None:
            observer.emit(name, {}, payload_checked="error" not in fields, **fields)

    def _fail(self, error: Diagnostic, exception: BaseException | None = None) -> None:
        self._errors.append(error)
        self._exceptions.append(exception)

    @overload
    def execute(self, options: Any, *, checked: bool = ...) -> PipelineRun: ...

    @overload
    def execute(
        self, options: Any, *, checked: bool = ..., report: bool
    ) -> PipelineRun | ChildValue: ...

    def execute(
        self, options: Any, *, checked: bool = False, report: bool = True
    ) -> PipelineRun | ChildValue:
        self._emit_started()
        if not self._plan.ok:
            for error in self._plan.errors:
                self._fail(error)
            return self._complete(None)
        if checked:
            self._scope.options = options
        elif not self._validate_options(options):
            return self._complete(None)
        order = self._pipeline.execution_order
        scope = self._scope
        if scope.observer is not None:
            self._emit_planned(scope.observer)
        elif (
            runs_alone(order, self._plan.steps, self._controls.max_concurrency, scope.dry_run)
            and order[0].skip is None
            and not scope.signal.is_set()
        ):
            return self.execute_alone(order[0], report)
        scheduler = self._scheduler()
        if scheduler.runs_alone():
            scheduler.run_alone()
        else:
            scheduler.run()
        return self._settle(scheduler)

    def _scheduler(self) -> StepScheduler:
        return StepScheduler(
            self._scope,
            self._pipeline.id,
            self._pipeline.execution_order,
            self._pipeline.prerequisite_ids,
            self._plan.steps,
            max_concurrency=self._controls.max_concurrency,
            continue_on_error=self._controls.continue_on_error,
        )

    def _settle(self, scheduler: StepScheduler) -> PipelineRun:
        """Finalize and report once the scheduler has settled every step."""
        for index in sorted(scheduler.errors):
            self._fail(*scheduler.errors[index])
        reports = tuple(scheduler.reports[step.id] for step in self._plan.steps)
        return self._complete(self._finalize(scheduler.outputs), reports)

    def execute_alone(self, step: Step, report: bool) -> PipelineRun | ChildValue:
        """Run the lone step of a run right here (a tool call), without the scheduler.

        The scheduler's ladder for that step (see `StepScheduler.run_alone`) without
        making the scheduler: the same reports, and the same records when observed (an
        unobserved attempt starts when the run does). A failure goes to the scheduler,
        which reports it as `run_alone` would. Without `report`, a step whose output is
        the result as it is returns just that (`ChildValue`).
        """
        scope = self._scope
        observer = scope.observer
        attempt_id = scope.next_attempt_id()
        if observer is None:
            started = self._started
        else:
            self._emit_started()
            self._emit_planned(observer)
            started = scope.now()
            observer.emit(
                "step.running",
                {},
                payload_checked=True,
                at=started,
                stepId=step.id,
                attemptId=attempt_id,
            )
        context = StepContext(scope, step.id, attempt_id)
        handler = step.dry_run if scope.dry_run and callable(step.dry_run) else step.run
        try:
            value = handler({}, context)
        except Exception as error:
            context.close()
            return self._alone_failed(error, attempt_id, started)
        context.close()
        if step.output_schema is not None:
            boundary = f"Pipeline {self._pipeline.id} step {step.id} output"
            try:
                value = validate_boundary(step.output_schema, value, boundary)
            except Exception as error:
                return self._alone_failed(error, attempt_id, started)
        if observer is not None:
            return self._observed_alone(observer, step, attempt_id, started, value, report)
        pipeline = self._pipeline
        # When the finalizer would hand the output back as it is, the run ends with the step.
        as_is = (
            pipeline.finalize_step_id == step.id
            and pipeline.result_schema is None
            and not scope.signal.is_set()
        )
        if as_is and not report:
            return ChildValue(value)
        finished = scope.now()
        reports = (_completed_report(step, attempt_id, started, finished),)
        if as_is:
            return self._complete((True, value), reports, finished)
        return self._complete(self._finalize({step.id: value}), reports)

    def _observed_alone(
        self,
        observer: RunObserver,
        step: Step,
        attempt_id: str,
        started: int,
        value: Any,
        report: bool,
    ) -> PipelineRun | ChildValue:
        """`execute_alone` once an observed lone step completed: its records, then the run's."""
        finished = self._scope.now()
        # `terminal_record` of the step's report, which a value needs no more.
        observer.emit(
            "step.complete",
            {"status": "completed"},
            payload_checked=True,
            at=finished,
            stepId=step.id,
            attemptId=attempt_id,
            durationMs=finished - started,
        )
        finalized = self._finalize({step.id: value})
        if finalized[0] and not report:
            self._emit_completed(observer, (), True, self._scope.now())
            return ChildValue(finalized[1])
        return self._complete(finalized, (_completed_report(step, attempt_id, started, finished),))

    def _alone_failed(self, error: Exception, attempt_id: str, started: int) -> PipelineRun:
        scheduler = self._scheduler()
        scheduler.fail_alone(error, attempt_id, started)
        return self._settle(scheduler)

    def _plan_payload(self, key: str, build: Callable[[], Any]) -> tuple[Any, bool]:
        """A payload every run of this plan sends alike, built once; and whether it passed."""
        memo = self._plan.memo
        payload = memo.get(key)
        if payload is None:
            payload = memo.setdefault(key, build())
        return payload, memo.get(f"{key} checked", False)

    def _plan_payload_checked(self, key: str) -> None:
        self._plan.memo[f"{key} checked"] = True

    def _emit_planned(self, observer: RunObserver) -> None:
        """One `step.planned` per plan step; payloads are built and checked once per plan."""
        steps = self._plan.steps
        payloads, checked = self._plan_payload(
            "planned", lambda: [SharedPayload(_planned_payload(step)) for step in steps]
        )
        valid = True
        for step, payload in zip(steps, payloads, strict=True):
            valid &= observer.emit("step.planned", payload, payload_checked=checked, stepId=step.id)
        if valid:
            self._plan_payload_checked("planned")

    def _emit_started(self) -> None:
        """`pipeline.started`; its payload (less any snapshot) is built and checked once a plan."""
        observer = self._scope.observer
        if observer is None:
            return
        pipeline, plan = self._pipeline, self._plan
        payload, checked = self._plan_payload(
            "started",
            lambda: SharedPayload(
                dryRun=plan.dry_run,
                planOk=plan.ok,
                stepCount=len(plan.steps),
                targetIds=list(pipeline.target_ids[:TRACE_LIST_LIMIT]),
                definitionIdentity=pipeline.definition.identity.to_dict(),
            ),
        )
        channel = self._scope.channel
        definition_id = pipeline.definition.identity.definition_id
        if pipeline.snapshot_traceable and channel and channel.first_snapshot(definition_id):
            snapshot = pipeline.definition.to_dict()
            snapshotted = {**payload, "definitionSnapshot": snapshot}
            observer.emit("pipeline.started", snapshotted, at=self._started)
        elif observer.emit("pipeline.started", payload, payload_checked=checked, at=self._started):
            self._plan_payload_checked("started")

    def _validate_options(self, options: Any) -> bool:
        schema = self._pipeline.options_schema
        if schema is None:
            self._scope.options = options
            return True
        try:
            self._scope.options = validate_boundary(
                schema, options, f"Pipeline {self._pipeline.id} options"
            )
        except Exception as error:
            self._fail(
                to_diagnostic(
                    error,
                    code="TUBELESS_OPTIONS_VALIDATION_FAILED",
                    kind="validation",
                    phase="execution",
                    step_id=None,
                ),
                error,
            )
            return False
        return True

    def _finalize(self, outputs: dict[str, Any]) -> tuple[bool, Any]:
        if self._errors and not self._controls.continue_on_error:
            return False, None
        observed = self._scope.observer is not None
        self._emit("pipeline.finalize.started")
        # The clock times finalization (not the delivery of its first record) for its
        # records alone.
        started = self._scope.now() if observed else 0
        try:
            raise_if_cancelled(self._scope.signal)
            context = ExecutionContext(self._scope, FINALIZE_STEP_ID)
            value = self._pipeline.finalize_outputs(dict(outputs), context)
            if self._pipeline.result_schema is not None:
                value = validate_boundary(
                    self._pipeline.result_schema,
                    value,
                    f"Pipeline {self._pipeline.id} final result",
                )
        except Exception as error:
            record = finalization_error(error, self._scope.signal)
            self._fail(record, error)
            if observed:
                ended = self._scope.now()
                self._emit(
                    "pipeline.finalize.failed",
                    at=ended,
                    durationMs=ended - started,
                    error=trace_error(record),
                )
            return False, None
        if observed:
            ended = self._scope.now()
            self._emit("pipeline.finalize.completed", at=ended, durationMs=ended - started)
        return True, value

    def _complete(
        self,
        finalized: tuple[bool, Any] | None,
        reports: tuple[Any, ...] = (),
        finished: int | None = None,
    ) -> PipelineRun:
        done, value = finalized or (False, None)
        scope = self._scope
        errors = tuple(self._errors)
        result = PipelineRun(
            version=RUN_MODEL_VERSION,
            pipeline_id=self._pipeline.id,
            run_id=scope.run_id,
            correlation_id=scope.correlation_id,
            parent_run_id=scope.parent_run_id,
            definition_identity=self._pipeline.definition.identity,
            dry_run=self._controls.dry_run,
            status=run_status(errors),
            started_at_ms=self._started,
            finished_at_ms=scope.now() if finished is None else finished,
            errors=errors,
            steps=reports,
            finalized=done,
            value=value if done else None,
            exceptions=tuple(self._exceptions),
            usage=NO_USAGE if (meter := scope.extensions.get(USAGE_METER)) is None else meter(),
        )
        if scope.observer is not None:
            self._emit_completed(scope.observer, errors, done, result.finished_at_ms)
        return result

    def _emit_completed(
        self, observer: RunObserver, errors: tuple[Diagnostic, ...], done: bool, finished: int
    ) -> None:
        """`pipeline.completed` of the run that ended at `finished` with `errors`."""
        fields: dict[str, Any] = {"durationMs": finished - self._started}
        if errors:
            fields["error"] = trace_error(errors[0])
        payload = {
            "status": run_status(errors),
            "dryRun": self._controls.dry_run,
            "errorCount": len(errors),
            "finalized": done,
            "stepCount": len(self._plan.steps),
        }
        # The payload is the library's own; an error takes the full check.
        observer.emit(
            "pipeline.completed", payload, payload_checked=not errors, at=finished, **fields
        )


def _completed_report(step: Step, attempt_id: str, started: int, finished: int) -> StepReport:
    return StepReport(
        id=step.id,
        status="completed",
        finished_at_ms=finished,
        name=step.name,
        description=step.description,
        attempt_id=attempt_id,
        started_at_ms=started,
    )


def _planned_payload(step: Any) -> dict[str, Any]:
    limit = TRACE_LIST_LIMIT
    payload: dict[str, Any] = {
        "dependencies": list(step.dependencies[:limit]),
        "optionalDependencies": list(step.optional_dependencies[:limit]),
        "skipAfterFailureOf": list(step.skip_after_failure_of[:limit]),
        "dryRun": step.dry_run,
        "runtimeSkipPossible": step.runtime_skip_possible,
        "selected": step.selected,
        "selectionReasons": [reason.to_dict() for reason in step.selection_reasons[:limit]],
    }
    if step.name is not None:
        payload["name"] = step.name
    if step.description is not None:
        payload["description"] = step.description
    nested = step.nested
    if nested is not None:
        ids = list(nested.pipeline.step_ids)
        payload["nestedPipeline"] = {
            "mode": nested.mode,
            "pipelineId": nested.pipeline.id,
            "stepCount": len(ids),
            "stepIds": ids[:128],
        }
        if nested.max_iterations is not None:
            payload["nestedPipeline"]["maxIterations"] = nested.max_iterations
    return payload

"""One run of a pipeline: plan, options, steps, finalization, and the run report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from tubeless._types import Hook
from tubeless._usage import NO_USAGE
from tubeless.errors import Diagnostic
from tubeless.pipeline._classify import finalization_error, to_diagnostic
from tubeless.pipeline._controls import RunContext, RunControls
from tubeless.pipeline._extensions import USAGE_METER, RunExtension
from tubeless.pipeline._handler_context import ExecutionContext, RunScope, raise_if_cancelled
from tubeless.pipeline._observe import RunObserver
from tubeless.pipeline._plan import PipelinePlan
from tubeless.pipeline._run_result import (
    RUN_MODEL_VERSION,
    ChildValue,
    PipelineRun,
    run_status,
)
from tubeless.pipeline._run_scope import observer_for, scope_for_child, scope_for_root
from tubeless.pipeline._run_step import (
    EMPTY_PAYLOAD,
    Attempt,
    completed_report,
    run_step,
    trace_error,
)
from tubeless.pipeline._schedule import StepScheduler
from tubeless.pipeline._steps import FINALIZE_STEP_ID, Step
from tubeless.schema import validate_boundary
from tubeless.trace import TRACE_LIST_LIMIT
from tubeless.trace.lowlevel import SharedPayload

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline


_UNKNOWN: Any = object()


@overload
def execute_run(
    pipeline: Pipeline,
    options: Any,
    controls: RunControls,
    *,
    context: RunContext | None = ...,
    parent: RunScope | None = ...,
    hooks: tuple[dict[str, Hook], ...] = ...,
    item_key: str | None = ...,
    iteration: dict[str, Any] | None = ...,
    options_checked: bool = ...,
    plan: PipelinePlan | None = ...,
    extensions: Mapping[RunExtension[Any], Any] | None = ...,
    report: Literal[True] = ...,
) -> PipelineRun: ...


@overload
def execute_run(
    pipeline: Pipeline,
    options: Any,
    controls: RunControls,
    *,
    context: RunContext | None = ...,
    parent: RunScope | None = ...,
    hooks: tuple[dict[str, Hook], ...] = ...,
    item_key: str | None = ...,
    iteration: dict[str, Any] | None = ...,
    options_checked: bool = ...,
    plan: PipelinePlan | None = ...,
    extensions: Mapping[RunExtension[Any], Any] | None = ...,
    report: bool,
) -> PipelineRun | ChildValue: ...


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
    report: bool = True,
) -> PipelineRun | ChildValue:
    """Run `pipeline` once: a root run (`context`) or a child run of the run behind `parent`.

    A child takes `hooks` (the run tree's trackers), `item_key` and `iteration`; with
    `options_checked`, its options were already validated by its own schema (used as is);
    `extensions` are values for the child's run beside those it inherits. Without
    `report`, a run whose lone step completes with the result as it is returns that value
    alone (`ChildValue`), without the report it would throw away, and sends the same
    records.
    """
    if parent is None:
        scope, hooks = scope_for_root(pipeline.id, context or RunContext(), controls.dry_run)
    else:
        scope = scope_for_child(
            pipeline.id, parent, item_key, iteration, controls.dry_run, extensions
        )
    scope.observer = observer_for(scope, hooks)
    run = _Run(pipeline, scope, controls, plan or pipeline.plan(controls))
    try:
        return run.execute(options, checked=options_checked, report=report)
    finally:
        if parent is None and scope.services.channel is not None:
            scope.services.channel.held.stop()
            scope.services.channel.settle()
            scope.services.channel.flush()


def _lone_step(pipeline: Pipeline, plan: PipelinePlan, dry_run: bool) -> tuple[Step, bool] | None:
    """The lone step of a plan that runs it, with no skip predicate, if it has one: one
    selected step that a dry run does not skip. Its run needs no scheduler. With it, whether
    its output is the run's result as it is (no finalizer, no result schema). Worked out
    once per plan and kept in its memo (a step runs alone only at a concurrency of 1, which
    the caller checks)."""
    order = pipeline.execution_order
    lone: tuple[Step, bool] | None = None
    if len(order) == 1 and plan.steps[0].selected and order[0].skip is None:
        step = order[0]
        if not (dry_run and step.dry_run == "skip"):
            as_is = pipeline.finalize_step_id == step.id and pipeline.result_schema is None
            lone = (step, as_is)
    plan.memo[_LONE_STEP[dry_run]] = lone
    return lone


_LONE_STEP = {False: "lone step", True: "lone step (dry run)"}


class _Run:
    """The lifecycle of one run around its scheduler."""

    __slots__ = ("_controls", "_errors", "_exceptions", "_pipeline", "_plan", "_scope", "_started")

    def __init__(
        self, pipeline: Pipeline, scope: RunScope, controls: RunControls, plan: PipelinePlan
    ) -> None:
        self._pipeline = pipeline
        self._scope = scope
        self._controls = controls
        self._plan = plan
        self._started = scope.services.now()
        # Tuples: most runs have no error, and an empty tuple is shared, not made per run.
        self._errors: tuple[Diagnostic, ...] = ()
        self._exceptions: tuple[BaseException | None, ...] = ()

    def _emit(
        self, name: str, *, at: int | None = None, duration_ms: int | None = None, error: Any = None
    ) -> None:
        """Emit a finalize record: its payload is always empty, the rest the library's."""
        observer = self._scope.observer
        if observer is not None:
            observer.emit(
                name,
                EMPTY_PAYLOAD,
                payload_checked=error is None,
                at=at,
                duration_ms=duration_ms,
                error=error,
            )

    def _fail(self, error: Diagnostic, exception: BaseException | None = None) -> None:
        self._errors += (error,)
        self._exceptions += (exception,)

    @overload
    def execute(self, options: Any, *, checked: bool = ...) -> PipelineRun: ...

    @overload
    def execute(
        self, options: Any, *, checked: bool = ..., report: bool
    ) -> PipelineRun | ChildValue: ...

    def execute(
        self, options: Any, *, checked: bool = False, report: bool = True
    ) -> PipelineRun | ChildValue:
        scope = self._scope
        observer = scope.observer
        if observer is not None:
            self._emit_started(observer)
        if not self._plan.ok:
            for error in self._plan.errors:
                self._fail(error)
            return self._complete(None)
        if checked or self._pipeline.options_schema is None:
            scope.options = options
        elif not self._validate_options(options):
            return self._complete(None)
        if observer is not None:
            self._emit_planned(observer)
        if self._controls.max_concurrency == 1 and not scope.services.signal.is_set():
            lone: tuple[Step, bool] | None = self._plan.memo.get(
                _LONE_STEP[scope.dry_run], _UNKNOWN
            )
            if lone is _UNKNOWN:
                lone = _lone_step(self._pipeline, self._plan, scope.dry_run)
            if lone is not None:
                step, as_is = lone
                return self._execute_lone(step, as_is, report)
        return self._execute_scheduled()

    def _execute_scheduled(self) -> PipelineRun:
        """Run the plan's steps through the scheduler's loop, then finalize and report."""
        scheduler = StepScheduler(
            self._scope,
            self._pipeline.execution_order,
            self._pipeline.prerequisite_ids,
            self._plan.steps,
            max_concurrency=self._controls.max_concurrency,
            continue_on_error=self._controls.continue_on_error,
        )
        scheduler.run()
        for index in sorted(scheduler.errors):
            self._fail(*scheduler.errors[index])
        reports = tuple([scheduler.reports[step.id] for step in self._plan.steps])
        return self._complete(self._finalize(scheduler.outputs), reports)

    def _execute_lone(self, step: Step, as_is: bool, report: bool) -> PipelineRun | ChildValue:
        """Run the lone step of a run (a tool call) by `run_step`, without the scheduler's
        loop: the reports and records the loop would make.

        An unobserved attempt starts when the run does (no clock reading for a record
        nobody sees). Without `report`, a step whose output is the result `as_is` hands
        back just that (`ChildValue`).
        """
        scope = self._scope
        observer = scope.observer
        attempt = None if observer is not None else Attempt(scope.next_attempt_id(), self._started)
        outcome = run_step(scope, 0, step, {}, attempt, report=report or not as_is)
        finished = outcome.report
        if finished is None and observer is None:
            return ChildValue(outcome.output)
        outputs: dict[str, Any] = {}
        if finished is not None and finished.error is not None:
            self._fail(finished.error, outcome.exception)
        elif as_is and observer is None and not scope.services.signal.is_set():
            # The finalizer would hand the output back as it is: the run ends with the step.
            assert finished is not None
            return self._complete((True, outcome.output), (finished,), finished.finished_at_ms)
        else:
            outputs[step.id] = outcome.output
        finalized = self._finalize(outputs, step.id if as_is else None)
        if finished is None:
            # Observed, for a value: the step's record is sent, its report made only if needed.
            assert observer is not None
            if finalized[0]:
                self._emit_completed(observer, (), True, scope.services.now())
                return ChildValue(finalized[1])
            finished = completed_report(step, outcome)
        return self._complete(finalized, (finished,))

    def _plan_payload(self, key: str, build: Callable[..., Any], *args: Any) -> PlanPayload:
        """A payload every run of this plan sends alike, `build(*args)` once (see
        `PlanPayload`); a module function, so a run that finds it makes no closure."""
        memo = self._plan.memo
        entry: PlanPayload | None = memo.get(key)
        if entry is None:
            entry = memo.setdefault(key, PlanPayload(build(*args)))
        return entry

    def _emit_planned(self, observer: RunObserver) -> None:
        """One `step.planned` per plan step; payloads are built and checked once per plan."""
        steps = self._plan.steps
        planned = self._plan_payload("planned", _planned_payloads, steps)
        checked = planned.checked
        valid = True
        for step, payload in zip(steps, planned.payload, strict=True):
            valid &= observer.emit(
                "step.planned", payload, payload_checked=checked, step_id=step.id
            )
        if valid and not checked:
            planned.checked = True

    def _emit_started(self, observer: RunObserver) -> None:
        """`pipeline.started`; its payload (less any snapshot) is built and checked once a plan."""
        pipeline, plan = self._pipeline, self._plan
        started = self._plan_payload("started", _started_payload, pipeline, plan)
        channel = self._scope.services.channel
        definition_id = pipeline.definition.identity.definition_id
        if pipeline.snapshot_traceable and channel and channel.first_snapshot(definition_id):
            snapshot = pipeline.definition.to_dict()
            snapshotted = {**started.payload, "definitionSnapshot": snapshot}
            observer.emit("pipeline.started", snapshotted, at=self._started)
        elif (
            observer.emit(
                "pipeline.started",
                started.payload,
                payload_checked=started.checked,
                at=self._started,
            )
            and not started.checked
        ):
            started.checked = True

    def _validate_options(self, options: Any) -> bool:
        """Validate `options` by the pipeline's options schema (it has one) for the run."""
        schema = self._pipeline.options_schema
        assert schema is not None
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

    def _finalize(self, outputs: dict[str, Any], as_is: str | None = None) -> tuple[bool, Any]:
        """Finalize the run's `outputs` into its result, with the finalization records.

        `as_is` names the step whose output is the result as it is (`finalize=step`, no
        result schema): when that output was published, the finalizer would hand it back,
        so it is taken without calling it.
        """
        if self._errors and not self._controls.continue_on_error:
            return False, None
        observed = self._scope.observer is not None
        self._emit("pipeline.finalize.started")
        # The clock times finalization (not the delivery of its first record) for its
        # records alone.
        started = self._scope.services.now() if observed else 0
        try:
            raise_if_cancelled(self._scope.services.signal)
            if as_is is not None and as_is in outputs:
                value = outputs[as_is]
            else:
                value = self._finalize_outputs(outputs)
        except Exception as error:
            record = finalization_error(error, self._scope.services.signal)
            self._fail(record, error)
            if observed:
                ended = self._scope.services.now()
                self._emit(
                    "pipeline.finalize.failed",
                    at=ended,
                    duration_ms=ended - started,
                    error=trace_error(record),
                )
            return False, None
        if observed:
            ended = self._scope.services.now()
            self._emit("pipeline.finalize.completed", at=ended, duration_ms=ended - started)
        return True, value

    def _finalize_outputs(self, outputs: dict[str, Any]) -> Any:
        """The pipeline's finalizer on `outputs`, then its result schema if it has one."""
        context = ExecutionContext(self._scope, FINALIZE_STEP_ID)
        value = self._pipeline.finalize_outputs(dict(outputs), context)
        if self._pipeline.result_schema is not None:
            value = validate_boundary(
                self._pipeline.result_schema,
                value,
                f"Pipeline {self._pipeline.id} final result",
            )
        return value

    def _complete(
        self,
        finalized: tuple[bool, Any] | None,
        reports: tuple[Any, ...] = (),
        finished: int | None = None,
    ) -> PipelineRun:
        done, value = finalized or (False, None)
        scope = self._scope
        errors = self._errors
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
            finished_at_ms=scope.services.now() if finished is None else finished,
            errors=errors,
            steps=reports,
            finalized=done,
            value=value if done else None,
            exceptions=self._exceptions,
            usage=NO_USAGE if (meter := scope.extensions.get(USAGE_METER)) is None else meter(),
        )
        if scope.observer is not None:
            self._emit_completed(scope.observer, errors, done, result.finished_at_ms)
        return result

    def _emit_completed(
        self, observer: RunObserver, errors: tuple[Diagnostic, ...], done: bool, finished: int
    ) -> None:
        """`pipeline.completed` of the run that ended at `finished` with `errors`."""
        dry_run = self._controls.dry_run
        payload: dict[str, Any]
        error = None
        if errors:
            error = trace_error(errors[0])
            payload = _completed_payload(errors, dry_run, done, len(self._plan.steps))
        else:
            # Every clean run of this plan sends it alike: built (and encoded) once.
            payload = self._plan_payload(
                _CLEAN_COMPLETED[dry_run, done],
                _clean_completed_payload,
                dry_run,
                done,
                len(self._plan.steps),
            ).payload
        # The payload is the library's own; an error takes the full check.
        observer.emit(
            "pipeline.completed",
            payload,
            payload_checked=not errors,
            at=finished,
            duration_ms=finished - self._started,
            error=error,
        )


class PlanPayload:
    """A payload every run of one plan sends alike, kept in the plan's memo.

    `checked` turns true once a run's record carrying it passed the schema: later runs
    send it without checking it again.
    """

    __slots__ = ("checked", "payload")

    def __init__(self, payload: Any) -> None:
        self.payload = payload
        self.checked = False


_CLEAN_COMPLETED = {
    (dry_run, done): f"completed dryRun={dry_run} finalized={done}"
    for dry_run in (False, True)
    for done in (False, True)
}
"""The plan memo's key of a clean run's `pipeline.completed` payload."""


def _completed_payload(
    errors: tuple[Diagnostic, ...], dry_run: bool, done: bool, step_count: int
) -> dict[str, Any]:
    return {
        "status": run_status(errors),
        "dryRun": dry_run,
        "errorCount": len(errors),
        "finalized": done,
        "stepCount": step_count,
    }


def _clean_completed_payload(dry_run: bool, done: bool, step_count: int) -> SharedPayload:
    """`pipeline.completed`'s payload of every clean run of a plan that ends so."""
    return SharedPayload(_completed_payload((), dry_run, done, step_count))


def _started_payload(pipeline: Pipeline, plan: PipelinePlan) -> SharedPayload:
    """`pipeline.started`'s payload of every run of `plan`, less any snapshot."""
    return SharedPayload(
        dryRun=plan.dry_run,
        planOk=plan.ok,
        stepCount=len(plan.steps),
        targetIds=list(pipeline.target_ids[:TRACE_LIST_LIMIT]),
        definitionIdentity=pipeline.definition.identity.to_dict(),
    )


def _planned_payloads(steps: Sequence[Any]) -> list[SharedPayload]:
    """The `step.planned` payloads of a plan's steps, in order."""
    return [SharedPayload(_planned_payload(step)) for step in steps]


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

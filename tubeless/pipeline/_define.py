"""`define_pipeline` and the compiled `Pipeline`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tubeless._types import ContextLike, ControlsLike, SchemaLike
from tubeless.errors import (
    PipelineCancelledError,
    PipelineDefinitionError,
    PipelineExecutionError,
    PipelineWaitingError,
    TraceRecordError,
    TubelessError,
)
from tubeless.pipeline._controls import RunControls, resolve_context, resolve_controls
from tubeless.pipeline._execute import execute_run
from tubeless.pipeline._graph import (
    cycle_error,
    execution_order,
    pipeline_field_errors,
    step_edges,
    step_errors,
    target_errors,
)
from tubeless.pipeline._handler_context import ExecutionContext
from tubeless.pipeline._identity import DefinitionSnapshot, build_snapshot
from tubeless.pipeline._plan import PipelinePlan, build_plan
from tubeless.pipeline._render import render_mermaid
from tubeless.pipeline._run_result import PipelineRun
from tubeless.pipeline._steps import FinalizeHandler, RequiredOutputs, Step
from tubeless.pipeline._stream import AsyncRunStream, RunStream
from tubeless.schema import Schema, as_schema
from tubeless.trace import TRACE_VERSION
from tubeless.trace.lowlevel import check_record

_PLAN_CACHE_LIMIT = 64

Finalizer = Callable[[dict[str, Any], ExecutionContext], Any]


def _required_finalizer(
    required: Sequence[Step], callback: Finalizer, pipeline_id: str
) -> Finalizer:
    def finalize(outputs: dict[str, Any], context: ExecutionContext) -> Any:
        missing = [step for step in required if step.id not in outputs]
        if missing:
            names = ", ".join(_missing_name(step, dry_run=context.dry_run) for step in missing)
            raise TubelessError(
                f"Pipeline {pipeline_id} finalizer requires outputs that were not published: "
                f"{names}",
                code="TUBELESS_REQUIRED_OUTPUTS_MISSING",
            )
        return callback(outputs, context)

    return finalize


def _missing_name(step: Step, *, dry_run: bool) -> str:
    """A missing output's step id, saying why when a dry run skipped the step."""
    if dry_run and step.dry_run == "skip":
        # An agent without `dry_run=` compiles to such a step: its dry run cannot finish.
        return f"{step.id} (skipped by the dry run: it has no dry-run preview, dry_run=)"
    return step.id


def _compile_finalizer(
    finalize: object, order: Sequence[Step], pipeline_id: str
) -> tuple[Finalizer, tuple[Step, ...] | None]:
    if isinstance(finalize, Step):
        step_id = finalize.id
        return _required_finalizer([finalize], lambda outputs, _: outputs[step_id], pipeline_id), (
            finalize,
        )
    if isinstance(finalize, RequiredOutputs):
        return _required_finalizer(finalize.steps, finalize.callback, pipeline_id), finalize.steps
    if callable(finalize):
        return finalize, None
    if finalize is not None:
        raise TypeError(f"Pipeline {pipeline_id} finalize must be a callable, a step or None")
    last = order[-1].id if order else None
    return (lambda outputs, _: outputs.get(last) if last else None), None


def _step_list(value: object, field: str, pipeline_id: str) -> tuple[Step, ...]:
    if isinstance(value, (str, bytes, Step)) or not isinstance(value, Sequence):
        raise TypeError(f"Pipeline {pipeline_id} {field} must be a list of steps")
    for item in value:
        if not isinstance(item, Step):
            raise TypeError(f"Pipeline {pipeline_id} {field} must contain steps, got {item!r}")
    return tuple(value)


def _snapshot_traceable(pipeline: Pipeline) -> bool:
    """Whether a `pipeline.started` record can carry the snapshot (else: identity alone).

    Ids over 4096 characters, over 4096 steps or 256 KiB of JSON are beyond the limits.
    """
    identity = pipeline.definition.identity.to_dict()
    sample = {
        "version": TRACE_VERSION,
        "name": "pipeline.started",
        "pipelineId": pipeline.id or "pipeline",
        "runId": "run",
        "timestampMs": 0,
        "payload": {
            "dryRun": False,
            "planOk": True,
            "stepCount": 0,
            "targetIds": [],
            "definitionIdentity": identity,
            "definitionSnapshot": pipeline.definition.to_dict(),
        },
    }
    try:
        check_record(sample)
    except TraceRecordError:
        return False
    return True


def _optional_text(value: object, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"Pipeline {field} must be a string")


def define_pipeline(
    *,
    id: str,
    steps: Sequence[Step],
    targets: Sequence[Step] | None = None,
    finalize: FinalizeHandler | Step | RequiredOutputs | None = None,
    result_schema: SchemaLike | None = None,
    name: str | None = None,
    description: str | None = None,
    implementation_version: str | None = None,
) -> Pipeline:
    """Compile a pipeline, checking the whole graph at once.

    Args:
        id: the pipeline's stable id.
        steps: every step, in definition order.
        targets: declared public goals (default: the last step in execution order;
            `[]` declares none).
        finalize: `finalize(outputs, context)`, a step (return its output, which must be
            published), a `require_outputs(...)` wrapper, or `None` (the last step's output).
        result_schema: validates the final result.
        name: display name.
        description: what the pipeline does.
        implementation_version: the author's version of handlers, schemas and prompts;
            changes only `definitionId`.

    Raises:
        PipelineDefinitionError: listing every definition problem with its code.
        TypeError: for arguments of the wrong type.
    """
    if not isinstance(id, str):
        raise TypeError(f"Pipeline id must be a string, got {id!r}")
    return Pipeline(
        id=id,
        steps=_step_list(steps, "steps", id),
        targets=None if targets is None else _step_list(targets, "targets", id),
        finalize=finalize,
        result_schema=None
        if result_schema is None
        else as_schema(result_schema, label=f"Pipeline {id} result"),
        name=_optional_text(name, "name"),
        description=_optional_text(description, "description"),
        implementation_version=_optional_text(implementation_version, "implementation_version"),
    )


class Pipeline:
    """A compiled, immutable pipeline: plan it, run it, draw it."""

    __slots__ = (
        "_finalize",
        "_finalize_step",
        "_order",
        "_plans",
        "_prerequisites",
        "_steps",
        "definition",
        "description",
        "id",
        "implementation_version",
        "name",
        "options_schema",
        "result_schema",
        "snapshot_traceable",
        "step_ids",
        "target_ids",
    )

    def __init__(
        self,
        *,
        id: str,
        steps: tuple[Step, ...],
        targets: tuple[Step, ...] | None,
        finalize: object,
        result_schema: Schema | None,
        name: str | None,
        description: str | None,
        implementation_version: str | None,
    ) -> None:
        errors = pipeline_field_errors(id, name, description, implementation_version)
        errors += step_errors(id, steps)
        order = execution_order(steps) if not errors else None
        required = finalize.steps if isinstance(finalize, RequiredOutputs) else None
        if isinstance(finalize, Step):
            required = (finalize,)
        if not errors and order is None:
            errors.append(cycle_error(id))
        declared = targets if targets is not None else (order[-1:] if order else steps[-1:])
        errors += target_errors(id, steps, declared, required, order is not None)
        if errors:
            raise PipelineDefinitionError(id, errors)
        assert order is not None
        self.id = id
        self.name = name
        self.description = description
        self.implementation_version = implementation_version
        self.options_schema = next((s.options_schema for s in steps if s.options_schema), None)
        self.result_schema = result_schema
        self.step_ids: tuple[str, ...] = tuple(step.id for step in steps)
        self.target_ids: tuple[str, ...] = tuple(step.id for step in declared)
        self._steps = steps
        self._order = tuple(order)
        self._prerequisites = tuple(tuple(dep.id for dep in step_edges(step)) for step in order)
        self._finalize, required_steps = _compile_finalizer(finalize, order, id)
        self._finalize_step = finalize.id if isinstance(finalize, Step) else None
        self._plans: dict[tuple[RunControls, type], PipelinePlan] = {}
        required_ids = None if required_steps is None else [s.id for s in required_steps]
        self.definition: DefinitionSnapshot = build_snapshot(
            order,
            self.target_ids,
            required_ids,
            (self.options_schema is not None, result_schema is not None),
            implementation_version,
        )
        self.snapshot_traceable = _snapshot_traceable(self)

    def __repr__(self) -> str:
        return f"Pipeline({self.id!r})"

    def plan(self, controls: ControlsLike | None = None) -> PipelinePlan:
        """Plan a run without running anything (no handlers, schemas or callbacks).

        Bad control values give a plan with `ok=False` and every planning error.
        """
        resolved = resolve_controls(controls)
        # `True == 1.0 == 1` in Python: the type keeps a rejected `max_concurrency` from
        # sharing a cache entry with a valid one.
        key = (resolved, type(resolved.max_concurrency))
        try:
            cached = self._plans.get(key)
        except TypeError:
            return build_plan(self.id, self._order, self.target_ids, resolved)
        if cached is None:
            cached = build_plan(self.id, self._order, self.target_ids, resolved)
            if len(self._plans) < _PLAN_CACHE_LIMIT:
                self._plans[key] = cached
        return cached

    def run(
        self,
        options: Any = None,
        *,
        controls: ControlsLike | None = None,
        context: ContextLike | None = None,
    ) -> PipelineRun:
        """Run the pipeline and return its report; never raises for run failures.

        Args:
            options: domain options, validated by the options schema (`None` means `{}`).
            controls: `RunControls` or a dict (`dry_run`, `step_ids`, `targets`,
                `continue_on_error`, `max_concurrency`).
            context: `RunContext` or a dict (`signal`, `tracing`, `hooks`, `log`, ...).

        Raises:
            TypeError: for malformed controls or context (unknown keys, wrong types).
        """
        return execute_run(
            self,
            {} if options is None else options,
            resolve_controls(controls),
            context=resolve_context(context),
        )

    def stream(
        self,
        options: Any = None,
        *,
        controls: ControlsLike | None = None,
        context: ContextLike | None = None,
    ) -> RunStream:
        """Run on a worker thread and read its `RunEvent`s as they happen.

        `with pipeline.stream(options) as events: for event in events: ...`; then
        `events.result` is the `PipelineRun`. Leaving the block early cancels the run
        (setting the context's `signal`, or the stream's own) and waits for it. Arguments
        as for `run`; a `tracing` sink in the context still receives every record.
        """
        return RunStream(self, options, controls, context)

    def astream(
        self,
        options: Any = None,
        *,
        controls: ControlsLike | None = None,
        context: ContextLike | None = None,
    ) -> AsyncRunStream:
        """`stream` for asyncio: `async with pipeline.astream(options) as events:`.

        Cancelling the task that reads the events cancels the run.
        """
        return AsyncRunStream(RunStream(self, options, controls, context))

    def run_or_raise(
        self,
        options: Any = None,
        *,
        controls: ControlsLike | None = None,
        context: ContextLike | None = None,
    ) -> Any:
        """Run the pipeline and return its value.

        Raises:
            PipelineCancelledError: when the run ended `cancelled`: a `RunCancelledError`
                and a `PipelineExecutionError` both.
            PipelineWaitingError: when a durable agent of the run stopped for tool calls
                that need approval (`.pending_approvals`); also a `PipelineExecutionError`.
            PipelineExecutionError: when the run did not complete; `.result` is the run and
                `__cause__` the exception behind its first error.
        """
        result = self.run(options, controls=controls, context=context)
        if result.status == "cancelled":
            raise PipelineCancelledError(result) from result.first_exception()
        if result.waiting:
            raise PipelineWaitingError(result) from result.first_exception()
        if result.status != "completed":
            raise PipelineExecutionError(result) from result.first_exception()
        return result.value

    def to_mermaid(self, direction: str = "TD", include_descriptions: bool = False) -> str:
        """Return the static graph as a Mermaid flowchart (one trailing newline)."""
        return render_mermaid(
            self._steps, direction=direction, include_descriptions=include_descriptions
        )

    # -- used by the executor -----------------------------------------------------------

    @property
    def execution_order(self) -> tuple[Step, ...]:
        """The steps in execution order: the order of every plan's steps."""
        return self._order

    @property
    def prerequisite_ids(self) -> tuple[tuple[str, ...], ...]:
        """For each step of `execution_order`, the ids of its distinct prerequisites."""
        return self._prerequisites

    @property
    def finalize_step_id(self) -> str | None:
        """The step whose output is the result as it is (`finalize=step`), if any."""
        return self._finalize_step

    def finalize_outputs(self, outputs: dict[str, Any], context: ExecutionContext) -> Any:
        """Run the compiled finalizer."""
        return self._finalize(outputs, context)

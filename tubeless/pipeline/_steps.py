"""Step definitions: `create_steps`, `Step` and `require_outputs`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless._types import SchemaLike
from tubeless.schema import Schema, as_schema

if TYPE_CHECKING:
    from tubeless.pipeline._context import ExecutionContext, StepContext
    from tubeless.pipeline._nested import NestedPipeline

StepInputs = Mapping[str, Any]
StepHandler = Callable[[StepInputs, "StepContext"], Any]
SkipPredicate = Callable[[StepInputs, "ExecutionContext"], Any]
DryRunPolicy = Literal["skip"] | StepHandler | None
FinalizeHandler = Callable[[dict[str, Any], "ExecutionContext"], Any]

FINALIZE_STEP_ID = "__finalize__"


@dataclasses.dataclass(frozen=True, slots=True)
class StepAnnotation:
    """Extra static data a step carries into plans and definition snapshots (e.g. `agent`)."""

    key: str
    """The field name under which the data appears in plan steps and snapshots."""
    data: Mapping[str, Any]
    """Read-only JSON-safe data; part of the structural fingerprint."""


@dataclasses.dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class Step:
    """A step: both its definition and the token other steps depend on.

    Steps compare and hash by identity, so a dependency is the step object itself.
    """

    id: str
    """Stable machine identity used for dependencies, outputs, selection and traces."""
    run: StepHandler
    """`run(inputs, context)`: the work; its return value is the step's output."""
    name: str | None = None
    """Display label only."""
    description: str | None = None
    """What the step does, in words."""
    depends_on: tuple[Step, ...] = ()
    """Required inputs: their outputs are passed in and must be available."""
    optional_depends_on: tuple[Step, ...] = ()
    """Inputs used only when published."""
    skip_after_failure_of: tuple[Step, ...] = ()
    """Failure gates: supply no data, but skip this step when one failed or was cancelled."""
    dry_run: DryRunPolicy = None
    """`None` runs `run` in dry runs, `"skip"` skips the step, a callable previews it."""
    output_schema: Schema | None = None
    """Validates (and may transform) the published output."""
    skip: SkipPredicate | None = None
    """Policy predicate: falsy runs; a non-blank string or `{"reason", "value"?}` skips."""
    options_scope: object = None
    """The options schema object of the `create_steps` call that made the step."""
    options_schema: Schema | None = None
    """The compiled options schema of that call, if any."""
    nested: NestedPipeline | None = None
    """Static description of the child pipeline a wrapper step runs."""
    annotation: StepAnnotation | None = None
    """Extra static data shown in plans and snapshots."""

    def __repr__(self) -> str:
        return f"Step({self.id!r})"


def _step_tuple(value: Iterable[Step] | None, field: str, step_id: str) -> tuple[Step, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Step)) or not isinstance(value, Iterable):
        raise TypeError(f"Step {step_id!r} {field} must be a list of steps")
    items = tuple(value)
    for item in items:
        if not isinstance(item, Step):
            raise TypeError(f"Step {step_id!r} {field} must contain steps, got {item!r}")
    return items


def _check_dry_run(policy: object, step_id: str) -> DryRunPolicy:
    if policy is None or policy == "skip" or callable(policy):
        return policy
    raise TypeError(f"Step {step_id!r} dry_run must be None, 'skip' or a callable")


def _check_text(value: object, field: str, step_id: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"Step {step_id!r} {field} must be a string")


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
        name: str | None = None,
        description: str | None = None,
        depends_on: Sequence[Step] | None = None,
        optional_depends_on: Sequence[Step] | None = None,
        skip_after_failure_of: Sequence[Step] | None = None,
        dry_run: DryRunPolicy = None,
        output_schema: SchemaLike | None = None,
        skip: SkipPredicate | None = None,
    ) -> Step:
        """Define an ordinary step.

        Raises:
            TypeError: when a field has the wrong type (blank ids and graph mistakes are
                reported by `define_pipeline`).
        """
        if not isinstance(id, str):
            raise TypeError(f"Step id must be a string, got {id!r}")
        if not callable(run):
            raise TypeError(f"Step {id!r} requires a callable run(inputs, context)")
        if skip is not None and not callable(skip):
            raise TypeError(f"Step {id!r} skip must be a callable predicate")
        return self._build(
            id,
            run=run,
            name=_check_text(name, "name", id),
            description=_check_text(description, "description", id),
            depends_on=_step_tuple(depends_on, "depends_on", id),
            optional_depends_on=_step_tuple(optional_depends_on, "optional_depends_on", id),
            skip_after_failure_of=_step_tuple(skip_after_failure_of, "skip_after_failure_of", id),
            dry_run=_check_dry_run(dry_run, id),
            output_schema=(
                None
                if output_schema is None
                else as_schema(output_schema, label=f"Step {id} output")
            ),
            skip=skip,
        )

    __call__ = step

    def _build(self, id: str, **fields: Any) -> Step:
        return Step(id=id, options_scope=self._scope, options_schema=self.options_schema, **fields)

    def from_pipeline(self, id: str, **config: Any) -> Step:
        """Define a step that runs `pipeline` once as a child run (see `from_pipeline`)."""
        from tubeless.pipeline._nested import build_from_pipeline

        return build_from_pipeline(self, id, **config)

    def for_each_pipeline(self, id: str, **config: Any) -> Step:
        """Define a step that runs `pipeline` once per item (see `for_each_pipeline`)."""
        from tubeless.pipeline._nested import build_for_each_pipeline

        return build_for_each_pipeline(self, id, **config)

    def iterate_pipeline(self, id: str, **config: Any) -> Step:
        """Define a step that repeats `pipeline` until a transition finishes it."""
        from tubeless.pipeline._nested import build_iterate_pipeline

        return build_iterate_pipeline(self, id, **config)


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


@dataclasses.dataclass(frozen=True, slots=True)
class RequiredOutputs:
    """A finalizer that needs the outputs of `steps` (made by `require_outputs`)."""

    steps: tuple[Step, ...]
    """The steps whose outputs must have been published."""
    callback: FinalizeHandler
    """`callback(outputs, context)`, called only when every required output exists."""

    def __call__(self, outputs: dict[str, Any], context: ExecutionContext) -> Any:
        return self.callback(outputs, context)


def require_outputs(steps: Sequence[Step], callback: FinalizeHandler) -> RequiredOutputs:
    """Wrap a finalizer so it runs only when every step in `steps` published an output.

    A missing output fails finalization with `TUBELESS_FINALIZATION_FAILED` and the source
    code `TUBELESS_REQUIRED_OUTPUTS_MISSING`; a published `None` counts as present.
    """
    items = _step_tuple(steps, "require_outputs steps", "finalize")
    if not callable(callback):
        raise TypeError("require_outputs requires a callable finalizer")
    return RequiredOutputs(items, callback)


@dataclasses.dataclass(frozen=True, slots=True)
class SkipDecision:
    """A normalised policy-skip decision."""

    reason: str
    value: Any = None


def normalize_skip_decision(decision: object) -> SkipDecision | None:
    """Turn a skip predicate's return value into a decision (`None` means run)."""
    if decision is None or decision is False:
        return None
    if isinstance(decision, str):
        reason = decision.strip()
        return SkipDecision(reason) if reason else None
    if isinstance(decision, Mapping) and isinstance(decision.get("reason"), str):
        reason = decision["reason"].strip()
        return SkipDecision(reason, decision.get("value")) if reason else None
    return None

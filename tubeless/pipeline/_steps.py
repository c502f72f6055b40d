"""Step definitions: `Step`, what a wrapper step runs (`NestedPipeline`) and `require_outputs`.

`create_steps` and its factory live in `_step_factory`, above the child runners they use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless.schema import Schema

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline
    from tubeless.pipeline._handler_context import ExecutionContext, StepContext

StepInputs = Mapping[str, Any]
StepHandler = Callable[[StepInputs, "StepContext"], Any]
SkipPredicate = Callable[[StepInputs, "ExecutionContext"], Any]
DryRunPolicy = Literal["skip"] | StepHandler | None
FinalizeHandler = Callable[[dict[str, Any], "ExecutionContext"], Any]

FINALIZE_STEP_ID = "__finalize__"

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


def step_tuple(value: Iterable[Step] | None, field: str, step_id: str) -> tuple[Step, ...]:
    """`value` as a tuple of steps (`None` is empty); raise `TypeError` naming `field`."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Step)) or not isinstance(value, Iterable):
        raise TypeError(f"Step {step_id!r} {field} must be a list of steps")
    items = tuple(value)
    for item in items:
        if not isinstance(item, Step):
            raise TypeError(f"Step {step_id!r} {field} must contain steps, got {item!r}")
    return items


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
    items = step_tuple(steps, "require_outputs steps", "finalize")
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

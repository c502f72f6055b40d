"""Planning: which steps a run selects and how each would be disposed. Pure: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tubeless._fields import OMIT_NONE, wire, wire_dict
from tubeless._frozen import thaw
from tubeless.errors import Diagnostic
from tubeless.pipeline._controls import RunControls
from tubeless.pipeline._planning_errors import planning_errors
from tubeless.pipeline._render import render_plan
from tubeless.pipeline._steps import Step

if TYPE_CHECKING:
    from tubeless.pipeline._steps import NestedPipeline

SkipReason = Literal[
    "filtered", "dry-run", "unmet-dependency", "failed-dependency", "fail-fast", "policy"
]
DryRunKind = Literal["run", "skip", "custom"]
_NON_SELECTING = frozenset({"not-selected", "optional-only", "outside-target-closure"})


@dataclasses.dataclass(frozen=True, slots=True)
class SelectionReason:
    """Why a step is (or is not) selected."""

    kind: str
    """`all`, `exact`, `not-selected`, `outside-target-closure`, `target`,
    `required-dependency`, `failure-gate` or `optional-only`."""
    target_id: str | None = None
    """The target whose closure reached the step."""
    dependent_id: str | None = None
    """The step that depends on this one along that path."""

    @property
    def selects(self) -> bool:
        """Whether this reason selects the step."""
        return self.kind not in _NON_SELECTING

    def to_dict(self) -> dict[str, str]:
        """Return the wire form `{kind, targetId?, dependentId?}`."""
        out = {"kind": self.kind}
        if self.dependent_id is not None:
            out["dependentId"] = self.dependent_id
        if self.target_id is not None:
            out["targetId"] = self.target_id
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    """One step of a plan, in execution order."""

    id: str
    """The step id."""
    name: str | None = dataclasses.field(metadata=OMIT_NONE)
    """Display label."""
    description: str | None = dataclasses.field(metadata=OMIT_NONE)
    """Description."""
    dependencies: tuple[str, ...]
    """Required dependency ids."""
    optional_dependencies: tuple[str, ...]
    """Optional dependency ids."""
    skip_after_failure_of: tuple[str, ...]
    """Failure-gate ids."""
    dry_run: DryRunKind
    """What a dry run does: `run` the handler, `skip`, or run a `custom` preview."""
    runtime_skip_possible: bool
    """Whether a policy predicate may skip the step at run time."""
    selected: bool
    """Whether the run selects the step."""
    selection_reasons: tuple[SelectionReason, ...]
    """Why it is (not) selected."""
    skip_reason: SkipReason | None = None
    """How it would be skipped, assuming every runnable step completes."""
    nested: NestedPipeline | None = dataclasses.field(
        default=None, metadata=wire(key="nestedPipeline")
    )
    """The child pipeline a wrapper step runs."""
    annotation: tuple[str, Mapping[str, Any]] | None = dataclasses.field(
        default=None, metadata=wire(written=False)
    )
    """Extra static data (key, data), e.g. the agent block."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form (camelCase, absent fields left out)."""
        out = wire_dict(self)
        if self.annotation is not None:
            out[self.annotation[0]] = thaw(self.annotation[1])
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelinePlan:
    """What a run would do: selection and dispositions, or the planning errors."""

    pipeline_id: str
    """The pipeline's id."""
    dry_run: bool
    """Whether the plan is for a dry run."""
    ok: bool
    """Whether planning succeeded."""
    errors: tuple[Diagnostic, ...]
    """Every planning error (then `steps` is empty)."""
    steps: tuple[PlanStep, ...]
    """One entry per step, in execution order."""
    memo: dict[str, Any] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False, metadata=wire(written=False)
    )
    """Internal: what runs of this plan build once and reuse (e.g. `step.planned` payloads)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{pipelineId, dryRun, ok, errors, steps}`."""
        return wire_dict(self)

    def render(self, *, explain: bool = True) -> str:
        """Return the human rendering (see `render_plan`)."""
        return render_plan(self, explain=explain)


Reasons = dict[str, list[SelectionReason]]


def _add_reason(reasons: Reasons, step_id: str, reason: SelectionReason) -> None:
    entry = reasons.setdefault(step_id, [])
    if reason not in entry:
        entry.append(reason)


def _prerequisites(step: Step, target: Step, reasons: Reasons) -> Iterator[Step]:
    """Record why `step`'s prerequisites are reached, yielding those to expand."""
    for dep in step.depends_on:
        _add_reason(reasons, dep.id, SelectionReason("required-dependency", target.id, step.id))
        yield dep
    for dep in step.skip_after_failure_of:
        _add_reason(reasons, dep.id, SelectionReason("failure-gate", target.id, step.id))
        yield dep
    for dep in step.optional_depends_on:
        _add_reason(reasons, dep.id, SelectionReason("optional-only", target.id, step.id))


def _target_reasons(targets: Sequence[Step]) -> Reasons:
    reasons: Reasons = {}
    for target in targets:
        _add_reason(reasons, target.id, SelectionReason("target", target_id=target.id))
        # Depth-first, as the TypeScript tubeless walks it, so a shared prerequisite lists
        # its paths in the same order; a stack of generators instead of recursion keeps long chains
        # clear of the recursion limit.
        expanded = {target}
        walks = [_prerequisites(target, target, reasons)]
        while walks:
            dep = next(walks[-1], None)
            if dep is None:
                walks.pop()
            elif dep not in expanded:
                expanded.add(dep)
                walks.append(_prerequisites(dep, target, reasons))
    return reasons


def _selection(
    order: Sequence[Step], controls: RunControls
) -> dict[str, tuple[SelectionReason, ...]]:
    if controls.step_ids is not None:
        chosen = set(controls.step_ids)
        return {
            step.id: (SelectionReason("exact" if step.id in chosen else "not-selected"),)
            for step in order
        }
    if controls.targets is None:
        every = (SelectionReason("all"),)
        return {step.id: every for step in order}
    by_id = {step.id: step for step in order}
    reasons = _target_reasons([by_id[target] for target in controls.targets])
    out = {}
    for step in order:
        found = reasons.get(step.id, [])
        selecting = tuple(reason for reason in found if reason.selects)
        if selecting:
            out[step.id] = selecting
        else:
            out[step.id] = tuple(found) or (SelectionReason("outside-target-closure"),)
    return out


def dry_run_kind(step: Step) -> DryRunKind:
    """How a dry run treats `step`."""
    if step.dry_run == "skip":
        return "skip"
    return "run" if step.dry_run is None else "custom"


@dataclasses.dataclass(frozen=True, slots=True)
class Disposition:
    """The outcome of the disposition ladder for one step."""

    skip_reason: SkipReason | None = None
    dependency_id: str | None = None


RUN = Disposition()


def dependency_met(status: str | None, reason: str | None) -> bool:
    """A required dependency is met when completed, or skipped by its own policy."""
    return status == "completed" or (status == "skipped" and reason == "policy")


def decide_disposition(
    step: Step,
    selected: bool,
    dry_run: bool,
    outcome: Callable[[str], tuple[str | None, str | None]],
) -> Disposition:
    """Apply the ladder: filtered, failed gate, unmet dependency, dry-run skip, else run.

    `outcome(step_id)` returns the `(status, skip reason)` of a prerequisite.
    """
    if not selected:
        return Disposition("filtered")
    for gate in step.skip_after_failure_of:
        if outcome(gate.id)[0] in ("failed", "cancelled"):
            return Disposition("failed-dependency", gate.id)
    for dep in step.depends_on:
        if not dependency_met(*outcome(dep.id)):
            return Disposition("unmet-dependency", dep.id)
    if dry_run and step.dry_run == "skip":
        return Disposition("dry-run")
    return RUN


def build_plan(
    pipeline_id: str, order: Sequence[Step], declared_targets: Sequence[str], controls: RunControls
) -> PipelinePlan:
    """Plan a run of the steps in `order` (execution order) under `controls`."""
    known = {step.id for step in order}
    errors = planning_errors(pipeline_id, controls, known, set(declared_targets))
    if errors:
        return PipelinePlan(
            pipeline_id=pipeline_id,
            dry_run=controls.dry_run,
            ok=False,
            errors=tuple(errors),
            steps=(),
        )
    reasons = _selection(order, controls)
    simulated: dict[str, tuple[str, str | None]] = {}
    plan_steps = []
    for step in order:
        selected = any(reason.selects for reason in reasons[step.id])
        disposition = decide_disposition(
            step, selected, controls.dry_run, lambda i: simulated.get(i, (None, None))
        )
        skip = disposition.skip_reason
        simulated[step.id] = ("skipped", skip) if skip else ("completed", None)
        plan_steps.append(_plan_step(step, selected, reasons[step.id], skip))
    return PipelinePlan(
        pipeline_id=pipeline_id,
        dry_run=controls.dry_run,
        ok=True,
        errors=(),
        steps=tuple(plan_steps),
    )


def _plan_step(
    step: Step, selected: bool, reasons: tuple[SelectionReason, ...], skip: SkipReason | None
) -> PlanStep:
    annotation = step.annotation
    return PlanStep(
        id=step.id,
        name=step.name,
        description=step.description,
        dependencies=tuple(dep.id for dep in step.depends_on),
        optional_dependencies=tuple(dep.id for dep in step.optional_depends_on),
        skip_after_failure_of=tuple(dep.id for dep in step.skip_after_failure_of),
        dry_run=dry_run_kind(step),
        runtime_skip_possible=step.skip is not None,
        selected=selected,
        selection_reasons=reasons,
        skip_reason=skip,
        nested=step.nested,
        annotation=None if annotation is None else (annotation.key, annotation.data),
    )

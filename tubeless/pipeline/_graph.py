"""The static step graph: edges, execution order and the eager definition checks."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence

from tubeless._diagnostics import coded_diagnostic
from tubeless.errors import Diagnostic
from tubeless.pipeline._steps import FINALIZE_STEP_ID, Step


def step_edges(step: Step) -> tuple[Step, ...]:
    """Every distinct prerequisite of `step` (required, optional and failure gates)."""
    seen: dict[Step, None] = {}
    for dep in (*step.depends_on, *step.optional_depends_on, *step.skip_after_failure_of):
        seen.setdefault(dep, None)
    return tuple(seen)


def execution_order(steps: Sequence[Step]) -> list[Step] | None:
    """Order `steps` so prerequisites come first, ties broken by definition order.

    Returns `None` when the graph has a cycle. An already ordered list comes back unchanged.
    """
    index = {step: position for position, step in enumerate(steps)}
    remaining = {step: len(step_edges(step)) for step in steps}
    dependents: dict[Step, list[Step]] = {step: [] for step in steps}
    for step in steps:
        for dep in step_edges(step):
            dependents.setdefault(dep, []).append(step)
    ready = [index[step] for step in steps if remaining[step] == 0]
    heapq.heapify(ready)
    ordered: list[Step] = []
    while ready:
        step = steps[heapq.heappop(ready)]
        ordered.append(step)
        for dependent in dependents[step]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                heapq.heappush(ready, index[dependent])
    return ordered if len(ordered) == len(steps) else None


def target_closure(targets: Iterable[Step]) -> set[Step]:
    """Targets plus, recursively, their required dependencies and failure gates."""
    selected: set[Step] = set()
    stack = list(targets)
    while stack:
        step = stack.pop()
        if step in selected:
            continue
        selected.add(step)
        stack.extend(step.depends_on)
        stack.extend(step.skip_after_failure_of)
    return selected


def repeated_values(values: Iterable[str]) -> list[str]:
    """The values that occur more than once, each once, in order of first occurrence."""
    return [value for value, count in Counter(values).items() if count > 1]


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def pipeline_field_errors(
    pipeline_id: str, name: str | None, description: str | None, version: str | None
) -> list[Diagnostic]:
    """Check the pipeline's own id, name, description and implementation version."""
    errors = []
    if not pipeline_id.strip():
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_PIPELINE_ID_BLANK", "Pipeline id must not be blank"
            )
        )
    if _blank(name):
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_PIPELINE_NAME_BLANK",
                f"Pipeline {pipeline_id} has a blank display name",
            )
        )
    if _blank(description):
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_PIPELINE_DESCRIPTION_BLANK",
                f"Pipeline {pipeline_id} has a blank description",
            )
        )
    if version is not None and (len(version) > 256 or not version.strip()):
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_IMPLEMENTATION_VERSION_INVALID",
                f"Pipeline {pipeline_id} implementation_version must be 1-256 characters "
                "and not blank",
            )
        )
    return errors


def _step_own_errors(pipeline_id: str, step: Step) -> list[Diagnostic]:
    errors = []
    if not step.id.strip():
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_STEP_ID_BLANK",
                f"Pipeline {pipeline_id} has a step with a blank id",
                step.id,
            )
        )
    if step.id == FINALIZE_STEP_ID:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_STEP_ID_RESERVED",
                f"Pipeline {pipeline_id} uses reserved step id {FINALIZE_STEP_ID}",
                step.id,
            )
        )
    if _blank(step.name):
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_STEP_NAME_BLANK",
                f"Pipeline {pipeline_id} step {step.id} has a blank display name",
                step.id,
            )
        )
    return errors


def _step_dependency_errors(pipeline_id: str, step: Step) -> list[Diagnostic]:
    errors = []
    groups = (
        ("depends_on", step.depends_on),
        ("optional_depends_on", step.optional_depends_on),
        ("skip_after_failure_of", step.skip_after_failure_of),
    )
    for field, deps in groups:
        repeated = repeated_values(dep.id for dep in deps)
        if repeated:
            errors.append(
                coded_diagnostic(
                    "TUBELESS_DEFINITION_DEPENDENCY_DUPLICATE",
                    f"Pipeline {pipeline_id} step {step.id} repeats {field}: {', '.join(repeated)}",
                    step.id,
                )
            )
        if step in deps:
            errors.append(
                coded_diagnostic(
                    "TUBELESS_DEFINITION_DEPENDENCY_SELF_REFERENCE",
                    f"Pipeline {pipeline_id} step {step.id} cannot reference itself in {field}",
                    step.id,
                )
            )
    both = [dep.id for dep in step.optional_depends_on if dep in step.depends_on]
    if both:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_DEPENDENCY_CONTRADICTORY",
                f"Pipeline {pipeline_id} step {step.id} declares dependencies as both required "
                f"and optional: {', '.join(both)}",
                step.id,
            )
        )
    return errors


def step_errors(pipeline_id: str, steps: Sequence[Step]) -> list[Diagnostic]:
    """Check step ids, names, dependency lists, membership and options-schema scopes."""
    errors: list[Diagnostic] = []
    repeated = repeated_values(step.id for step in steps)
    if repeated:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_STEP_IDS_DUPLICATE",
                f"Pipeline {pipeline_id} has duplicate step ids: {', '.join(repeated)}",
            )
        )
    scopes = {id(step.options_scope) for step in steps}
    if len(scopes) > 1 and any(step.options_scope is not None for step in steps):
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_OPTIONS_SCHEMA_CONFLICT",
                f"Pipeline {pipeline_id} mixes steps from different options-schema scopes",
            )
        )
    for step in steps:
        errors.extend(_step_own_errors(pipeline_id, step))
        errors.extend(_step_dependency_errors(pipeline_id, step))
    known = set(steps)
    missing = [
        f"{step.id} -> {dep.id}" for step in steps for dep in step_edges(step) if dep not in known
    ]
    if missing:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_DEPENDENCY_NOT_IN_STEPS",
                f"Pipeline {pipeline_id} references step(s) not included in its steps list: "
                f"{', '.join(missing)}",
            )
        )
    return errors


def target_errors(
    pipeline_id: str,
    steps: Sequence[Step],
    targets: Sequence[Step],
    required: Sequence[Step] | None,
    graph_ok: bool,
) -> list[Diagnostic]:
    """Check declared targets and the finalizer's required outputs against the steps."""
    errors = []
    known = set(steps)
    repeated = repeated_values(target.id for target in targets)
    if repeated:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_TARGETS_DUPLICATE",
                f"Pipeline {pipeline_id} declares duplicate targets: {', '.join(repeated)}",
            )
        )
    missing_targets = [target.id for target in targets if target not in known]
    if missing_targets:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_TARGET_NOT_IN_STEPS",
                f"Pipeline {pipeline_id} declares target step(s) not included in its steps "
                f"list: {', '.join(missing_targets)}",
            )
        )
    missing_required = [step.id for step in required or () if step not in known]
    if missing_required:
        errors.append(
            coded_diagnostic(
                "TUBELESS_DEFINITION_FINALIZER_STEP_NOT_IN_STEPS",
                f"Pipeline {pipeline_id} requires finalizer output from step(s) not included "
                f"in its steps list: {', '.join(missing_required)}",
            )
        )
    if required and graph_ok and not missing_targets and not missing_required:
        errors.extend(_finalizer_mismatches(pipeline_id, targets, required))
    return errors


def _finalizer_mismatches(
    pipeline_id: str, targets: Sequence[Step], required: Sequence[Step]
) -> list[Diagnostic]:
    errors = []
    for target in targets:
        closure = target_closure([target])
        unmet = [step.id for step in required if step not in closure]
        if unmet:
            errors.append(
                coded_diagnostic(
                    "TUBELESS_DEFINITION_TARGET_FINALIZER_MISMATCH",
                    f"Pipeline {pipeline_id} target {target.id} cannot satisfy required "
                    f"finalizer output(s): {', '.join(unmet)}",
                    target.id,
                )
            )
    return errors


def cycle_error(pipeline_id: str) -> Diagnostic:
    """The error for a dependency cycle."""
    return coded_diagnostic(
        "TUBELESS_DEFINITION_DEPENDENCY_CYCLE", f"Pipeline {pipeline_id} has a dependency cycle"
    )

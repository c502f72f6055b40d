"""Pure text renderings of plans and graphs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tubeless.errors import format_diagnostic
from tubeless.pipeline._graph import step_edges
from tubeless.pipeline._steps import Step

if TYPE_CHECKING:
    from tubeless.pipeline._plan import PipelinePlan, PlanStep, SelectionReason

MERMAID_DIRECTIONS = ("BT", "LR", "RL", "TB", "TD")

_REASON_TEXT = {
    "exact": "exact selection",
    "outside-target-closure": "outside target closure",
    "not-selected": "not selected",
}
_NESTED_TEXT = {"single": "child", "for-each": "fan-out"}


def _describe_reason(reason: SelectionReason) -> str | None:
    kind = reason.kind
    if kind == "all":
        return None
    if kind == "target":
        return f"target {reason.target_id}"
    if kind == "required-dependency":
        return f"required by {reason.dependent_id} for target {reason.target_id}"
    if kind == "failure-gate":
        return f"failure gate for {reason.dependent_id} for target {reason.target_id}"
    if kind == "optional-only":
        return f"optional-only input to {reason.dependent_id} for target {reason.target_id}"
    return _REASON_TEXT.get(kind, kind)


def _describe_nested(step: PlanStep) -> str:
    nested = step.nested
    if nested is None:
        return ""
    if nested.mode == "iterate":
        label = f"iteration (at most {nested.max_iterations})"
    else:
        label = _NESTED_TEXT[nested.mode]
    count = len(nested.pipeline.step_ids)
    return f" -> {label} pipeline {nested.pipeline.id} ({count} declared steps)"


def _annotation_lines(step: PlanStep) -> list[str]:
    """The lines a step's annotation renders under the step (its data's `plan_lines()`,
    when the layer that made it gave it one), else none."""
    if step.annotation is None:
        return []
    plan_lines = getattr(step.annotation[1], "plan_lines", None)
    return list(plan_lines()) if callable(plan_lines) else []


def _render_step(step: PlanStep, explain: bool) -> str:
    display = f"{step.name} [{step.id}]" if step.name else step.id
    notes: list[str] = []
    if explain:
        if step.skip_reason is None and step.runtime_skip_possible:
            notes.append("policy may skip")
        notes += [text for text in map(_describe_reason, step.selection_reasons) if text]
    disposition = f"skip: {step.skip_reason}" if step.skip_reason else "run"
    if notes:
        disposition += f" ({'; '.join(notes)})"
    description = f" - {step.description}" if step.description else ""
    return f"  - {display}: {disposition}{_describe_nested(step)}{description}"


def render_plan(plan: PipelinePlan, *, explain: bool = True) -> str:
    """Render a plan for people: the text `tubeless plan` prints (no trailing newline).

    Args:
        plan: the plan to render.
        explain: add selection reasons, "policy may skip" notes and, under a step with an
            annotation that renders itself, its lines (an agent step's limits and tools).
    """
    lines = [
        f"Pipeline {plan.pipeline_id}: plan (ok={_flag(plan.ok)}, "
        f"dryRun={_flag(plan.dry_run)}, steps={len(plan.steps)})"
    ]
    for step in plan.steps:
        lines.append(_render_step(step, explain))
        if explain:
            lines += _annotation_lines(step)
    lines += [f"  ! {format_diagnostic(error)}" for error in plan.errors]
    return "\n".join(lines)


def _flag(value: bool) -> str:
    return "true" if value else "false"


_CONTROL = re.compile(r"\r\n?|\n|[\x00-\x1f\x7f-\x9f]")
_ESCAPES = str.maketrans({"#": "#35;", "&": "#38;", '"': "#quot;", "<": "#60;", ">": "#62;"})


def escape_mermaid_label(text: str) -> str:
    """Make `text` safe inside a quoted Mermaid label."""
    return _CONTROL.sub(" ", text).translate(_ESCAPES)


def _edge(source: str, target: str, required: bool, optional: bool, gate: bool) -> str:
    if required:
        return f"  {source} --> {target}"
    if optional and gate:
        return f"  {source} -. optional input + failure gate .-> {target}"
    if optional:
        return f"  {source} -. optional input .-> {target}"
    return f"  {source} -. failure gate .-> {target}"


def render_mermaid(
    steps: Sequence[Step], *, direction: str = "TD", include_descriptions: bool = False
) -> str:
    """Render the static graph as a Mermaid flowchart ending in one newline.

    Node ids are `step<index>` in definition order, so user text never becomes syntax.

    Raises:
        ValueError: when `direction` is not one of BT, LR, RL, TB, TD.
    """
    if direction not in MERMAID_DIRECTIONS:
        raise ValueError(f"Invalid Mermaid flowchart direction: {direction}")
    node = {step: f"step{index}" for index, step in enumerate(steps)}
    lines = [f"flowchart {direction}"]
    for step in steps:
        label = step.name or step.id
        if include_descriptions and step.description:
            label = f"{label} — {step.description}"
        label += _iteration_bound(step)
        lines.append(f'  {node[step]}["{escape_mermaid_label(label)}"]')
    edges = []
    for step in steps:
        for dep in step_edges(step):
            edges.append(
                _edge(
                    node[dep],
                    node[step],
                    dep in step.depends_on,
                    dep in step.optional_depends_on,
                    dep in step.skip_after_failure_of,
                )
            )
    if edges:
        lines += ["", *edges]
    return "\n".join(lines) + "\n"


def _iteration_bound(step: Step) -> str:
    nested = step.nested
    if nested is not None and nested.mode == "iterate":
        return f" (at most {nested.max_iterations} iterations)"
    return ""

"""The interactive reporter's picture of a run, and the frame rows drawn from it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tubeless.progress._frame import Row
from tubeless.progress._record_fields import (
    RunFacts,
    StepLabel,
    elapsed_ms,
    error_message,
    field_number,
    field_text,
    has_visible_progress,
    payload,
    run_facts,
    skip_detail,
    step_label,
    summary_line,
)
from tubeless.progress._terminal import (
    Theme,
    format_count,
    format_duration,
    js_round,
    sanitize_terminal_text,
)

__all__ = ["MAX_DETAIL_DEPTH", "RunView", "StepView", "frame_rows"]

MAX_DETAIL_DEPTH = 32
"""Detail rows deeper than this are drawn at this depth."""

_STEP_SETTLED = ("step.complete", "step.failed", "step.cancelled", "step.skipped")


@dataclasses.dataclass(slots=True)
class StepView:
    """What the frame shows for one step."""

    label: StepLabel
    """The step's display name and description."""
    status: str = "planned"
    """`planned`, `running`, `completed`, `failed`, `cancelled` or `skipped`."""
    started_at: float | None = None
    """When the step started, by the reporter's clock (seconds)."""
    started_ms: float | None = None
    """When the step started, by the record's `timestampMs`."""
    progress: Mapping[str, Any] | None = None
    """The last progress snapshot that said anything."""
    duration_ms: float = 0.0
    """How long a completed step ran."""
    note: str = ""
    """The error message of a failed or cancelled step, or why it was skipped."""


@dataclasses.dataclass(slots=True)
class RunView:
    """What the frame shows for one run, updated record by record."""

    facts: RunFacts
    """What `pipeline.started` said."""
    steps: dict[str, StepView] = dataclasses.field(default_factory=dict)
    """Every planned step, in plan order."""
    finalize: str = "idle"
    """`idle`, `running`, `completed` or `failed`."""
    finalize_ms: float = 0.0
    """How long finalization took."""
    finalize_note: str = ""
    """Why finalization failed."""
    summary: str | None = None
    """The closing line, once `pipeline.completed` arrived."""
    succeeded: bool = False
    """Whether the run completed."""

    @classmethod
    def start(cls, record: Mapping[str, Any]) -> RunView:
        """A view of the run that a `pipeline.started` record announces."""
        return cls(facts=run_facts(record))

    def apply(self, record: Mapping[str, Any], now: float) -> bool:
        """Update the view from one record.

        Returns:
            True when the record only moved a running step's progress (repaints of those
            may be coalesced).
        """
        name = record.get("name")
        if name == "step.running":
            return self._running(record, now)
        if name in _STEP_SETTLED or name == "step.planned":
            self._step_event(str(name), record)
        elif name == "pipeline.finalize.started":
            self.finalize = "running"
        elif name == "pipeline.finalize.completed":
            self.finalize, self.finalize_ms = "completed", field_number(record, "durationMs") or 0
        elif name == "pipeline.finalize.failed":
            self.finalize, self.finalize_note = "failed", error_message(record)
        elif name == "pipeline.completed":
            self.summary, self.succeeded = summary_line(record, self.facts.started_ms)
        return False

    def _step(self, record: Mapping[str, Any]) -> StepView:
        step_id = field_text(record, "stepId") or "?"
        view = self.steps.get(step_id)
        if view is None:
            view = self.steps[step_id] = StepView(StepLabel(sanitize_terminal_text(step_id), ""))
        return view

    def _running(self, record: Mapping[str, Any], now: float) -> bool:
        step = self._step(record)
        progress_only = step.status == "running"
        if not progress_only:
            step.status, step.started_at = "running", now
            step.started_ms = field_number(record, "timestampMs")
        progress = payload(record).get("progress")
        if isinstance(progress, Mapping) and has_visible_progress(progress):
            step.progress = progress
        return progress_only

    def _step_event(self, name: str, record: Mapping[str, Any]) -> None:
        if name == "step.planned":
            self.steps[field_text(record, "stepId") or "?"] = StepView(step_label(record))
            return
        step = self._step(record)
        if name == "step.complete":
            step.status, step.duration_ms = "completed", elapsed_ms(record, step.started_ms)
        elif name in ("step.failed", "step.cancelled"):
            step.status, step.note = name[len("step.") :], error_message(record)
        elif name == "step.skipped":
            step.status, step.note = "skipped", skip_detail(record, prefer_dependency=False)


def _progress_text(progress: Mapping[str, Any], width: int, theme: Theme) -> str:
    message = field_text(progress, "message")
    suffix = f" {sanitize_terminal_text(message)}" if message else ""
    completed = field_number(progress, "completed") or 0
    total = field_number(progress, "total")
    if total is None or total <= 0:
        return f"{format_count(completed)}{suffix}"
    ratio = max(0.0, min(1.0, completed / total))
    filled = js_round(ratio * width)
    full, empty = ("█", "░") if theme.unicode else ("=", "-")
    bar = full * filled + empty * (width - filled)
    return (
        f"[{bar}] {js_round(ratio * 100)}% {format_count(completed)}/{format_count(total)}{suffix}"
    )


def _detail_row(
    detail: Mapping[str, Any], parent: str, theme: Theme, spinner: str, width: int
) -> Row:
    status = field_text(detail, "status") or "running"
    if status == "running" and parent != "running":
        status = parent
    symbols = theme.symbols
    settled = {
        "completed": theme.paint("complete", symbols.complete),
        "failed": theme.paint("fail", symbols.fail),
        "skipped": theme.paint("skip", symbols.skip),
        "cancelled": theme.paint("skip", symbols.skip),
        "pending": theme.paint("description", symbols.pending),
    }.get(status)
    live = settled is None
    symbol = theme.paint("start", spinner) if settled is None else settled
    title = sanitize_terminal_text(field_text(detail, "name") or field_text(detail, "id") or "?")
    label = sanitize_terminal_text(field_text(detail, "label") or "")
    if status == "cancelled":
        label = f"cancelled: {label}" if label else "cancelled"
    body = f"{title} {theme.paint('description', label)}" if label else title
    depth = int(max(0, min(MAX_DETAIL_DEPTH, field_number(detail, "depth") or 0)))
    completed = field_number(detail, "completed")
    progress = ""
    if completed is not None:
        progress = " " + _progress_text(
            {"completed": completed, "total": detail.get("total")}, width, theme
        )
    return Row(f"{'  ' * (depth + 2)}{symbol} {body}{progress}", live=live)


def _step_row(step: StepView, theme: Theme, spinner: str, now: float, width: int) -> Row:
    symbols, name = theme.symbols, step.label.name
    if step.status == "running":
        progress = f" {_progress_text(step.progress, width, theme)}" if step.progress else ""
        elapsed = ""
        if step.started_at is not None:
            elapsed = " " + theme.paint(
                "description", format_duration((now - step.started_at) * 1000)
            )
        return Row(f"  {theme.paint('start', spinner)} {name}{progress}{elapsed}", live=True)
    if step.status == "completed":
        duration = f"({format_duration(step.duration_ms)})"
        text = f"{theme.paint('complete', symbols.complete)} {name} "
        return Row(f"  {text}{theme.paint('description', duration)}")
    if step.status == "failed":
        return Row(f"  {theme.paint('fail', symbols.fail)} {name}: {step.note}")
    if step.status == "cancelled":
        return Row(f"  {theme.paint('skip', symbols.skip)} {name}: cancelled: {step.note}")
    if step.status == "skipped":
        note = theme.paint("description", f"({step.note})")
        return Row(f"  {theme.paint('skip', symbols.skip)} {name} {note}")
    pending = theme.paint("description", symbols.pending)
    return Row(f"  {pending} {name} {theme.paint('description', 'waiting')}")


def _finalize_row(view: RunView, theme: Theme, spinner: str) -> Row | None:
    symbols = theme.symbols
    if view.finalize == "running":
        return Row(f"  {theme.paint('start', spinner)} finalize", live=True)
    if view.finalize == "completed":
        duration = theme.paint("description", f"({format_duration(view.finalize_ms)})")
        return Row(f"  {theme.paint('complete', symbols.complete)} finalize {duration}")
    if view.finalize == "failed":
        return Row(f"  {theme.paint('fail', symbols.fail)} finalize: {view.finalize_note}")
    return None


def _header(view: RunView, theme: Theme) -> str:
    if view.summary is not None:
        return theme.paint("complete" if view.succeeded else "fail", view.summary)
    facts = view.facts
    return theme.paint(
        "pipeline",
        f"Pipeline {facts.pipeline_id} ({facts.step_count} steps, dryRun={facts.dry_run})",
    )


def frame_rows(
    view: RunView, theme: Theme, *, spinner: str, now: float, bar_width: int
) -> list[Row]:
    """Draw the whole frame: header, one row per step with its detail rows, finalize.

    Args:
        view: the run to draw.
        theme: symbols and colours.
        spinner: the spinner character of this repaint.
        now: the reporter's clock now, for elapsed times.
        bar_width: cells of a progress bar.
    """
    rows = [Row(_header(view, theme))]
    for step in view.steps.values():
        rows.append(_step_row(step, theme, spinner, now, bar_width))
        details = step.progress.get("details") if step.progress else None
        for detail in details if isinstance(details, list) else ():
            if isinstance(detail, Mapping):
                rows.append(_detail_row(detail, step.status, theme, spinner, bar_width))
    finalize = _finalize_row(view, theme, spinner)
    if finalize is not None:
        rows.append(finalize)
    return rows

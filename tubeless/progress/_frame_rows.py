"""The rows of the live frame, drawn from the run's fold of trace records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tubeless.progress._frame import Row
from tubeless.progress._record_fields import (
    elapsed_ms,
    error_message,
    field_number,
    field_text,
    has_visible_progress,
    is_iteration,
    run_facts,
    skip_detail,
    summary_line,
    waits_for_approval,
)
from tubeless.progress._terminal import (
    Theme,
    format_count,
    format_duration,
    js_round,
    sanitize_terminal_text,
)
from tubeless.trace import RunFold, StepFold

__all__ = ["MAX_DETAIL_DEPTH", "failed_calls", "frame_rows", "summary"]

MAX_DETAIL_DEPTH = 32
"""Detail rows deeper than this are drawn at this depth."""


def summary(fold: RunFold) -> tuple[str, bool] | None:
    """The closing line and whether the run completed, once `pipeline.completed` arrived."""
    completed, started = fold.completed, fold.started
    if completed is None:
        return None
    return summary_line(
        completed,
        None if started is None else field_number(started, "timestampMs"),
        failed_calls(fold),
    )


def failed_calls(fold: RunFold) -> int:
    """Failed tool calls (and items) the run's steps showed in their progress."""
    return sum(step.failed_detail_count for step in fold.steps.values())


def _visible_progress(step: StepFold) -> Mapping[str, Any] | None:
    progress = step.progress
    return progress if progress is not None and has_visible_progress(progress) else None


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


def _step_row(
    step: StepFold, theme: Theme, spinner: str, elapsed_s: float | None, width: int
) -> Row:
    symbols = theme.symbols
    name = sanitize_terminal_text(step.name or step.id)
    if step.status == "running":
        progress = _visible_progress(step)
        bar = f" {_progress_text(progress, width, theme)}" if progress else ""
        if progress and is_iteration(step):
            # Iterations count against a limit, which the message states: no percentage.
            bar = f" {sanitize_terminal_text(field_text(progress, 'message') or '')}".rstrip()
        elapsed = ""
        if elapsed_s is not None:
            elapsed = " " + theme.paint("description", format_duration(elapsed_s * 1000))
        return Row(f"  {theme.paint('start', spinner)} {name}{bar}{elapsed}", live=True)
    ended = step.ended or {}
    if step.status == "completed":
        duration = f"({format_duration(elapsed_ms(ended, step.started_at_ms))})"
        text = f"{theme.paint('complete', symbols.complete)} {name} "
        return Row(f"  {text}{theme.paint('description', duration)}")
    if step.status == "failed":
        symbol = (
            theme.paint("skip", symbols.pending)
            if waits_for_approval(ended)
            else theme.paint("fail", symbols.fail)
        )
        return Row(f"  {symbol} {name}: {error_message(ended)}")
    if step.status == "cancelled":
        note = error_message(ended)
        return Row(f"  {theme.paint('skip', symbols.skip)} {name}: cancelled: {note}")
    if step.status == "skipped":
        note = theme.paint("description", f"({skip_detail(ended, prefer_dependency=False)})")
        return Row(f"  {theme.paint('skip', symbols.skip)} {name} {note}")
    pending = theme.paint("description", symbols.pending)
    return Row(f"  {pending} {name} {theme.paint('description', 'waiting')}")


def _finalize_row(fold: RunFold, theme: Theme, spinner: str) -> Row | None:
    symbols, record = theme.symbols, fold.finalize
    if record is None:
        return None
    name = record.get("name")
    if name == "pipeline.finalize.started":
        return Row(f"  {theme.paint('start', spinner)} finalize", live=True)
    if name == "pipeline.finalize.completed":
        duration = format_duration(field_number(record, "durationMs") or 0)
        return Row(
            f"  {theme.paint('complete', symbols.complete)} finalize"
            f" {theme.paint('description', f'({duration})')}"
        )
    if name == "pipeline.finalize.failed":
        return Row(f"  {theme.paint('fail', symbols.fail)} finalize: {error_message(record)}")
    return None


def _header(fold: RunFold, theme: Theme) -> str:
    facts = run_facts(fold.started or {})
    return theme.paint(
        "pipeline",
        f"Pipeline {facts.pipeline_id} ({facts.step_count} steps, dryRun={facts.dry_run})",
    )


def frame_rows(
    fold: RunFold,
    theme: Theme,
    *,
    spinner: str,
    elapsed: Mapping[str, float],
    bar_width: int,
) -> list[Row]:
    """Draw the whole frame: header, one row per step with its detail rows, finalize, and
    the closing line once the run ended.

    Args:
        fold: the run's records so far.
        theme: symbols and colours.
        spinner: the spinner character of this repaint.
        elapsed: seconds each running step has run, by the reporter's clock.
        bar_width: cells of a progress bar.
    """
    rows = [Row(_header(fold, theme))]
    for step in fold.steps.values():
        rows.append(_step_row(step, theme, spinner, elapsed.get(step.id), bar_width))
        progress = _visible_progress(step)
        details = progress.get("details") if progress else None
        for detail in details if isinstance(details, list) else ():
            if isinstance(detail, Mapping):
                rows.append(_detail_row(detail, step.status, theme, spinner, bar_width))
    finalize = _finalize_row(fold, theme, spinner)
    if finalize is not None:
        rows.append(finalize)
    closing = summary(fold)
    if closing is not None:
        # Last, as it happened last (and as the plain reporter prints it).
        rows.append(Row(theme.paint("complete" if closing[1] else "fail", closing[0])))
    return rows

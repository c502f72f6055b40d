"""The plain reporter: append-only lines, for logs, CI and any stream that is not a terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TextIO

from tubeless.progress._record_fields import (
    elapsed_ms,
    error_message,
    field_number,
    field_text,
    has_visible_progress,
    is_iteration,
    payload,
    run_facts,
    setback_rows,
    skip_detail,
    summary_line,
    waits_for_approval,
)
from tubeless.progress._reporter import LogLevel, PipelineReporter
from tubeless.progress._terminal import (
    Theme,
    format_duration,
    format_number,
    sanitize_terminal_log,
    sanitize_terminal_text,
)
from tubeless.trace import RunFold, StepFold

__all__ = ["PLAIN_PROGRESS_INTERVAL", "PlainReporter"]

PLAIN_PROGRESS_INTERVAL = 0.75
"""Seconds between two progress lines of one step (completion lines are never held)."""


def _total_text(total: float | None) -> str:
    return "?" if total is None else format_number(total)


class PlainReporter(PipelineReporter):
    """Append-only lines, one per step event, safe for logs and CI output."""

    def __init__(self, *, stream: TextIO, theme: Theme, clock: Callable[[], float]) -> None:
        super().__init__(mode="plain", stream=stream, theme=theme, clock=clock)
        self._fold: RunFold | None = None
        # Per step: when its last progress line was printed (by `clock`).
        self._progress_at: dict[str, float] = {}
        # Per iterating step: the iteration count of its last line.
        self._iterations: dict[str, float] = {}
        # (step id, detail row id) of every failed or cancelled row printed, and its groups.
        self._announced: set[tuple[str, str]] = set()
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "pipeline.started": self._pipeline_started,
            "step.running": self._step_running,
            "step.complete": self._step_complete,
            "step.skipped": self._step_skipped,
            "step.cancelled": self._step_cancelled,
            "step.failed": self._step_failed,
            "pipeline.finalize.started": self._finalize_started,
            "pipeline.finalize.completed": self._finalize_completed,
            "pipeline.finalize.failed": self._finalize_failed,
            "pipeline.completed": self._pipeline_completed,
        }

    def _on_record(self, record: Mapping[str, Any]) -> bool:
        name = record.get("name")
        if name == "pipeline.started":
            self._fold = RunFold(record)
            self._progress_at.clear()
            self._iterations.clear()
            self._announced.clear()
        fold = self._fold
        if fold is None:
            return False
        first_run = name == "step.running" and self._step(record).started_at_ms is None
        fold.add(record)
        if first_run:
            self._step_started(record)
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is not None:
            handler(record)
        return name == "pipeline.completed"

    def _on_log(self, level: LogLevel, message: str) -> None:
        text = sanitize_terminal_log(message)
        style = {"warning": "skip", "error": "fail"}.get(level)
        self._line(self._theme.paint(style, text) if style else text)

    def _shutdown(self) -> None:
        """Plain mode holds no thread and no screen state."""

    def _line(self, text: str) -> None:
        self._write(f"{text}\n")

    def _step(self, record: Mapping[str, Any]) -> StepFold:
        step_id = field_text(record, "stepId") or "?"
        step = self._fold.steps.get(step_id) if self._fold is not None else None
        return step if step is not None else StepFold(step_id)

    def _name(self, record: Mapping[str, Any]) -> str:
        step = self._step(record)
        return sanitize_terminal_text(step.name or step.id)

    def _forget_progress(self, record: Mapping[str, Any]) -> str:
        step_id = field_text(record, "stepId") or "?"
        self._progress_at.pop(step_id, None)
        return step_id

    def _pipeline_started(self, record: Mapping[str, Any]) -> None:
        facts = run_facts(record)
        text = (
            f"Pipeline {facts.pipeline_id}: starting"
            f" ({facts.step_count} steps, dryRun={facts.dry_run})"
        )
        self._line(self._theme.paint("pipeline", text))

    def _step_started(self, record: Mapping[str, Any]) -> None:
        theme = self._theme
        description = sanitize_terminal_text(self._step(record).description or "")
        suffix = f" - {theme.paint('description', description)}" if description else ""
        self._line(f"  {theme.paint('start', theme.symbols.start)} {self._name(record)}{suffix}")

    def _step_running(self, record: Mapping[str, Any]) -> None:
        step = self._step(record)
        progress = payload(record).get("progress")
        if step.ended is not None or not isinstance(progress, Mapping):
            return  # a settled step's late progress says nothing new
        if has_visible_progress(progress):
            self._progress(step, record, progress)
        self._setbacks(record, progress)

    def _progress(
        self, step: StepFold, record: Mapping[str, Any], progress: Mapping[str, Any]
    ) -> None:
        completed = field_number(progress, "completed") or 0
        total = field_number(progress, "total")
        message = field_text(progress, "message")
        iteration = is_iteration(step)
        # An iteration count is against a limit, which the message states: no `n/total`.
        parts = [] if iteration else [f"{format_number(completed)}/{_total_text(total)}"]
        if message:
            parts.append(sanitize_terminal_text(message))
        text = " ".join(parts)
        now = self._clock()
        # A new iteration (an agent's turn) always gets its line; other updates may merge.
        urgent = (
            self._iterations.get(step.id) != completed
            if iteration
            else total is not None and completed >= total
        )
        previous_at = self._progress_at.get(step.id)
        if not urgent and previous_at is not None and now - previous_at < PLAIN_PROGRESS_INTERVAL:
            return
        self._progress_at[step.id] = now
        if iteration:
            self._iterations[step.id] = completed
        theme = self._theme
        name = self._name(record)
        self._line(
            f"  {theme.paint('description', theme.ellipsis)} {name}"
            f" {theme.paint('description', text)}"
        )

    def _setbacks(self, record: Mapping[str, Any], progress: Mapping[str, Any]) -> None:
        """One line per failed or cancelled detail row (a tool call, an item), once each."""
        theme = self._theme
        marker = "›" if theme.unicode else ">"
        for row in setback_rows(progress):
            row_id = field_text(row, "id") or "?"
            key = (field_text(record, "stepId") or "?", row_id)
            if key in self._announced:
                continue  # printed already, or a row inside it was (a failed call's batch)
            # A row and every group holding it count as told.
            parts = row_id.split("/")
            self._announced.update((key[0], "/".join(parts[:n])) for n in range(1, len(parts) + 1))
            title = sanitize_terminal_text(field_text(row, "name") or row_id)
            label = sanitize_terminal_text(field_text(row, "label") or "")
            if field_text(row, "status") == "cancelled":
                symbol, label = theme.paint("skip", theme.symbols.skip), f"cancelled {label}"
            else:
                symbol = theme.paint("fail", theme.symbols.fail)
            detail = f": {label.strip()}" if label.strip() else ""
            self._line(f"  {symbol} {self._name(record)} {marker} {title}{detail}")

    def _step_complete(self, record: Mapping[str, Any]) -> None:
        self._forget_progress(record)
        duration = format_duration(elapsed_ms(record, self._step(record).started_at_ms))
        theme = self._theme
        self._line(
            f"  {theme.paint('complete', theme.symbols.complete)} {self._name(record)}"
            f" {theme.paint('description', f'({duration})')}"
        )

    def _step_skipped(self, record: Mapping[str, Any]) -> None:
        self._forget_progress(record)
        detail = skip_detail(record, prefer_dependency=True)
        theme = self._theme
        self._line(
            f"  {theme.paint('skip', theme.symbols.skip)} {self._name(record)}"
            f" {theme.paint('description', f'({detail})')}"
        )

    def _step_cancelled(self, record: Mapping[str, Any]) -> None:
        self._forget_progress(record)
        theme = self._theme
        self._line(
            f"  {theme.paint('skip', theme.symbols.skip)} {self._name(record)}:"
            f" cancelled: {error_message(record)}"
        )

    def _step_failed(self, record: Mapping[str, Any]) -> None:
        self._forget_progress(record)
        theme = self._theme
        symbol = (
            theme.paint("skip", theme.symbols.pending)
            if waits_for_approval(record)
            else theme.paint("fail", theme.symbols.fail)
        )
        self._line(f"  {symbol} {self._name(record)}: {error_message(record)}")

    def _finalize_started(self, record: Mapping[str, Any]) -> None:
        theme = self._theme
        self._line(f"  {theme.paint('start', theme.symbols.start)} finalize")

    def _finalize_completed(self, record: Mapping[str, Any]) -> None:
        theme = self._theme
        duration = format_duration(field_number(record, "durationMs") or 0)
        self._line(
            f"  {theme.paint('complete', theme.symbols.complete)} finalize"
            f" {theme.paint('description', f'({duration})')}"
        )

    def _finalize_failed(self, record: Mapping[str, Any]) -> None:
        theme = self._theme
        self._line(f"  {theme.paint('fail', theme.symbols.fail)} finalize: {error_message(record)}")

    def _pipeline_completed(self, record: Mapping[str, Any]) -> None:
        started = self._fold.started if self._fold is not None else None
        started_ms = None if started is None else field_number(started, "timestampMs")
        steps = () if self._fold is None else self._fold.steps.values()
        failed = sum(step.failed_detail_count for step in steps)
        text, completed = summary_line(record, started_ms, failed)
        self._line(self._theme.paint("complete" if completed else "fail", text))

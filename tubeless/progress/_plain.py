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
    payload,
    run_facts,
    skip_detail,
    summary_line,
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


class PlainReporter(PipelineReporter):
    """Append-only lines, one per step event, safe for logs and CI output."""

    def __init__(self, *, stream: TextIO, theme: Theme, clock: Callable[[], float]) -> None:
        super().__init__(mode="plain", stream=stream, theme=theme, clock=clock)
        self._fold: RunFold | None = None
        # Per step: when its last progress line was printed (by `clock`).
        self._progress_at: dict[str, float] = {}
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
        step_id = field_text(record, "stepId") or "?"
        progress = payload(record).get("progress")
        if isinstance(progress, Mapping) and has_visible_progress(progress):
            self._progress(step_id, record, progress)

    def _progress(
        self, step_id: str, record: Mapping[str, Any], progress: Mapping[str, Any]
    ) -> None:
        completed = field_number(progress, "completed") or 0
        total = field_number(progress, "total")
        message = field_text(progress, "message")
        text = f"{format_number(completed)}/{format_number(total) if total is not None else '?'}"
        if message:
            text += f" {sanitize_terminal_text(message)}"
        now = self._clock()
        finished = total is not None and completed >= total
        previous_at = self._progress_at.get(step_id)
        if not finished and previous_at is not None and now - previous_at < PLAIN_PROGRESS_INTERVAL:
            return
        self._progress_at[step_id] = now
        theme = self._theme
        name = self._name(record)
        self._line(
            f"  {theme.paint('description', theme.ellipsis)} {name}"
            f" {theme.paint('description', text)}"
        )

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
        self._line(
            f"  {theme.paint('fail', theme.symbols.fail)} {self._name(record)}:"
            f" {error_message(record)}"
        )

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
        text, completed = summary_line(record, started_ms)
        self._line(self._theme.paint("complete" if completed else "fail", text))

"""The interactive reporter: one frame redrawn in place, kept moving by a thread."""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from tubeless.progress._frame import FrameWriter, Row, beside_log_pane, fit_line, window_rows
from tubeless.progress._frame_rows import frame_rows
from tubeless.progress._redirect import LineRedirect, install, uninstall
from tubeless.progress._reporter import LogLevel, PipelineReporter
from tubeless.progress._restore import forget_frame, keep_frame
from tubeless.progress._terminal import Theme, sanitize_terminal_log
from tubeless.trace import RunFold

__all__ = ["InteractiveReporter"]

_SPINNER_FRAMES = {True: "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", False: "-\\|/"}
_FALLBACK_SIZE = (80, 24)
_PANE_MIN_COLUMNS = 120
_PANE_MIN_ROWS = 8
_PANE_LINES = 8
_LOG_LINE_LIMIT = 2048
# Log lines shown only in the pane are printed above the frame once the pane goes; past
# this many, the oldest are counted instead of kept (the trace still has them all).
_PANE_BACKLOG_LIMIT = 10_000
_STREAMS = ("stdout", "stderr")


class InteractiveReporter(PipelineReporter):
    """A live frame: header, step rows with spinners and bars, detail rows, finalize.

    Logs print above the frame, or into a `Logs` pane beside it on terminals of at least
    120x8 (and above the final frame when the pane goes). While the frame is up, lines
    written to `sys.stdout` and `sys.stderr` on the same terminal print above it too. A
    frame taller than the terminal shows a window around the last spinner. A background
    thread repaints every `refresh_interval` seconds while something runs, so spinners and
    elapsed times move even when a step keeps the worker threads busy.
    """

    def __init__(
        self,
        *,
        stream: TextIO,
        theme: Theme,
        clock: Callable[[], float],
        refresh_interval: float,
        progress_bar_width: int,
    ) -> None:
        super().__init__(mode="interactive", stream=stream, theme=theme, clock=clock)
        self._interval = refresh_interval
        self._bar_width = progress_bar_width
        self._writer = FrameWriter(self._write)
        self._fold: RunFold | None = None
        # When each step started running, by the reporter's clock (for elapsed times).
        self._step_started: dict[str, float] = {}
        self._recent_logs: list[str] = []
        self._pane_backlog: list[str] = []
        self._backlog_dropped = 0
        self._redirects: dict[str, LineRedirect] = {}
        self._dirty = False
        self._last_paint = -math.inf
        self._tree_printed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_record(self, record: Mapping[str, Any]) -> bool:
        if self._closed:
            return False
        name = record.get("name")
        if name == "pipeline.started":
            self._fold = RunFold(record)
            self._fold.add(record)
            self._step_started = {}
            self._tree_printed = False
            self._start_refresh()
            self._redirect_output()
            self._paint()
            return False
        if self._fold is None:
            return False
        now = self._clock()
        progress_only = self._fold_in(self._fold, record, now)
        if name == "pipeline.completed":
            return True  # `close` paints the final tree
        # Planned steps arrive in a burst and progress can be chatty: the refresh thread
        # paints those at its own pace.
        if name == "step.planned" or (progress_only and now - self._last_paint < self._interval):
            self._dirty = True
        else:
            self._paint()
        return False

    def _on_log(self, level: LogLevel, message: str) -> None:
        theme = self._theme
        prefix = {
            "error": f"{theme.paint('fail', theme.symbols.fail)} ",
            "warning": f"{theme.paint('skip', '!')} ",
        }.get(level, "")
        text = f"{prefix}{sanitize_terminal_log(message)}"
        if self._closed or self._fold is None:
            self._write(f"{text}\n")
            return
        self._recent_logs.extend(line[:_LOG_LINE_LIMIT] for line in text.split("\n")[-_PANE_LINES:])
        del self._recent_logs[:-_PANE_LINES]
        columns, height = self._size()
        if not self._pane_visible(columns, height):
            self._paint(above=f"{text}\n")
            return
        self._pane_backlog.append(text)
        if len(self._pane_backlog) > _PANE_BACKLOG_LIMIT:
            del self._pane_backlog[0]
            self._backlog_dropped += 1
        self._paint()

    def _shutdown(self) -> None:
        forget_frame(id(self))
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # Released before taking the lock: a redirect holds its own lock while it waits
        # for ours.
        pending = "".join(uninstall(name, redirect) for name, redirect in self._redirects.items())
        self._redirects = {}
        with self._lock:
            self._paint(above=f"{pending}\n" if pending else None)
            self._writer.show_cursor()

    def _redirect_output(self) -> None:
        for name in _STREAMS:
            if name not in self._redirects:
                redirect = install(name, self._stream, self._print_above)
                if redirect is not None:
                    self._redirects[name] = redirect

    def _print_above(self, text: str) -> None:
        with self._lock:
            if self._fold is None:
                self._write(text)
            else:
                self._paint(above=text)

    def _start_refresh(self) -> None:
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no descriptor
            descriptor = self._stream.fileno()
            keep_frame(id(self), descriptor, lambda: self._writer.undo(self._size()[0]))
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._refresh, name="tubeless-reporter-refresh", daemon=True
            )
            self._thread.start()

    def _refresh(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if self._closed or self._fold is None:
                    continue
                rows = self._rows(self._fold, self._clock())
                if self._dirty or any(row.live for row in rows):
                    self._paint(rows=rows)

    def _fold_in(self, fold: RunFold, record: Mapping[str, Any], now: float) -> bool:
        """Fold `record` in; return True when it only moved a running step's progress."""
        if record.get("name") != "step.running":
            fold.add(record)
            return False
        step_id = record.get("stepId")
        before = fold.steps.get(step_id) if isinstance(step_id, str) else None
        progress_only = before is not None and before.status == "running"
        fold.add(record)
        if not progress_only and isinstance(step_id, str):
            self._step_started[step_id] = now
        return progress_only

    def _rows(self, fold: RunFold, now: float) -> list[Row]:
        frames = _SPINNER_FRAMES[self._theme.unicode]
        spinner = frames[int(now / self._interval) % len(frames)]
        elapsed = {step_id: now - at for step_id, at in self._step_started.items()}
        return frame_rows(
            fold, self._theme, spinner=spinner, elapsed=elapsed, bar_width=self._bar_width
        )

    def _size(self) -> tuple[int, int]:
        try:
            size = os.get_terminal_size(self._stream.fileno())
        except (AttributeError, OSError, ValueError):
            return _FALLBACK_SIZE
        if size.columns <= 0 or size.lines <= 0:
            return _FALLBACK_SIZE
        return size.columns, size.lines

    def _pane_visible(self, columns: int, height: int) -> bool:
        return (
            not self._closed
            and self._fold is not None
            and self._fold.completed is None
            and columns >= _PANE_MIN_COLUMNS
            and height >= _PANE_MIN_ROWS
        )

    def _paint(self, *, above: str | None = None, rows: Sequence[Row] | None = None) -> None:
        fold = self._fold
        if fold is None:
            return
        now = self._clock()
        if rows is None:
            rows = self._rows(fold, now)
        self._dirty = False
        self._last_paint = now
        columns, height = self._size()
        lines = self._visible_lines(rows, height)
        if fold.completed is not None and len(rows) >= height:
            # A finished tree taller than the terminal scrolls out in full, once.
            if not self._tree_printed:
                above = (above or "") + "".join(f"{row.text}\n" for row in rows)
                self._tree_printed = True
            lines = []
        unicode = self._theme.unicode
        pane_visible = self._pane_visible(columns, height)
        if not pane_visible and self._pane_backlog:
            above = self._take_backlog() + (above or "")
        if pane_visible:
            pane = self._recent_logs[-min(_PANE_LINES, height - 3) :] or [
                f"Waiting for logs{self._theme.ellipsis}"
            ]
            fitted = beside_log_pane(lines, pane, columns, unicode)
        else:
            fitted = [fit_line(line, columns, unicode) for line in lines]
        self._writer.redraw(fitted, columns, above)

    def _take_backlog(self) -> str:
        dropped, self._backlog_dropped = self._backlog_dropped, 0
        lines = [f"{self._theme.ellipsis} {dropped} earlier log lines"] if dropped else []
        lines += self._pane_backlog
        self._pane_backlog = []
        return "".join(f"{line}\n" for line in lines)

    def _visible_lines(self, rows: Sequence[Row], height: int) -> list[str]:
        if len(rows) < height:
            return [row.text for row in rows]
        return window_rows(rows, height, self._theme.ellipsis)

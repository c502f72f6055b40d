"""What plain and interactive reporters share: hooks, the run logger, closing."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, Literal, TextIO

from tubeless.progress._terminal import Theme

__all__ = ["LogLevel", "PipelineReporter", "ReporterLog", "ReporterMode"]

LogLevel = Literal["info", "warning", "error"]
ReporterMode = Literal["interactive", "plain"]
RecordHook = Callable[[dict[str, Any]], None]


class ReporterLog:
    """The logger a reporter hands to a run (`context.log`); it prints through the reporter.

    It has the three methods the run context calls, so a `logging.Logger` and this class
    are interchangeable there.
    """

    __slots__ = ("_emit",)

    def __init__(self, emit: Callable[[LogLevel, str], None]) -> None:
        self._emit = emit

    def info(self, msg: object) -> None:
        """Print an ordinary log line."""
        self._emit("info", str(msg))

    def warning(self, msg: object) -> None:
        """Print a warning."""
        self._emit("warning", str(msg))

    def error(self, msg: object) -> None:
        """Print an error."""
        self._emit("error", str(msg))


class PipelineReporter(abc.ABC):
    """Prints one run's progress from its trace records; build one with `create_reporter`.

    Pass `hooks` and `log` to the run's context, run the pipeline, then `close()` the
    reporter (or use it as a context manager). The reporter subscribes to `on_record`
    only and dispatches on each record's `name`; `pipeline.log` records are ignored
    because the same lines already arrive through `log`. Records of other runs than the
    one `pipeline.started` announced are ignored too.

    Calls may come from any thread: one lock serialises records, log lines and repaints.
    """

    mode: ReporterMode
    """`"plain"` (append-only lines) or `"interactive"` (a redrawn frame)."""
    hooks: Mapping[str, RecordHook]
    """The run context's `hooks` mapping."""
    log: ReporterLog
    """The run context's `log`."""

    def __init__(
        self, *, mode: ReporterMode, stream: TextIO, theme: Theme, clock: Callable[[], float]
    ) -> None:
        self.mode = mode
        self.hooks = MappingProxyType({"on_record": self._receive})
        self.log = ReporterLog(self._receive_log)
        self._stream = stream
        self._theme = theme
        self._clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self._run_id: str | None = None

    def close(self) -> None:
        """Stop the reporter: no thread of it survives, the last frame stays on screen.

        Safe to call more than once; the first `pipeline.completed` record closes the
        reporter by itself.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._shutdown()

    def __enter__(self) -> PipelineReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _receive(self, record: dict[str, Any]) -> None:
        with self._lock:
            if not self._accepts(record):
                return
            finished = self._on_record(record)
        if finished:
            self.close()

    def _accepts(self, record: Mapping[str, Any]) -> bool:
        name = record.get("name")
        if name == "pipeline.log":
            return False
        run_id = record.get("runId")
        if name == "pipeline.started" and isinstance(run_id, str):
            self._run_id = run_id
            return True
        return self._run_id is not None and run_id == self._run_id

    def _receive_log(self, level: LogLevel, message: str) -> None:
        with self._lock:
            self._on_log(level, message)

    def _write(self, text: str) -> None:
        # The display is best-effort: a closed or broken stream must not fail the run.
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass

    @abc.abstractmethod
    def _on_record(self, record: Mapping[str, Any]) -> bool:
        """Show one record (called with the lock held); return True when it ends the run."""

    @abc.abstractmethod
    def _on_log(self, level: LogLevel, message: str) -> None:
        """Show one log line (called with the lock held)."""

    @abc.abstractmethod
    def _shutdown(self) -> None:
        """Release what the reporter holds (called once, without the lock)."""

"""One sink that fans every record out to several, retiring the ones that fail."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from tubeless.errors import TraceSinkError
from tubeless.trace._wire import TraceSink, validate_record

__all__ = ["ComposedTraceSink", "compose_sinks"]


def _describe(sink: object) -> str:
    return type(sink).__name__


class ComposedTraceSink:
    """Sends each record to every healthy sink in turn; see `compose_sinks`."""

    def __init__(self, sinks: tuple[TraceSink, ...]) -> None:
        self._sinks = sinks
        self._healthy = list(sinks)
        self._lock = threading.Lock()

    @property
    def healthy(self) -> tuple[TraceSink, ...]:
        """The sinks that still take records, in composition order."""
        with self._lock:
            return tuple(self._healthy)

    def export(self, record: dict[str, Any]) -> None:
        """Send `record` to every healthy sink.

        Raises:
            TraceRecordError: when `record` is invalid (no sink sees it, none is retired).
            TraceSinkError: when a sink failed and was retired; `partial` is true when
                other sinks still take records.
        """
        validate_record(record)
        # Holding the lock across the fan-out keeps every sink's record order identical.
        with self._lock:
            self._call_healthy(lambda sink: sink.export(record), "export")

    def flush(self) -> None:
        """Flush every healthy sink that can be flushed.

        Raises:
            TraceSinkError: when a sink failed to flush and was retired.
        """
        with self._lock:
            self._call_healthy(_flush, "flush")

    def close(self) -> None:
        """Close every composed sink, retired ones included, then report the first failure.

        Raises:
            TraceSinkError: when a sink failed to close; `partial` is true when another
                sink closed cleanly.
        """
        with self._lock:
            failures: list[tuple[object, Exception]] = []
            for sink in self._sinks:
                close = getattr(sink, "close", None)
                try:
                    if close is not None:
                        close()
                except Exception as error:
                    failures.append((sink, error))
            self._healthy.clear()
            if failures:
                culprit, first = failures[0]
                partial = len(failures) < len(self._sinks)
                raise TraceSinkError(
                    f"Trace sink {_describe(culprit)} failed to close: {first}", partial=partial
                ) from first

    def _call_healthy(self, call: Callable[[Any], None], action: str) -> None:
        failures: list[tuple[object, Exception]] = []
        for sink in self._healthy:
            try:
                call(sink)
            except Exception as error:
                failures.append((sink, error))
        if not failures:
            return
        failed = {id(culprit) for culprit, _ in failures}
        self._healthy = [sink for sink in self._healthy if id(sink) not in failed]
        culprit, first = failures[0]
        remaining = len(self._healthy)
        raise TraceSinkError(
            f"Trace sink {_describe(culprit)} failed to {action} and was retired "
            f"({remaining} still healthy): {first}",
            partial=remaining > 0,
        ) from first

    def __enter__(self) -> ComposedTraceSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _flush(sink: object) -> None:
    flush = getattr(sink, "flush", None)
    if flush is not None:
        flush()


def compose_sinks(*sinks: TraceSink) -> ComposedTraceSink:
    """Return one sink that sends each record to every healthy sink in `sinks`, in order.

    A sink that raises is retired and the composed sink raises `TraceSinkError`, with
    `partial=True` while other sinks are still healthy (the run logs one warning and keeps
    the composed sink) and `partial=False` once none is left. `close()` closes every sink.
    """
    return ComposedTraceSink(sinks)

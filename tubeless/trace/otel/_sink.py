"""`OtelTraceSink`: a live trace sink that starts and ends OpenTelemetry spans as records arrive."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import threading
from types import TracebackType
from typing import Any

from tubeless.trace._wire import validate_record
from tubeless.trace.otel._ids import deterministic_tracer
from tubeless.trace.otel._sdk import trace_api
from tubeless.trace.otel._spans import SpanBuilder

__all__ = ["OtelTraceSink"]

_LOGGER = logging.getLogger("tubeless.trace.otel")
_QUOTE_LIMIT = 200


@functools.cache
def _version() -> str:
    try:
        return importlib.metadata.version("tubeless-pipelines")
    except importlib.metadata.PackageNotFoundError:
        return ""


class OtelTraceSink:
    """Sends a run's trace records to OpenTelemetry as spans, live, one span per run and step.

    Spans start and end as the records arrive, with the records' own timestamps; the
    mapping (`invoke_agent`, turns, `execute_tool`, other pipelines and steps) is the table
    in `tubeless.trace.otel` and carries ids, codes and statuses only, never options,
    inputs, outputs, prompts or state. Use it alone as a run's `tracing` sink or beside the
    NDJSON and SQLite sinks with `compose_sinks`. Thread-safe.

    With the SDK's `TracerProvider`, span and trace ids are derived from run ids (see
    `tubeless.trace.otel`), so the live spans and a later `tubeless export otel` of the
    stored run have the same ids; another provider keeps its own ids. A root run started
    inside an active span gets a link to it.

    A failure inside the sink or the provider's processors never reaches the run: it is
    logged once on the `tubeless.trace.otel` logger and counted in `failures`. `close()`
    ends every span still open (runs that never completed) with status ERROR, then flushes.

    Args:
        tracer_provider: where spans go; `None` uses the global provider
            (`opentelemetry.trace.get_tracer_provider()`). The sink never shuts it down.
    """

    def __init__(self, tracer_provider: trace_api.TracerProvider | None = None) -> None:
        provider = tracer_provider or trace_api.get_tracer_provider()
        tracer, ids = deterministic_tracer(provider, _version())
        self._provider = provider
        self._builder = SpanBuilder(tracer, ids)
        self._lock = threading.Lock()
        self._failures = 0
        self._closed = False

    @property
    def failures(self) -> int:
        """How many records or flushes failed inside the sink (each was dropped, not raised)."""
        with self._lock:
            return self._failures

    def export(self, record: dict[str, Any]) -> None:
        """Start, fill or end the spans `record` concerns; records after `close()` are ignored.

        Raises:
            TraceRecordError: when `record` is not a valid trace record.
        """
        validate_record(record)
        with self._lock:
            if self._closed:
                return
            try:
                self._builder.take(record)
            except Exception as error:
                self._failed("take a record", error)

    def flush(self) -> None:
        """Ask the provider to export the spans it has buffered (when it can)."""
        with self._lock:
            self._flush()

    def close(self) -> None:
        """End every span still open with status ERROR, then flush; later calls do nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._builder.end_all()
            except Exception as error:
                self._failed("end the open spans", error)
            self._flush()

    def _flush(self) -> None:
        force_flush = getattr(self._provider, "force_flush", None)
        if force_flush is None:
            return
        try:
            force_flush()
        except Exception as error:
            self._failed("flush", error)

    def _failed(self, action: str, error: Exception) -> None:
        self._failures += 1
        if self._failures == 1:
            text = str(error)[:_QUOTE_LIMIT]
            _LOGGER.warning(
                "OtelTraceSink failed to %s (%s: %r); it drops what failed and goes on",
                action,
                type(error).__name__,
                text,
            )

    def __enter__(self) -> OtelTraceSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

"""`export_records`: replay stored trace records as spans to an OTLP/HTTP endpoint, later."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tubeless.errors import TraceExportError
from tubeless.trace._wire import validate_record
from tubeless.trace.otel._ids import deterministic_tracer
from tubeless.trace.otel._sdk import (
    ReadableSpan,
    Resource,
    SpanExporter,
    SpanExportResult,
    SpanProcessor,
    TracerProvider,
    otlp_span_exporter,
)
from tubeless.trace.otel._sink import _version
from tubeless.trace.otel._spans import SpanBuilder

__all__ = ["EXPORT_BATCH_SIZE", "export_records", "traces_endpoint"]

EXPORT_BATCH_SIZE = 512
"""Spans per OTLP request."""
_QUOTE_LIMIT = 200


class _Collected(SpanProcessor):
    """Keeps every ended span, in end order, for one export at the end."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def traces_endpoint(url: str) -> str:
    """`url`, with `/v1/traces` added when it has no path (`http://host:4318`)."""
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        return urllib.parse.urlunsplit(parts._replace(path="/v1/traces"))
    return url


def _resource() -> Resource:
    # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win; "tubeless" replaces only the default.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "tubeless"}))
    return resource


def _spans_of(records: Iterable[Mapping[str, Any]]) -> list[ReadableSpan]:
    provider = TracerProvider(resource=_resource())
    collected = _Collected()
    provider.add_span_processor(collected)
    tracer, ids = deterministic_tracer(provider, _version())
    builder = SpanBuilder(tracer, ids)
    for record in records:
        validate_record(record)
        builder.take(record)
    builder.end_all()
    provider.shutdown()
    return collected.spans


def _send(exporter: SpanExporter, spans: Sequence[ReadableSpan], where: str) -> None:
    for start in range(0, len(spans), EXPORT_BATCH_SIZE):
        batch = spans[start : start + EXPORT_BATCH_SIZE]
        if exporter.export(batch) is not SpanExportResult.SUCCESS:
            raise TraceExportError(
                f"The OTLP endpoint {where} did not take {len(batch)} spans "
                f"({start} of {len(spans)} were sent before); see the log for why"
            )


def export_records(
    records: Iterable[Mapping[str, Any]],
    *,
    endpoint: str | None = None,
    timeout: float | None = None,
    exporter: SpanExporter | None = None,
) -> int:
    """Replay `records` (in their stored order) as spans, with the records' own timestamps.

    The spans, names, attributes and ids are those a live `OtelTraceSink` with the SDK's
    provider makes for the same records, so exporting a run twice gives the same ids.
    Runs without a `pipeline.completed` record end at their last record with status ERROR.

    Args:
        records: trace records, for example `SqliteTraceStore.events()` or `read_ndjson`.
        endpoint: the OTLP/HTTP traces URL (`/v1/traces` is added to a bare
            `http://host:port`); `None` uses `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
            `OTEL_EXPORTER_OTLP_ENDPOINT` or `http://localhost:4318/v1/traces`. Headers
            come from `OTEL_EXPORTER_OTLP_HEADERS`.
        timeout: seconds per request (`None`: `OTEL_EXPORTER_OTLP_TIMEOUT`, else 10).
        exporter: send to this `SpanExporter` instead (then `endpoint` and `timeout` must
            be `None`); it is shut down afterwards.

    Returns:
        How many spans were exported.

    Raises:
        TraceRecordError: when a record is not a valid trace record (nothing is sent).
        TraceExportError: when the endpoint refused a batch or never answered.
        ValueError: when `exporter` is given with `endpoint` or `timeout`.
        MissingExtraError: when the OTLP/HTTP exporter package is not installed.
    """
    if exporter is not None and (endpoint is not None or timeout is not None):
        raise ValueError("export_records takes an exporter or an endpoint and timeout, not both")
    spans = _spans_of(records)
    url = None if endpoint is None else traces_endpoint(endpoint)
    target = exporter or otlp_span_exporter(url, timeout)
    where = "(from the environment)" if url is None else repr(url[:_QUOTE_LIMIT])
    try:
        _send(target, spans, where)
    finally:
        target.shutdown()
    return len(spans)

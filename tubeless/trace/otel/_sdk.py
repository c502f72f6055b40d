"""The one place that imports OpenTelemetry (the `otel` extra), and says so when it is missing."""

from __future__ import annotations

from tubeless.errors import MissingExtraError

try:
    from opentelemetry import trace as trace_api
    from opentelemetry.context import Context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace import Tracer as SdkTracer
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError(
        "tubeless.trace.otel", extra="otel", missing=error.name or "opentelemetry"
    ) from error

__all__ = [
    "Context",
    "IdGenerator",
    "ReadableSpan",
    "Resource",
    "SdkTracer",
    "Span",
    "SpanContext",
    "SpanExportResult",
    "SpanExporter",
    "SpanKind",
    "SpanProcessor",
    "Status",
    "StatusCode",
    "TracerProvider",
    "otlp_span_exporter",
    "trace_api",
]


def otlp_span_exporter(endpoint: str | None, timeout: float | None) -> SpanExporter:
    """An OTLP/HTTP (protobuf) span exporter; `None` leaves a setting to `OTEL_EXPORTER_OTLP_*`.

    Raises:
        MissingExtraError: when `opentelemetry-exporter-otlp-proto-http` is not installed.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as error:
        raise MissingExtraError(
            "tubeless export otel",
            extra="otel",
            missing=error.name or "opentelemetry.exporter.otlp.proto.http",
        ) from error
    return OTLPSpanExporter(endpoint=endpoint, timeout=timeout)

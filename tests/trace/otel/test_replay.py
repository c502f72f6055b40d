"""`export_records`: stored records replayed as spans, to an exporter or an OTLP endpoint."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tubeless.errors import TraceExportError, TraceRecordError
from tubeless.testing import MemoryTraceSink
from tubeless.trace.otel import export_records
from tubeless.trace.otel._replay import traces_endpoint


@pytest.fixture
def records(scripted_agent: Any) -> list[dict[str, Any]]:
    """The records of one run of the scripted example."""
    memory = MemoryTraceSink()
    scripted_agent.run({"question": "hello tubeless"}, context={"tracing": memory})
    return memory.records


def test_records_become_spans_of_the_exporter(records: list[dict[str, Any]]) -> None:
    """Every run and step of the records is one exported span; the count is returned."""
    exporter = InMemorySpanExporter()
    assert export_records(records, exporter=exporter) == 12
    spans = exporter.get_finished_spans()
    assert len(spans) == 12
    assert {span.resource.attributes["service.name"] for span in spans} == {"tubeless"}


def test_the_service_name_comes_from_the_environment(
    records: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OTEL_SERVICE_NAME` replaces the default service name `tubeless`."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "checkout")
    exporter = InMemorySpanExporter()
    export_records(records, exporter=exporter)
    assert {s.resource.attributes["service.name"] for s in exporter.get_finished_spans()} == {
        "checkout"
    }


def test_an_unfinished_run_is_exported_as_an_error(records: list[dict[str, Any]]) -> None:
    """Runs cut off before `pipeline.completed` end at their last record with status ERROR."""
    exporter = InMemorySpanExporter()
    export_records(records[:20], exporter=exporter)
    agent = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert agent.status.status_code.name == "ERROR"
    assert (agent.attributes or {})["error.type"] == "_OTHER"
    root = records[0]["runId"]
    last = max(r["timestampMs"] for r in records[:20] if r["runId"] == root)
    assert agent.end_time == last * 1_000_000


def test_an_invalid_record_sends_nothing(records: list[dict[str, Any]]) -> None:
    """A record that fails validation stops the replay before anything is exported."""
    exporter = InMemorySpanExporter()
    broken = [*records[:5], {**records[5], "timestampMs": "soon"}]
    with pytest.raises(TraceRecordError):
        export_records(broken, exporter=exporter)
    assert exporter.get_finished_spans() == ()


def test_an_exporter_and_an_endpoint_are_exclusive(records: list[dict[str, Any]]) -> None:
    """Passing an exporter with an endpoint is a `ValueError`."""
    with pytest.raises(ValueError, match="not both"):
        export_records(records, exporter=InMemorySpanExporter(), endpoint="http://x")


def test_a_bare_endpoint_gets_the_traces_path() -> None:
    """`http://host:4318` means `/v1/traces`; a URL with a path is kept."""
    assert traces_endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/traces"
    assert traces_endpoint("http://h:1/") == "http://h:1/v1/traces"
    assert traces_endpoint("https://h/otlp/v1/traces") == "https://h/otlp/v1/traces"


class _Refusing(BaseHTTPRequestHandler):
    """Answers every export with 400 Bad Request."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    """A loopback OTLP endpoint that refuses everything."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.slow
def test_a_refusing_endpoint_raises_an_export_error(
    records: list[dict[str, Any]], refusing_endpoint: str
) -> None:
    """An endpoint that refuses the batch makes `TraceExportError`, naming the endpoint."""
    with pytest.raises(TraceExportError, match="did not take 12 spans") as caught:
        export_records(records, endpoint=refusing_endpoint, timeout=5)
    assert caught.value.code == "TUBELESS_TRACE_EXPORT_FAILED"
    assert f"{refusing_endpoint}/v1/traces" in str(caught.value)

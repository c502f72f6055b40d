"""`OtelTraceSink` as a run's sink: beside other sinks, across threads, failing, or missing."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as trace_api

from tubeless.errors import TraceRecordError
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, compose_sinks, read_ndjson
from tubeless.trace.otel import OtelTraceSink


def test_it_composes_beside_the_ndjson_and_sqlite_sinks(
    spans: Any, scripted_agent: Any, tmp_path: Path
) -> None:
    """One run feeds an NDJSON file, a SQLite store and spans, with the same records."""
    ndjson = NdjsonTraceSink(tmp_path / "trace.ndjson")
    store = SqliteTraceStore(tmp_path / "runs.sqlite")
    with compose_sinks(ndjson, store, OtelTraceSink(spans.provider)) as sink:
        run = scripted_agent.run({"question": "hello tubeless"}, context={"tracing": sink})
    assert run.status == "completed"
    records = read_ndjson(tmp_path / "trace.ndjson")
    with SqliteTraceStore(tmp_path / "runs.sqlite", read_only=True) as reader:
        assert reader.events() == records
    run_ids = {r["runId"] for r in records}
    span_runs = {(s.attributes or {}).get("tubeless.run.id") for s in spans.ended}
    assert span_runs - {None} == run_ids


def test_concurrent_runs_share_one_sink_without_mixing(spans: Any, scripted_agent: Any) -> None:
    """Two runs on two threads through one sink give two complete trees, one trace each."""
    sink = OtelTraceSink(spans.provider)
    statuses: list[str] = []

    def run(question: str) -> None:
        run = scripted_agent.run({"question": question}, context={"tracing": sink})
        statuses.append(run.status)

    threads = [threading.Thread(target=run, args=(q,)) for q in ("a b c", "d e f")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.close()
    assert statuses == ["completed", "completed"]
    by_trace: dict[int, list[str]] = {}
    for span in spans.ended:
        by_trace.setdefault(span.context.trace_id, []).append(span.name)
    assert len(by_trace) == 2
    for names in by_trace.values():
        assert names.count("invoke_agent scripted-agent") == 1
        assert names.count("execute_tool uppercase") == 3
    spans.outline()  # every span hangs from a span of its own trace


class _BrokenTracer(trace_api.NoOpTracer):
    """A tracer whose spans cannot be started."""

    def start_span(self, *args: Any, **kwargs: Any) -> trace_api.Span:
        raise RuntimeError("collector unreachable")


class _BrokenProvider(trace_api.NoOpTracerProvider):
    """A provider (not the SDK's) whose tracer always fails."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace_api.Tracer:
        return _BrokenTracer()


def test_a_failing_provider_never_fails_the_run(
    scripted_agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Errors inside the sink are counted and logged once; the run completes."""
    sink = OtelTraceSink(_BrokenProvider())
    with caplog.at_level(logging.WARNING, logger="tubeless.trace.otel"):
        run = scripted_agent.run({"question": "hello tubeless"}, context={"tracing": sink})
        sink.close()
    assert run.status == "completed"
    assert run.value == {"answer": "14 characters; HELLO; TUBELESS"}
    assert sink.failures > 1
    warnings = [r for r in caplog.records if r.name == "tubeless.trace.otel"]
    assert len(warnings) == 1
    assert "collector unreachable" in warnings[0].getMessage()


def test_an_invalid_record_is_refused(spans: Any) -> None:
    """A hand-made record that is not a trace record raises `TraceRecordError`."""
    sink = OtelTraceSink(spans.provider)
    with pytest.raises(TraceRecordError):
        sink.export({"name": "pipeline.started", "runId": "r"})
    assert sink.failures == 0


def test_a_root_run_links_to_the_callers_active_span(spans: Any, scripted_agent: Any) -> None:
    """A run started inside an active span keeps its own trace and links to that span."""
    tracer = spans.provider.get_tracer("test")
    with tracer.start_as_current_span("request") as request, OtelTraceSink(spans.provider) as sink:
        scripted_agent.run({"question": "x"}, context={"tracing": sink})
    agent = spans.one("invoke_agent scripted-agent")
    assert agent.parent is None
    assert agent.context.trace_id != request.get_span_context().trace_id
    assert [link.context for link in agent.links] == [request.get_span_context()]
    turn = spans.one("turn 1")
    assert list(turn.links) == []


_SCRIPT = """
import sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == {blocked!r} or name.startswith({blocked!r} + "."):
            raise ImportError(f"blocked {{name}}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
{body}
"""


def _blocked(blocked: str, body: str) -> subprocess.CompletedProcess[str]:
    script = _SCRIPT.format(blocked=blocked, body=textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.slow
def test_without_the_extra_the_import_names_it() -> None:
    """Importing `tubeless.trace.otel` without OpenTelemetry raises an error naming the extra."""
    result = _blocked(
        "opentelemetry",
        """
        import tubeless.trace
        try:
            import tubeless.trace.otel
        except ImportError as error:
            print(type(error).__name__, error.code, error.extra)
            print(error)
        """,
    )
    assert result.returncode == 0, result.stderr
    first, message = result.stdout.splitlines()
    assert first == "MissingExtraError TUBELESS_EXTRA_MISSING otel"
    assert "pip install 'tubeless-pipelines[otel]'" in message


@pytest.mark.slow
def test_without_the_otlp_exporter_only_the_replay_fails() -> None:
    """Without the OTLP/HTTP exporter the sink works and `export_records` names the extra."""
    result = _blocked(
        "opentelemetry.exporter",
        """
        from tubeless.errors import MissingExtraError
        from tubeless.trace.otel import OtelTraceSink, export_records
        OtelTraceSink()
        try:
            export_records([])
        except MissingExtraError as error:
            print(error.code, "pip install 'tubeless-pipelines[otel]'" in str(error))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["TUBELESS_EXTRA_MISSING", "True"]


@pytest.mark.slow
def test_no_provider_means_the_global_one(tmp_path: Path) -> None:
    """`OtelTraceSink()` sends spans to the provider set with `set_tracer_provider`."""
    examples = Path(__file__).resolve().parents[3] / "examples"
    script = f"""
import sys
sys.path.insert(0, {str(examples)!r})
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from agent import agent
from tubeless.trace.otel import OtelTraceSink
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with OtelTraceSink() as sink:
    agent.run({{"question": "a b"}}, context={{"tracing": sink}})
print(sorted(span.name for span in exporter.get_finished_spans())[0])
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "execute_tool count\n"

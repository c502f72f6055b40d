"""Span and trace ids are derived from run ids, as documented, and never change."""

from __future__ import annotations

import hashlib
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tubeless.testing import MemoryTraceSink
from tubeless.trace import compose_sinks
from tubeless.trace.otel import OtelTraceSink, export_records


def _derived(size: int, *parts: str) -> int:
    data = b"\0".join([b"tubeless-otel/1", *(part.encode() for part in parts)])
    return int.from_bytes(hashlib.sha256(data).digest()[:size], "big")


def _ids(spans: Any) -> list[tuple[str, int, int, int | None, int | None, int | None]]:
    return sorted(
        (
            span.name,
            span.context.trace_id,
            span.context.span_id,
            None if span.parent is None else span.parent.span_id,
            span.start_time,
            span.end_time,
        )
        for span in spans
    )


def _replayed(records: list[dict[str, Any]]) -> list[Any]:
    exporter = InMemorySpanExporter()
    export_records(records, exporter=exporter)
    return list(exporter.get_finished_spans())


def test_ids_follow_the_documented_derivation(spans: Any, scripted_agent: Any) -> None:
    """Trace id = SHA-256 of the root run id; run and step span ids from their own ids."""
    memory = MemoryTraceSink()
    with compose_sinks(memory, OtelTraceSink(spans.provider)) as sink:
        run = scripted_agent.run({"question": "a"}, context={"tracing": sink})
    agent = spans.one("invoke_agent scripted-agent")
    assert agent.context.trace_id == _derived(16, "trace", run.run_id)
    assert agent.context.span_id == _derived(8, "run", run.run_id)
    turn_run = next(r["runId"] for r in memory.records if r["pipelineId"].endswith("/turn"))
    decide = next(
        s
        for s in spans.ended
        if s.name == "step decide"
        and str((s.attributes or {})["tubeless.attempt.id"]).startswith(turn_run)
    )
    assert decide.context.span_id == _derived(8, "step", turn_run, "decide")
    assert {span.context.trace_id for span in spans.ended} == {agent.context.trace_id}


def test_a_replay_gives_the_live_ids_and_times(spans: Any, scripted_agent: Any) -> None:
    """Replaying the stored records gives every span the live sink gave, ids and times alike."""
    memory = MemoryTraceSink()
    with compose_sinks(memory, OtelTraceSink(spans.provider)) as sink:
        scripted_agent.run({"question": "missing word"}, context={"tracing": sink})
    first, second = _replayed(memory.records), _replayed(memory.records)
    assert _ids(first) == _ids(spans.ended)
    assert _ids(second) == _ids(first)
    assert [span.status.status_code for span in sorted(first, key=lambda s: s.context.span_id)] == [
        span.status.status_code for span in sorted(spans.ended, key=lambda s: s.context.span_id)
    ]


def test_another_provider_keeps_its_own_ids(scripted_agent: Any) -> None:
    """A provider that is not the SDK's is used as it is (no ids forced on it)."""
    provider = trace_api.NoOpTracerProvider()
    with OtelTraceSink(provider) as sink:
        run = scripted_agent.run({"question": "a"}, context={"tracing": sink})
    assert run.status == "completed"
    assert sink.failures == 0

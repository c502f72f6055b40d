"""Real runs through the record stream: emitted, written, read back, and never leaking values."""

from __future__ import annotations

import json
import pathlib
import sqlite3
import threading
from typing import Any

import pytest

from tubeless import create_steps, define_agent, define_pipeline
from tubeless.errors import TraceStoreError
from tubeless.pipeline import _observe
from tubeless.testing import MemoryTraceSink, RecordingLogger, scripted_decide
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, compose_sinks, read_ndjson

SECRET = "s3cr3t-value-9f27"


def _tree() -> Any:
    """A parent with a child step, a fan-out step and an iterate step (all observed)."""
    inner_steps = create_steps()
    load = inner_steps.step(
        "load", run=lambda inputs, context: (context.log.info("loading"), SECRET)[1]
    )
    shout = inner_steps.step(
        "shout", run=lambda inputs, context: inputs["load"].upper(), depends_on=[load]
    )
    inner = define_pipeline(id="inner", steps=[load, shout])

    steps = create_steps({"type": "object", "properties": {"token": {"type": "string"}}})
    child = steps.from_pipeline("child", pipeline=inner, map_options=lambda inputs, context: {})
    fan = steps.for_each_pipeline(
        "fan",
        pipeline=inner,
        items=lambda inputs, context: ["a", "b", "c"],
        key=lambda item, index: f"item-{item}",
        map_options=lambda item, index, inputs, context: {"item": item},
        concurrency=2,
        depends_on=[child],
    )
    loop = steps.iterate_pipeline(
        "loop",
        pipeline=inner,
        max_iterations=3,
        initial_state=lambda inputs, context: 0,
        map_options=lambda state, inputs, context: {"round": state},
        transition=lambda result, state, context: (
            {"kind": "finish", "result": result}
            if state >= 1
            else {"kind": "next", "state": state + 1}
        ),
        depends_on=[fan],
    )
    return define_pipeline(id="tree", steps=[child, fan, loop])


def test_records_read_back_from_ndjson_and_sqlite_equal_the_emitted_ones(
    tmp_path: pathlib.Path,
) -> None:
    """A run with child, fan-out and iterate steps round-trips field for field."""
    memory = MemoryTraceSink()
    ndjson_path = tmp_path / "deep" / "trace.ndjson"
    store = SqliteTraceStore(tmp_path / "runs.sqlite")
    ndjson = NdjsonTraceSink(ndjson_path)
    run = _tree().run({"token": SECRET}, context={"tracing": compose_sinks(memory, ndjson, store)})
    ndjson.close()
    assert run.status == "completed"
    emitted = memory.records
    assert read_ndjson(ndjson_path) == emitted
    assert store.events() == emitted
    store.close()
    relations = [r for r in emitted if r["name"] == "pipeline.started" and "iteration" in r]
    assert [r["iteration"]["index"] for r in relations] == [1, 2]
    assert {r["itemKey"] for r in emitted if r["pipelineId"] == "inner" and "itemKey" in r} == {
        "item-a",
        "item-b",
        "item-c",
        "iteration-1",
        "iteration-2",
    }


def test_values_options_and_results_are_never_recorded() -> None:
    """A secret in the options, step outputs and final result appears in no record."""
    sink = MemoryTraceSink()
    run = _tree().run({"token": SECRET}, context={"tracing": sink})
    assert run.status == "completed"
    assert SECRET.upper() in json.dumps(run.value)
    text = json.dumps(sink.records)
    assert SECRET not in text
    assert SECRET.upper() not in text


def test_one_run_emits_records_in_the_documented_order() -> None:
    """started, planned for every step, step lifecycles, finalize, completed."""
    steps = create_steps()
    first = steps.step("first", run=lambda inputs, context: 1)
    second = steps.step("second", run=lambda inputs, context: 2, depends_on=[first])
    sink = MemoryTraceSink()
    define_pipeline(id="order", steps=[first, second]).run(context={"tracing": sink})
    names = [(r["name"], r.get("stepId")) for r in sink.records]
    assert names == [
        ("pipeline.started", None),
        ("step.planned", "first"),
        ("step.planned", "second"),
        ("step.running", "first"),
        ("step.complete", "first"),
        ("step.running", "second"),
        ("step.complete", "second"),
        ("pipeline.finalize.started", None),
        ("pipeline.finalize.completed", None),
        ("pipeline.completed", None),
    ]
    assert all(r["version"] == 3 for r in sink.records)


def test_a_failing_sink_warns_once_and_never_fails_the_run() -> None:
    """The first sink failure logs one warning and retires it; a composed sink keeps the rest."""
    broken = MemoryTraceSink(fail_after=2)
    healthy = MemoryTraceSink()
    log = RecordingLogger()
    run = _tree().run({}, context={"tracing": compose_sinks(broken, healthy), "log": log})
    assert run.status == "completed"
    assert len(broken.records) == 2
    assert healthy.records[-1]["name"] == "pipeline.completed"
    assert len(log.messages("warning")) == 1

    alone = MemoryTraceSink(fail_after=1)
    log = RecordingLogger()
    run = _tree().run({}, context={"tracing": alone, "log": log})
    assert run.status == "completed"
    assert len(alone.records) == 1
    assert len(log.messages("warning")) == 1


def test_records_reach_a_sink_serialised_when_steps_run_on_threads() -> None:
    """Concurrent steps never interleave inside one export, and every run closes in order."""
    inside = threading.Lock()
    overlaps: list[str] = []

    class CheckingSink(MemoryTraceSink):
        def export(self, record: dict[str, Any]) -> None:
            if not inside.acquire(blocking=False):
                overlaps.append(record["name"])
                return
            try:
                super().export(record)
            finally:
                inside.release()

    sink = CheckingSink()
    steps = create_steps()
    parallel = [steps.step(f"s{i}", run=lambda inputs, context: 1) for i in range(8)]
    run = define_pipeline(id="wide", steps=parallel).run(
        controls={"max_concurrency": 4}, context={"tracing": sink}
    )
    assert run.status == "completed"
    assert overlaps == []
    assert sink.records[-1]["name"] == "pipeline.completed"


def test_no_record_is_built_when_nothing_observes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a sink or hooks the executor never creates an observer or a record."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a record observer was created for an unobserved run")

    monkeypatch.setattr(_observe.RunObserver, "__init__", refuse)
    run = _tree().run({"token": SECRET})
    assert run.status == "completed"


def test_each_definition_snapshot_is_sent_once_per_run_tree() -> None:
    """The first run of a definition carries its snapshot; later runs carry the identity."""
    sink = MemoryTraceSink()
    _tree().run({}, context={"tracing": sink})
    started = [r for r in sink.records if r["name"] == "pipeline.started"]
    with_snapshot = [r["pipelineId"] for r in started if "definitionSnapshot" in r["payload"]]
    assert sorted(with_snapshot) == ["inner", "tree"]
    assert all("definitionIdentity" in r["payload"] for r in started)
    assert len([r for r in started if r["pipelineId"] == "inner"]) == 6


def test_a_run_does_not_check_its_own_records_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sinks and composition trust the records a run built and checked (or shaped itself).

    Records the library shaped from checked parts skip the check (see
    `test_a_hostile_clock_never_yields_a_record_the_reader_refuses`); none is checked twice.
    """
    from tubeless.trace import _wire

    checked: list[int] = []
    real, real_own = _wire.check_record, _wire.check_own_fields

    def counting(record: Any, **options: Any) -> None:
        checked.append(id(record))
        real(record, **options)

    def counting_own(record: Any, own: Any, **options: Any) -> None:
        checked.append(id(record))
        real_own(record, own, **options)

    monkeypatch.setattr(_wire, "check_record", counting)
    monkeypatch.setattr(_observe, "check_record", counting)
    monkeypatch.setattr(_observe, "check_own_fields", counting_own)
    sinks = [MemoryTraceSink(), MemoryTraceSink()]
    _tree().run({}, context={"tracing": compose_sinks(*sinks)})
    assert sinks[0].records == sinks[1].records
    assert len(set(checked)) == len(checked)
    assert 0 < len(checked) < len(sinks[0].records)
    assert set(checked) <= {id(record) for record in sinks[0].records}


def _agent_started_records(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Run a one-turn agent traced to NDJSON and SQLite; return both paths."""
    agent = define_agent(
        id="counter",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {},
        decide=scripted_decide([{"kind": "finish", "result": 3}]),
        limits={"max_turns": 2, "max_calls": 4},
    )
    ndjson_path = tmp_path / "trace.ndjson"
    sqlite_path = tmp_path / "runs.sqlite"
    with NdjsonTraceSink(ndjson_path) as ndjson, SqliteTraceStore(sqlite_path) as store:
        assert agent.run_or_raise({}, context={"tracing": compose_sinks(ndjson, store)}) == 3
    return ndjson_path, sqlite_path


def _forge(record: dict[str, Any]) -> dict[str, Any]:
    forged = json.loads(json.dumps(record))
    forged["payload"]["definitionSnapshot"]["steps"][0]["agent"]["limits"]["maxCalls"] += 1
    return forged


def test_both_readers_reject_a_snapshot_whose_agent_limits_were_edited(
    tmp_path: pathlib.Path,
) -> None:
    """A `pipeline.started` snapshot edited after its run fails to decode, naming the hash."""
    ndjson_path, sqlite_path = _agent_started_records(tmp_path)
    records = read_ndjson(ndjson_path)
    assert SqliteTraceStore(sqlite_path, read_only=True).events() == records
    started = next(r for r in records if r["name"] == "pipeline.started")
    lines = [json.dumps(_forge(r) if r is started else r) for r in records]
    ndjson_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with pytest.raises(TraceStoreError, match=r"line 1 .*structural fingerprint") as caught:
        read_ndjson(ndjson_path)
    assert started["payload"]["definitionIdentity"]["structuralFingerprint"] in str(caught.value)

    # The append-only store is edited behind its back, as a forger with the file would.
    with sqlite3.connect(sqlite_path) as connection:
        connection.execute("DROP TRIGGER IF EXISTS pipeline_run_events_no_update")
        connection.execute(
            "UPDATE pipeline_run_events SET payload_json = ? WHERE event_name = ? AND id = 1",
            (json.dumps(_forge(started)["payload"]), "pipeline.started"),
        )
    with pytest.raises(TraceStoreError, match=r"row 1 .*structural fingerprint"):
        SqliteTraceStore(sqlite_path, read_only=True).events()

"""The test doubles in `tubeless.testing`."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool
from tubeless.errors import TraceRecordError, TraceSinkError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, RecordingLogger, ScriptedDecide, scripted_decide


def _record(message: str) -> dict[str, Any]:
    return {
        "version": 3,
        "name": "pipeline.log",
        "pipelineId": "p",
        "runId": "r",
        "timestampMs": 0,
        "payload": {"level": "log", "message": message},
    }


def test_memory_sink_keeps_copies_in_order() -> None:
    """Records are kept in export order, unaffected by later changes to the caller's dict."""
    sink = MemoryTraceSink()
    first = _record("one")
    sink.export(first)
    sink.export(_record("two"))
    first["payload"]["message"] = "changed"
    assert [record["payload"]["message"] for record in sink.records] == ["one", "two"]


def test_memory_sink_validates_records() -> None:
    """An invalid record raises `TraceRecordError` and is not kept."""
    sink = MemoryTraceSink()
    with pytest.raises(TraceRecordError):
        sink.export({"name": "pipeline.log"})
    assert sink.records == []


def test_memory_sink_fails_after_n_records() -> None:
    """With `fail_after=2`, the third and every later export raise `TraceSinkError`."""
    sink = MemoryTraceSink(fail_after=2)
    sink.export(_record("one"))
    sink.export(_record("two"))
    for _ in range(2):
        with pytest.raises(TraceSinkError, match="after 2 records"):
            sink.export(_record("three"))
    assert len(sink.records) == 2


def test_memory_sink_counts_flushes_and_refuses_records_after_close() -> None:
    """`flush` is counted; after `close`, records are kept but new ones refused."""
    sink = MemoryTraceSink()
    sink.export(_record("one"))
    sink.flush()
    sink.flush()
    sink.close()
    assert sink.flush_count == 2 and sink.closed
    with pytest.raises(TraceSinkError, match="closed"):
        sink.export(_record("two"))
    assert len(sink.records) == 1


def test_memory_sink_is_thread_safe() -> None:
    """Exports from many threads at once are all kept."""
    sink = MemoryTraceSink()
    barrier = threading.Barrier(8)

    def write() -> None:
        barrier.wait()
        for index in range(250):
            sink.export(_record(str(index)))

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink.records) == 2000


def _small_pipeline() -> Any:
    step = create_steps()
    return define_pipeline(id="small", steps=[step("only", run=lambda inputs, context: 1)])


def test_memory_sink_keeps_runs_records_from_many_threads_in_order() -> None:
    """Runs on eight threads into one sink: every record of each is kept, each run's in order."""
    sink = MemoryTraceSink()
    pipeline = _small_pipeline()
    barrier = threading.Barrier(8)

    def run() -> None:
        barrier.wait()
        for _ in range(25):
            pipeline.run(context={"tracing": sink})

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    by_run: dict[str, list[str]] = {}
    for record in sink.records:
        by_run.setdefault(record["runId"], []).append(record["name"])
    assert len(by_run) == 200
    names = {tuple(names) for names in by_run.values()}
    assert len(names) == 1
    (order,) = names
    assert order[0] == "pipeline.started" and order[-1] == "pipeline.completed"


def test_memory_sink_refuses_a_runs_records_after_close() -> None:
    """A closed sink refuses a run's records too: the run completes, warns, and none is kept."""
    sink = MemoryTraceSink()
    sink.close()
    log = RecordingLogger()
    run = _small_pipeline().run(context={"tracing": sink, "log": log})
    assert run.status == "completed"
    assert sink.records == []
    assert any("closed" in message for message in log.messages("warning"))


# -- scripted_decide: test agents without a model by replaying decisions ------------

TEXT = {"type": "string"}


def _agent(decide: Any) -> Any:
    echo = define_tool(
        description="Echo", input_schema=TEXT, output_schema=TEXT, run=lambda v, c: v
    )
    return define_agent(
        id="scripted",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {"log": [], "name": options.get("name", "")},
        decide=decide,
        tools={"echo": echo},
        reduce=lambda state, outcomes: {
            "log": [*state["log"], *(o["value"] for o in outcomes)],
            "name": state["name"],
        },
    )


def _echo(call_id: str, value: str) -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": call_id, "tool": "echo", "input": value}]}


def test_entries_are_replayed_by_turn() -> None:
    """Turn n returns entry n - 1; `seen` records each turn with the state it got."""
    decide = scripted_decide(
        [_echo("a", "one"), _echo("b", "two"), {"kind": "finish", "result": "ok"}]
    )

    run = _agent(decide).run({})

    assert isinstance(decide, ScriptedDecide)
    assert run.value == "ok"
    assert decide.seen == [
        (1, {"log": (), "name": ""}),
        (2, {"log": ("one",), "name": ""}),
        (3, {"log": ("one", "two"), "name": ""}),
    ]


def test_callable_entries_get_state_and_context() -> None:
    """A callable entry builds its decision from the state and the decision context."""
    decide = scripted_decide(
        [
            _echo("a", "one"),
            lambda state, context: {
                "kind": "finish",
                "result": f"{context.turn}:{'+'.join(state['log'])}",
            },
        ]
    )

    assert _agent(decide).run({}).value == "2:one"


def test_running_out_of_script_fails_the_run() -> None:
    """A turn past the script fails with a message naming the turn."""
    run = _agent(scripted_decide([_echo("a", "one")])).run({})

    assert run.status == "failed"
    assert "Scripted decide has no decision for turn 2 (the script has 1)" in json.dumps(
        [error.to_dict() for error in run.errors]
    )


def test_malformed_entries_reach_the_harness_checks() -> None:
    """Entries are returned as they are, so tests can exercise decision validation."""
    run = _agent(scripted_decide([{"kind": "finish"}])).run({})

    assert run.status == "failed"
    assert "TUBELESS_AGENT_INVALID_DECISION" in json.dumps([e.to_dict() for e in run.errors])


def test_concurrent_invocations_each_replay_from_the_start() -> None:
    """Two runs sharing one scripted decide both see turn 1 first."""
    both = threading.Barrier(2, timeout=30)

    def first(state: Any, context: Any) -> Any:
        both.wait()
        return _echo("a", state["name"])

    decide = scripted_decide(
        [first, lambda state, context: {"kind": "finish", "result": state["log"][0]}]
    )
    agent = _agent(decide)
    results: dict[str, Any] = {}

    def invoke(name: str) -> None:
        results[name] = agent.run({"name": name}).value

    threads = [threading.Thread(target=invoke, args=(name,)) for name in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == {"x": "x", "y": "y"}
    assert sorted(turn for turn, _ in decide.seen) == [1, 1, 2, 2]

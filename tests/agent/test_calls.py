"""Step `calls`: batch dispatch, ordering, recoverable tool errors and fatal failures."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless._frozen import FrozenDict
from tubeless.agent import define_agent, define_tool
from tubeless.errors import ToolError
from tubeless.pipeline.lowlevel import PROGRESS_INTERVAL_MS
from tubeless.schema import validator
from tubeless.testing import FakeClock, MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30
"""Seconds before a test gives up on an event that should have been set (never reached)."""


class Log:
    """A thread-safe event log shared by handlers and the test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[str] = []

    def add(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)

    def with_prefix(self, prefix: str) -> list[str]:
        with self._lock:
            return [e[len(prefix) :] for e in self.entries if e.startswith(prefix)]


def _calls(*ids: str, tool: str = "work") -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": i, "tool": tool, "input": i} for i in ids]}


def _agent(
    handler: Callable[[str, Any], Any],
    decisions: list[Any],
    *,
    concurrency: int = 1,
    reduced: list[Any] | None = None,
    **fields: Any,
) -> tuple[Any, Any]:
    decide = scripted_decide(decisions)
    tool = define_tool(
        description="Work",
        input_schema=TEXT,
        output_schema=fields.pop("output_schema", TEXT),
        run=handler,
        dry_run=fields.pop("preview", None),
    )
    sink = reduced if reduced is not None else []
    agent = define_agent(
        id="calls-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools={"work": tool},
        reduce=fields.pop("reduce", lambda state, outcomes: sink.append(outcomes) or state),
        limits={"max_concurrency": concurrency},
        **fields,
    )
    return agent, decide


def _errors(run: Any) -> str:
    return json.dumps([error.to_dict() for error in run.errors])


def _tool_runs(sink: MemoryTraceSink) -> dict[str, dict[str, Any]]:
    """The `pipeline.completed` record of each tool run, by call id."""
    return {
        record["itemKey"]: record
        for record in sink.records
        if record["name"] == "pipeline.completed" and "/tool/" in record["pipelineId"]
    }


def test_calls_run_and_reduce_sees_outcomes_in_decision_order(thread_baseline: int) -> None:
    """Calls finish in reverse order, yet the reducer gets outcomes in decision order."""
    log = Log()
    started = threading.Barrier(3, timeout=WAIT)
    finished = {name: threading.Event() for name in ("a", "b", "c")}
    release_after = {"a": "b", "b": "c", "c": None}

    def handler(value: str, context: Any) -> str:
        started.wait()
        before = release_after[value]
        if before is not None:
            assert finished[before].wait(WAIT)
        log.add(f"finished:{value}")
        finished[value].set()
        return value.upper()

    reduced: list[Any] = []
    agent, _ = _agent(handler, [_calls("a", "b", "c"), FINISH], concurrency=3, reduced=reduced)

    run = agent.run({})

    assert run.status == "completed"
    assert log.with_prefix("finished:") == ["c", "b", "a"]
    [outcomes] = reduced
    assert outcomes == (
        {"id": "a", "tool": "work", "ok": True, "value": "A"},
        {"id": "b", "tool": "work", "ok": True, "value": "B"},
        {"id": "c", "tool": "work", "ok": True, "value": "C"},
    )
    assert isinstance(outcomes, tuple)
    assert all(isinstance(outcome, FrozenDict) for outcome in outcomes)


def test_a_freed_slot_takes_the_next_call_in_decision_order(thread_baseline: int) -> None:
    """With two slots and `a` blocked until `c` starts, `b`'s slot takes `c`, then `d`."""
    log = Log()
    c_started = threading.Event()

    def handler(value: str, context: Any) -> str:
        log.add(f"started:{value}")
        if value == "c":
            c_started.set()
        if value == "a":
            assert c_started.wait(WAIT)
        log.add(f"finished:{value}")
        return value

    agent, _ = _agent(handler, [_calls("a", "b", "c", "d"), FINISH], concurrency=2)

    run = agent.run({})

    assert run.status == "completed"
    entries = log.entries
    assert sorted(log.with_prefix("started:")) == ["a", "b", "c", "d"]
    assert entries.index("finished:b") < entries.index("started:c")
    assert entries.index("started:c") < entries.index("started:d")
    assert entries.index("started:c") < entries.index("finished:a")


def test_calls_run_one_at_a_time_in_order_by_default() -> None:
    """With the default concurrency of one, handlers run strictly in decision order."""
    log = Log()

    def handler(value: str, context: Any) -> str:
        log.add(f"started:{value}")
        log.add(f"finished:{value}")
        return value

    agent, _ = _agent(handler, [_calls("d", "a", "c", "b"), FINISH])

    assert agent.run({}).status == "completed"
    assert log.entries == [
        f"{what}:{name}" for name in ("d", "a", "c", "b") for what in ("started", "finished")
    ]


def test_a_tool_error_becomes_a_recoverable_outcome(sink: MemoryTraceSink) -> None:
    """`ToolError` gives `{id, tool, ok: False, error}`; its tool run still fails."""

    def handler(value: str, context: Any) -> str:
        if value == "missing":
            raise ToolError("NOT_FOUND", "Word unavailable")
        return value.upper()

    reduced: list[Any] = []
    agent, decide = _agent(handler, [_calls("hit", "missing"), FINISH], reduced=reduced)

    run = agent.run({}, context={"tracing": sink})

    assert run.status == "completed"
    assert [turn for turn, _ in decide.seen] == [1, 2]
    [outcomes] = reduced
    assert outcomes == (
        {"id": "hit", "tool": "work", "ok": True, "value": "HIT"},
        {
            "id": "missing",
            "tool": "work",
            "ok": False,
            "error": {"code": "NOT_FOUND", "message": "Word unavailable"},
        },
    )
    assert list(outcomes[1]) == ["id", "tool", "ok", "error"]
    tool_runs = _tool_runs(sink)
    assert tool_runs["hit"]["payload"]["status"] == "completed"
    assert tool_runs["missing"]["payload"]["status"] == "failed"
    [step_failed] = [
        r
        for r in sink.records
        if r["name"] == "step.failed" and r.get("itemKey") == "missing" and r["stepId"] == "tool"
    ]
    assert step_failed["error"]["code"] == "TUBELESS_STEP_FAILED"
    assert step_failed["error"]["sourceCode"] == "NOT_FOUND"


class _CodedError(Exception):
    """Not a ToolError, but it has a string `code`."""

    def __init__(self) -> None:
        super().__init__("looks like a tool error")
        self.code = "NOT_FOUND"


@pytest.mark.parametrize(
    "error",
    [_CodedError(), RuntimeError("handler crashed"), KeyError("missing")],
    ids=["coded", "runtime", "key"],
)
def test_any_other_handler_exception_is_fatal(error: Exception) -> None:
    """Errors other than `ToolError`, even with a `.code`, fail the turn without reducing."""

    def handler(value: str, context: Any) -> str:
        raise error

    reduced: list[Any] = []
    agent, decide = _agent(handler, [_calls("a"), FINISH], reduced=reduced)

    run = agent.run({})

    assert run.status == "failed"
    assert run.finalized is False
    assert reduced == []
    assert [turn for turn, _ in decide.seen] == [1]
    assert run.first_exception() is not None
    cause: BaseException | None = run.first_exception()
    while cause is not None and cause is not error:
        cause = cause.__cause__
    assert cause is error


def test_dispatch_stops_after_a_fatal_failure() -> None:
    """With one slot, the calls after a fatal failure never start."""
    log = Log()

    def handler(value: str, context: Any) -> str:
        log.add(f"started:{value}")
        if value == "b":
            raise RuntimeError("b crashed")
        return value

    agent, _ = _agent(handler, [_calls("a", "b", "c", "d"), FINISH])

    assert agent.run({}).status == "failed"
    assert log.with_prefix("started:") == ["a", "b"]


class _FailureWatch(MemoryTraceSink):
    """A sink that sets `seen` once the calls step reports `call_id` as failed."""

    def __init__(self, call_id: str) -> None:
        super().__init__()
        self.call_id = call_id
        self.seen = threading.Event()

    def export(self, record: dict[str, Any]) -> None:
        super().export(record)
        if record["name"] != "step.running" or record.get("stepId") != "calls":
            return
        rows = record["payload"].get("progress", {}).get("details", [])
        if any(r["id"] == self.call_id and r.get("status") == "failed" for r in rows):
            self.seen.set()


def test_a_fatal_failure_drains_an_active_sibling_without_cancelling_it(
    thread_baseline: int,
) -> None:
    """The running sibling completes with its signal unset; nothing new starts; no reduce."""
    log = Log()
    watch = _FailureWatch("bad")
    slow_started = threading.Event()
    run_signal = threading.Event()

    def handler(value: str, context: Any) -> str:
        log.add(f"started:{value}")
        if value == "slow":
            slow_started.set()
            assert watch.seen.wait(WAIT)
            log.add(f"signal-set-after-failure:{context.signal.is_set()}")
            return "slow done"
        if value == "bad":
            assert slow_started.wait(WAIT)
            raise RuntimeError("bad crashed")
        return value

    reduced: list[Any] = []
    agent, decide = _agent(
        handler, [_calls("slow", "bad", "never"), FINISH], concurrency=2, reduced=reduced
    )

    # The watch reads progress records: a clock moving a full interval per reading makes
    # every progress report go out at once instead of being held back.
    clock = FakeClock(tick=PROGRESS_INTERVAL_MS)
    run = agent.run({}, context={"tracing": watch, "signal": run_signal, "now": clock})

    assert run.status == "failed"
    assert sorted(log.with_prefix("started:")) == ["bad", "slow"]
    assert log.with_prefix("signal-set-after-failure:") == ["False"]
    assert not run_signal.is_set()
    assert reduced == []
    assert [turn for turn, _ in decide.seen] == [1]
    tool_runs = _tool_runs(watch)
    assert tool_runs["slow"]["payload"]["status"] == "completed"
    assert tool_runs["bad"]["payload"]["status"] == "failed"
    assert "never" not in tool_runs
    assert "bad crashed" in _errors(run)


def test_output_schema_failure_is_fatal(sink: MemoryTraceSink) -> None:
    """An output rejected by the output schema fails the tool run and the turn."""
    reduced: list[Any] = []
    agent, decide = _agent(lambda value, context: 42, [_calls("a"), FINISH], reduced=reduced)

    run = agent.run({}, context={"tracing": sink})

    assert run.status == "failed"
    assert reduced == []
    assert [turn for turn, _ in decide.seen] == [1]
    [failed] = [r for r in sink.records if r["name"] == "step.failed" and r["stepId"] == "tool"]
    assert failed["error"]["code"] == "TUBELESS_STEP_OUTPUT_VALIDATION_FAILED"


def test_a_tool_error_from_the_output_schema_is_fatal() -> None:
    """Only the handler's own `ToolError` is recoverable; a validator's is not."""

    def output(value: Any) -> Any:
        raise ToolError("NOT_FOUND", "from the validator")

    reduced: list[Any] = []
    agent, _ = _agent(
        lambda value, context: value,
        [_calls("a"), FINISH],
        reduced=reduced,
        output_schema=validator(output, json_schema=TEXT),
    )

    run = agent.run({})

    assert run.status == "failed"
    assert reduced == []


def test_a_tool_error_from_an_input_validator_is_fatal() -> None:
    """A `ToolError` raised while validating input fails the turn before any handler."""
    ran: list[Any] = []

    def check(value: Any) -> Any:
        raise ToolError("NOT_FOUND", "from the input validator")

    tool = define_tool(
        description="Never runs",
        input_schema=validator(check, json_schema=TEXT),
        output_schema=TEXT,
        run=lambda value, context: ran.append(value),
    )
    agent = define_agent(
        id="input-tool-error",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide([_calls("a"), FINISH]),
        tools={"work": tool},
    )

    run = agent.run({})

    assert run.status == "failed"
    assert ran == []


def test_a_tool_error_from_the_reducer_is_fatal() -> None:
    """A reducer raising `ToolError` fails the run; no further decision starts."""

    def reduce(state: Any, outcomes: Any) -> Any:
        raise ToolError("NOT_FOUND", "from the reducer")

    agent, decide = _agent(lambda v, c: v, [_calls("a"), FINISH], reduce=reduce)

    run = agent.run({})

    assert run.status == "failed"
    assert [turn for turn, _ in decide.seen] == [1]
    assert "from the reducer" in _errors(run)


def test_the_reducer_runs_once_per_successful_batch() -> None:
    """Three batches, three reducer calls, each with that batch's outcomes only."""
    reduced: list[Any] = []
    agent, _ = _agent(
        lambda v, c: v,
        [_calls("a", "b"), _calls("c"), _calls("a", "d", "e"), FINISH],
        reduced=reduced,
        concurrency=2,
    )

    assert agent.run({}).status == "completed"
    assert [[o["id"] for o in outcomes] for outcomes in reduced] == [
        ["a", "b"],
        ["c"],
        ["a", "d", "e"],
    ]


def test_tool_threads_do_not_outlive_the_run(thread_baseline: int) -> None:
    """Concurrent batches over several turns leave no thread behind."""
    agent, _ = _agent(
        lambda v, c: v, [_calls("a", "b", "c"), _calls("d", "e"), FINISH], concurrency=3
    )

    assert agent.run({}).status == "completed"


def test_a_failed_call_shows_in_the_agents_progress_while_a_sibling_runs(
    thread_baseline: int,
) -> None:
    """A call that failed is reported failed at once, not when its running sibling ends."""
    sibling_released = threading.Event()
    sibling_finished = threading.Event()
    failed_seen_early = threading.Event()

    def handler(value: str, context: Any) -> str:
        if value == "bad":
            raise ToolError("UNKNOWN_CITY", "no such city")
        # The sibling runs until the agent's progress shows the failure (or the test
        # gives up), so the batch cannot drain first.
        sibling_released.wait(5)
        sibling_finished.set()
        return value

    def on_record(record: dict[str, Any]) -> None:
        if record["name"] != "step.running" or record.get("stepId") != "agent":
            return
        rows = {
            row["id"]: row.get("status")
            for row in record["payload"].get("progress", {}).get("details", ())
        }
        if rows.get("iteration-1/calls/bad") == "failed" and not sibling_finished.is_set():
            failed_seen_early.set()
            sibling_released.set()

    agent, _ = _agent(handler, [_calls("bad", "slow"), FINISH], concurrency=2)
    run = agent.run({}, context={"hooks": {"on_record": on_record}})

    assert run.status == "completed", _errors(run)
    assert failed_seen_early.is_set()

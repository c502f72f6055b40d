"""Cancellation: the run's own `threading.Event` stops new work and drains active handlers."""

from __future__ import annotations

import threading
from typing import Any

from tubeless.agent import define_agent, define_tool
from tubeless.errors import ToolError
from tubeless.testing import MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30
"""Seconds before a test gives up on an event that should have been set (never reached)."""


class Journal:
    """A thread-safe list of what happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[str] = []

    def add(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)


def _calls(*ids: str) -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": i, "tool": "work", "input": i} for i in ids]}


def _agent(handler: Any, decide: Any, journal: Journal, concurrency: int = 1) -> Any:
    tool = define_tool(description="Work", input_schema=TEXT, output_schema=TEXT, run=handler)

    def initial_state(options: Any) -> Any:
        journal.add("initial_state")
        return {}

    def reduce(state: Any, outcomes: Any) -> Any:
        journal.add("reduce")
        return state

    return define_agent(
        id="cancel-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=initial_state,
        decide=decide,
        tools={"work": tool},
        reduce=reduce,
        limits={"max_concurrency": concurrency},
    )


def _cancel_when(ready: threading.Event, signal: threading.Event) -> threading.Thread:
    """Start a thread that sets `signal` once `ready` is set."""

    def cancel() -> None:
        if ready.wait(WAIT):
            signal.set()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_cancellation_mid_batch_drains_the_blocked_handlers(thread_baseline: int) -> None:
    """Setting the signal stops new calls, waits for the active ones and skips the reducer."""
    journal = Journal()
    both_blocked = threading.Barrier(2, timeout=WAIT)
    all_blocked = threading.Event()
    signals: list[threading.Event] = []

    def handler(value: str, context: Any) -> str:
        journal.add(f"started:{value}")
        signals.append(context.signal)
        both_blocked.wait()
        all_blocked.set()
        context.signal.wait(WAIT)
        journal.add(f"drained:{value}:{context.signal.is_set()}")
        return value

    decide = scripted_decide([_calls("first", "second", "later"), FINISH])
    agent = _agent(handler, decide, journal, concurrency=2)
    signal = threading.Event()
    sink = MemoryTraceSink()
    canceller = _cancel_when(all_blocked, signal)

    run = agent.run({}, context={"signal": signal, "tracing": sink})
    canceller.join()

    assert run.status == "cancelled"
    assert run.finalized is False
    assert signals == [signal, signal]
    assert sorted(e for e in journal.entries if e.startswith("drained:")) == [
        "drained:first:True",
        "drained:second:True",
    ]
    assert "started:later" not in journal.entries
    assert "reduce" not in journal.entries
    assert [turn for turn, _ in decide.seen] == [1]
    assert all(error.kind == "cancellation" for error in run.errors)
    completed = {
        (r["pipelineId"], r.get("itemKey")): r["payload"]["status"]
        for r in sink.records
        if r["name"] == "pipeline.completed"
    }
    assert completed == {
        ("cancel-agent/tool/work", "first"): "cancelled",
        ("cancel-agent/tool/work", "second"): "cancelled",
        ("cancel-agent/turn", "iteration-1"): "cancelled",
        ("cancel-agent", None): "cancelled",
    }


def test_cancellation_with_one_slot_stops_the_next_calls(thread_baseline: int) -> None:
    """A handler running inline drains; the calls after it never start."""
    journal = Journal()
    blocked = threading.Event()

    def handler(value: str, context: Any) -> str:
        journal.add(f"started:{value}")
        if value == "b":
            blocked.set()
            context.signal.wait(WAIT)
        return value

    agent = _agent(handler, scripted_decide([_calls("a", "b", "c"), FINISH]), journal)
    signal = threading.Event()
    canceller = _cancel_when(blocked, signal)

    run = agent.run({}, context={"signal": signal})
    canceller.join()

    assert run.status == "cancelled"
    assert [e for e in journal.entries if e.startswith("started:")] == ["started:a", "started:b"]
    assert "reduce" not in journal.entries


def test_a_tool_error_after_cancellation_is_not_recovered() -> None:
    """A `ToolError` raised once the run is cancelled leaves the run cancelled, unreduced."""
    journal = Journal()
    signal = threading.Event()

    def handler(value: str, context: Any) -> str:
        context.signal.set()
        raise ToolError("NOT_FOUND", "too late")

    run = _agent(handler, scripted_decide([_calls("a"), FINISH]), journal).run(
        {}, context={"signal": signal}
    )

    assert run.status == "cancelled"
    assert "reduce" not in journal.entries


def test_every_callback_gets_the_runs_own_signal() -> None:
    """`decide`, tool handlers and previews see the very Event given as the run's signal."""
    signal = threading.Event()
    seen: list[threading.Event] = []

    def decide(state: Any, context: Any) -> Any:
        seen.append(context.signal)
        return _calls("a") if context.turn == 1 else FINISH

    def handler(value: str, context: Any) -> str:
        seen.append(context.signal)
        return value

    journal = Journal()
    agent = _agent(handler, decide, journal, concurrency=2)

    assert agent.run({}, context={"signal": signal}).status == "completed"
    assert len(seen) == 3
    assert all(item is signal for item in seen)


def test_a_run_cancelled_before_it_starts_never_initialises_state() -> None:
    """With the signal already set, neither `initial_state` nor `decide` is called."""
    journal = Journal()
    signal = threading.Event()
    signal.set()
    decide = scripted_decide([FINISH])

    run = _agent(lambda v, c: v, decide, journal).run({}, context={"signal": signal})

    assert run.status == "cancelled"
    assert journal.entries == []
    assert decide.seen == []


def test_a_decision_returned_after_cancellation_is_discarded() -> None:
    """When the signal is set while deciding, the decision's calls never run."""
    journal = Journal()
    signal = threading.Event()

    def decide(state: Any, context: Any) -> Any:
        journal.add(f"decide:{context.turn}")
        signal.set()
        return _calls("a")

    run = _agent(lambda v, c: journal.add("ran") or v, decide, journal).run(
        {}, context={"signal": signal}
    )

    assert run.status == "cancelled"
    assert journal.entries == ["initial_state", "decide:1"]


def test_cancellation_between_turns_starts_no_new_decision() -> None:
    """A reducer that observes cancellation ends the run before the next decision."""
    journal = Journal()
    signal = threading.Event()

    def handler(value: str, context: Any) -> str:
        signal.set()
        return value

    decide = scripted_decide([_calls("a"), FINISH])
    run = _agent(handler, decide, journal).run({}, context={"signal": signal})

    assert run.status == "cancelled"
    assert [turn for turn, _ in decide.seen] == [1]
    assert "reduce" not in journal.entries

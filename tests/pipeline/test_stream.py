"""`pipeline.stream` and `astream`: a run's events live, bounded, and nothing left behind."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import threading
from typing import Any

import pytest

import tubeless
from tubeless.testing import MemoryCheckpointStore, MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}


def _shout(word: str, context: Any) -> str:
    context.report_progress(completed=1, total=2)
    if word == "bad":
        raise tubeless.ToolError("BAD_WORD", "not this one")
    if word == "wait":
        context.signal.wait(30)
    return word.upper()


SHOUT = tubeless.define_tool(description="Shout", input_schema=TEXT, output_schema=TEXT, run=_shout)


def _agent(agent_id: str, calls: list[dict[str, Any]], tools: dict[str, Any], **extra: Any) -> Any:
    return tubeless.define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(
            [{"kind": "continue", "calls": calls}, {"kind": "finish", "result": "done"}]
        ),
        reduce=lambda state, outcomes: state,
        tools=tools,
        **extra,
    )


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("tubeless")}


def test_the_events_of_a_tree_come_in_order_with_their_paths() -> None:
    """Turns, decisions and calls of a root and a subagent, each in its place and order."""
    child = _agent("child", [{"id": "k", "tool": "shout", "input": "x"}], {"shout": SHOUT})
    root = _agent(
        "root",
        [
            {"id": "a", "tool": "shout", "input": "bad"},
            {"id": "c", "tool": "sub", "input": {}},
        ],
        {"shout": SHOUT, "sub": tubeless.pipeline_tool(child, description="Ask the child")},
    )
    with root.stream({}) as events:
        seen = [(e.kind, e.path, e.turn, e.code) for e in events]
    assert seen == [
        ("run.started", ("root",), None, None),
        ("turn.started", ("root",), 1, None),
        ("decision", ("root",), 1, None),
        ("call.started", ("root", "a"), 1, None),
        ("call.progress", ("root", "a"), 1, None),
        ("call.finished", ("root", "a"), 1, "BAD_WORD"),
        ("call.started", ("root", "c"), 1, None),
        ("run.started", ("root", "c", "child"), None, None),
        ("turn.started", ("root", "c", "child"), 1, None),
        ("decision", ("root", "c", "child"), 1, None),
        ("call.started", ("root", "c", "child", "k"), 1, None),
        ("call.progress", ("root", "c", "child", "k"), 1, None),
        ("call.finished", ("root", "c", "child", "k"), 1, None),
        ("turn.started", ("root", "c", "child"), 2, None),
        ("decision", ("root", "c", "child"), 2, None),
        ("run.finished", ("root", "c", "child"), None, None),
        ("call.finished", ("root", "c"), 1, None),
        ("turn.started", ("root",), 2, None),
        ("decision", ("root",), 2, None),
        ("run.finished", ("root",), None, None),
    ]
    assert events.result.status == "completed"
    assert events.result.value == "done"


def test_an_event_holds_no_argument_or_output() -> None:
    """The JSON form of every event carries ids, codes and counts only."""
    agent = _agent("quiet", [{"id": "a", "tool": "shout", "input": "secret"}], {"shout": SHOUT})
    with agent.stream({}) as events:
        text = repr([event.to_dict() for event in events])
    assert "secret" not in text and "SECRET" not in text


def test_a_slow_reader_loses_no_lifecycle_event_and_the_buffer_stays_bounded() -> None:
    """2,000 calls read slowly: every call starts and finishes once; the buffer never
    holds more than its capacity."""
    calls = [{"id": f"c{i}", "tool": "shout", "input": "x"} for i in range(2000)]
    agent = _agent("many", calls, {"shout": SHOUT}, limits={"max_calls": 2000})
    stream = agent.stream({})
    stream._buffer._capacity = 16  # a small buffer, so the reader is the bottleneck
    largest = 0
    kinds: dict[str, int] = {}
    with stream as events:
        for number, event in enumerate(events):
            largest = max(largest, len(stream._buffer._items))
            kinds[event.kind] = kinds.get(event.kind, 0) + 1
            if number % 200 == 0:
                threading.Event().wait(0.01)
    assert kinds["call.started"] == kinds["call.finished"] == 2000
    assert kinds["turn.started"] == 2 and kinds["run.finished"] == 1
    assert kinds.get("call.progress", 0) <= 2000
    assert largest <= 17


def test_leaving_early_cancels_the_run_and_leaves_no_thread() -> None:
    """`break` after the first finished call cancels the waiting calls and joins the run;
    `result` is then the cancelled run."""
    before = _threads()
    calls = [{"id": "fast", "tool": "shout", "input": "x"}] + [
        {"id": f"w{i}", "tool": "shout", "input": "wait"} for i in range(3)
    ]
    agent = _agent("leaver", calls, {"shout": SHOUT}, limits={"max_concurrency": 4})
    with agent.stream({}) as events:
        for event in events:
            if event.kind == "call.finished":
                break
    assert _threads() == before
    assert events.result.status == "cancelled"


def test_the_result_is_not_there_before_the_run_ended() -> None:
    """Reading `result` while the run goes on is an error that says when it is there."""
    agent = _agent("early", [{"id": "w", "tool": "shout", "input": "wait"}], {"shout": SHOUT})
    with agent.stream({}) as events, pytest.raises(RuntimeError, match="once the run ended"):
        events.result  # noqa: B018


def test_the_callers_sink_still_gets_every_record() -> None:
    """A `tracing` sink in the context receives the records the stream projects."""
    sink = MemoryTraceSink()
    agent = _agent("traced", [{"id": "a", "tool": "shout", "input": "x"}], {"shout": SHOUT})
    with agent.stream({}, context={"tracing": sink}) as events:
        list(events)
    assert {r["runId"] for r in sink.records if "parentRunId" not in r} == {events.result.run_id}


def test_calls_that_wait_for_approval_are_events() -> None:
    """A durable agent that stops for approval ends with `approval.pending`, then the run."""
    mail = tubeless.define_tool(
        description="Send",
        input_schema=TEXT,
        output_schema=TEXT,
        run=lambda text, context: text,
        needs_approval=True,
    )
    agent = _agent(
        "mailer",
        [{"id": "m1", "tool": "mail", "input": "hi"}],
        {"mail": mail},
        implementation_version="1",
        durability=tubeless.Durability(store=MemoryCheckpointStore(), key="k"),
    )
    with agent.stream({}) as events:
        tail = [(e.kind, e.path, e.call_id, e.tool, e.code) for e in events][-2:]
    assert tail == [
        ("approval.pending", ("mailer", "m1"), "m1", "mail", None),
        ("run.finished", ("mailer",), None, None, "TUBELESS_AGENT_APPROVAL_REQUIRED"),
    ]


def test_astream_yields_the_same_events() -> None:
    """Over asyncio the events are those of the thread stream, and `result` is the run."""
    agent = _agent("async", [{"id": "a", "tool": "shout", "input": "x"}], {"shout": SHOUT})

    async def read() -> list[str]:
        async with agent.astream({}) as events:
            kinds = [event.kind async for event in events]
        assert events.result.status == "completed"
        return kinds

    kinds = asyncio.run(read())
    assert kinds[0] == "run.started" and kinds[-1] == "run.finished"
    assert kinds.count("call.finished") == 1


def test_cancelling_the_reading_task_cancels_the_run() -> None:
    """A consumer task cancelled mid-run leaves a cancelled run and no thread."""
    before = _threads()
    agent = _agent("cancelled", [{"id": "w", "tool": "shout", "input": "wait"}], {"shout": SHOUT})
    seen: list[Any] = []

    async def read(stream: Any) -> None:
        async for event in stream:
            seen.append(event.kind)

    async def main() -> str:
        async with agent.astream({}) as events:
            task = asyncio.create_task(read(events))
            while "call.started" not in seen:
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return events._stream._result.status

    assert asyncio.run(main()) == "cancelled"
    assert _threads() == before


def test_a_run_that_raises_raises_its_own_error_to_the_reader() -> None:
    """Bad controls make `run` raise on the worker: the reader gets that error, even when
    the worker ended before the reading began."""
    agent = _agent("raiser", [], {})
    with agent.stream({}, controls={"bogus": 1}) as events:
        events._thread.join()
        with pytest.raises(TypeError, match="Unknown run controls"):
            list(events)


def test_astreams_do_not_hold_the_loops_executor() -> None:
    """Three streams read at once on a loop whose default executor has one thread: each
    sees its call start while the calls still wait (a reader parked on an executor
    thread would starve the others), and `to_thread` work still runs meanwhile."""
    gate = threading.Event()
    released: list[bool] = []

    def hold(word: str, context: Any) -> str:
        released.append(gate.wait(30))  # a backstop: the test fails rather than hangs
        return word

    tool = tubeless.define_tool(description="Hold", input_schema=TEXT, output_schema=TEXT, run=hold)
    agents = [
        _agent(f"held{n}", [{"id": "h", "tool": "hold", "input": "x"}], {"hold": tool})
        for n in range(3)
    ]
    started: list[str] = []

    async def read(agent: Any) -> str:
        async with agent.astream({}) as events:
            async for event in events:
                if event.kind == "call.started":
                    started.append(event.run_id)
                    if len(started) == len(agents):
                        assert await asyncio.to_thread(lambda: "free") == "free"
                        gate.set()
        return events.result.status

    async def main() -> list[str]:
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=1)
        )
        return list(await asyncio.gather(*(read(agent) for agent in agents)))

    assert asyncio.run(main()) == ["completed"] * 3
    assert released == [True] * 3, "every reader saw its call start while the calls waited"


def test_concurrent_calls_wait_for_a_reader_that_does_not_read() -> None:
    """Four calls at a time and a reader that stops after the first event: the run
    waits (the records queued behind a blocked delivery stay bounded) instead of running
    its 2,000 calls; once read, every call starts and finishes once."""
    far = threading.Event()
    count = itertools.count(1)

    def step(word: str, context: Any) -> str:
        if next(count) == 1000:
            far.set()
        return word

    tool = tubeless.define_tool(description="Step", input_schema=TEXT, output_schema=TEXT, run=step)
    calls = [{"id": f"c{i}", "tool": "step", "input": "x"} for i in range(2000)]
    agent = _agent(
        "pressed", calls, {"step": tool}, limits={"max_calls": 2000, "max_concurrency": 4}
    )
    stream = agent.stream({})
    stream._buffer._capacity = 16
    with stream as events:
        read = iter(events)
        next(read)
        assert not far.wait(1.0), "the run went on without its reader"
        kinds = collections.Counter(event.kind for event in read)
    assert kinds["call.started"] == kinds["call.finished"] == 2000
    assert events.result.status == "completed"

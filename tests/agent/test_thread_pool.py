"""Runs that borrow the application's thread pool (`context={"thread_pool": pool}`)."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.testing import scripted_decide

WAIT = 30
"""Seconds before a test gives up on an event that should have been set (never reached)."""
CALLS = 4
INTEGER = {"type": "integer"}


def _batches(turns: int) -> list[Any]:
    calls = [{"id": f"c{i}", "tool": "work", "input": i} for i in range(CALLS)]
    return [{"kind": "continue", "calls": calls}] * turns + [{"kind": "finish", "result": 0}]


def _agent(handler: Any, turns: int = 2, agent_id: str = "borrower") -> Any:
    tool = define_tool(description="Work", input_schema=INTEGER, output_schema=INTEGER, run=handler)
    return define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema=INTEGER,
        initial_state=lambda options: {},
        decide=scripted_decide(_batches(turns)),
        tools={"work": tool},
        limits={"max_concurrency": CALLS},
    )


def _library_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tubeless")]


def test_concurrent_runs_share_the_applications_threads(thread_baseline: int) -> None:
    """Three runs at once run every batch's calls together on the application's pool only."""
    seen: list[list[str]] = []
    lock = threading.Lock()
    barriers = {run: threading.Barrier(CALLS, timeout=WAIT) for run in range(3)}

    def make(run: int) -> Any:
        def handler(value: int, context: Any) -> int:
            barriers[run].wait()  # all four calls of a batch run at once, or this breaks
            with lock:
                seen.append(_library_threads())
            return value

        return _agent(handler)

    agents = [make(run) for run in range(3)]
    with (
        concurrent.futures.ThreadPoolExecutor(12, thread_name_prefix="app") as pool,
        concurrent.futures.ThreadPoolExecutor(3) as sessions,
    ):
        runs = list(sessions.map(lambda a: a.run({}, context={"thread_pool": pool}), agents))

    assert [run.status for run in runs] == ["completed"] * 3
    assert len(seen) == 3 * 2 * CALLS
    assert seen == [[]] * len(seen)


def test_the_applications_pool_shuts_down_after_the_runs(thread_baseline: int) -> None:
    """No task of the library stays on the pool: its `shutdown(wait=True)` returns."""
    pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="app")
    gate = threading.Barrier(CALLS, timeout=WAIT)

    run = _agent(lambda value, context: gate.wait() * 0 + value).run(
        {}, context={"thread_pool": pool}
    )
    closer = threading.Thread(target=pool.shutdown, kwargs={"wait": True})
    closer.start()
    closer.join(WAIT)

    assert run.status == "completed"
    assert not closer.is_alive()


def test_a_shut_down_pool_leaves_the_calls_to_the_calling_thread(thread_baseline: int) -> None:
    """Once the application shut its pool down, batches still complete, one call at a time."""
    pool = concurrent.futures.ThreadPoolExecutor(4)
    pool.shutdown()
    callers: set[str] = set()

    def handler(value: int, context: Any) -> int:
        callers.add(threading.current_thread().name)
        return value

    run = _agent(handler).run({}, context={"thread_pool": pool})

    assert run.status == "completed"
    assert callers == {threading.current_thread().name}


def test_a_subagent_borrows_the_same_pool(thread_baseline: int) -> None:
    """A delegated agent's batches run on the root run's pool, never on a library thread."""
    inside: list[list[str]] = []
    gate = threading.Barrier(CALLS, timeout=WAIT)

    def handler(value: int, context: Any) -> int:
        gate.wait()
        inside.append(_library_threads())
        return value

    child = _agent(handler, turns=1, agent_id="child")
    parent = define_agent(
        id="parent",
        input_schema={"type": "object"},
        result_schema={},
        initial_state=lambda options: {},
        decide=scripted_decide(
            [
                {"kind": "continue", "calls": [{"id": "d", "tool": "child", "input": {}}]},
                {"kind": "finish", "result": 0},
            ]
        ),
        tools={"child": pipeline_tool(child, description="Delegate")},
        limits={"max_concurrency": CALLS},  # the tree's bound: the child's calls count too
    )
    with concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="app") as pool:
        run = parent.run({}, context={"thread_pool": pool})

    assert run.status == "completed", run.errors
    assert inside == [[]] * CALLS


@pytest.mark.parametrize(
    "pool", ["threads", concurrent.futures.ProcessPoolExecutor, object()], ids=type
)
def test_a_thread_pool_that_is_not_one_is_refused(pool: Any) -> None:
    """Anything but a `ThreadPoolExecutor` is a `TypeError` before the run starts."""
    with pytest.raises(TypeError, match="thread_pool"):
        _agent(lambda value, context: value).run({}, context={"thread_pool": pool})

"""Tool handlers on other executors: a real `ProcessPoolExecutor` and a real Dask cluster.

Only the handler body travels; validation, limits, admission order, traces and decision
order stay here. The handlers live in `remote_handlers.py`, which spawned workers import
by name (this directory goes on `sys.path` before any pool or cluster starts).
"""

from __future__ import annotations

import concurrent.futures
import glob
import json
import multiprocessing
import os
import pathlib
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool, tool_from_function
from tubeless.errors import AgentDefinitionError
from tubeless.testing import MemoryTraceSink, scripted_decide

HERE = str(pathlib.Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import remote_handlers  # noqa: E402

X_INPUT: dict[str, Any] = {"type": "object", "required": ["x"]}
ANY: dict[str, Any] = {}
FINISH = {"kind": "finish", "result": "done"}
WAIT = 30


@pytest.fixture(scope="module")
def process_pool() -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    """Two spawned worker processes, shared by this module's tests and shut down after."""
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=2, mp_context=multiprocessing.get_context("spawn")
    )
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def dask_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A `LocalCluster` of two worker processes with one thread each, closed after."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    scratch = str(tmp_path_factory.mktemp("dask"))
    # Dask's scratch space (worker directories and their locks) goes under pytest's tmp.
    with dask.config.set({"temporary-directory": scratch}):
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            local_directory=scratch,
        )
        client = distributed.Client(cluster)
        yield client
        client.close()
        cluster.close()


@pytest.fixture(params=["process", "dask"])
def executor(request: pytest.FixtureRequest) -> concurrent.futures.Executor:
    """Each executor kind in turn (Dask with `pure=False`, as documented)."""
    if request.param == "process":
        pool: concurrent.futures.Executor = request.getfixturevalue("process_pool")
        return pool
    client = request.getfixturevalue("dask_client")
    dask_executor: concurrent.futures.Executor = client.get_executor(pure=False)
    return dask_executor


def _tool(handler: Any, executor: concurrent.futures.Executor | None) -> Any:
    if executor is None:
        return define_tool(description="Work", input_schema=X_INPUT, output_schema=ANY, run=handler)
    return define_tool(
        description="Work", input_schema=X_INPUT, output_schema=ANY, run=handler, executor=executor
    )


def _agent(
    tool: Any, batches: list[list[dict[str, Any]]], concurrency: int, seen: list[Any]
) -> Any:
    def reduce(state: Any, outcomes: Any) -> Any:
        seen.append([dict(outcome) for outcome in outcomes])
        return state

    decide = scripted_decide([{"kind": "continue", "calls": calls} for calls in batches] + [FINISH])
    return define_agent(
        id="remote",
        input_schema={"type": "object"},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide,
        reduce=reduce,
        tools={"work": tool},
        limits={"max_concurrency": concurrency},
    )


def _calls(*inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "tool": "work", "input": value} for i, value in enumerate(inputs)]


def _our_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tubeless")]


def _flags() -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), "tubeless-cancel-*"))


def test_outcomes_come_in_decision_order(executor: concurrent.futures.Executor) -> None:
    """Calls finish in any order on the workers; the reducer sees them as decided."""
    seen: list[Any] = []
    calls = _calls(*({"x": x} for x in (3, 1, 2, 0)))
    run = _agent(_tool(remote_handlers.echo, executor), [calls], 4, seen).run({})
    assert run.status == "completed", run.errors
    assert [(o["id"], o["ok"], o["value"]) for o in seen[0]] == [
        ("c0", True, 3),
        ("c1", True, 1),
        ("c2", True, 2),
        ("c3", True, 0),
    ]
    assert _our_threads() == []


def test_identical_calls_in_one_batch_both_run(dask_client: Any) -> None:
    """Dask's default `pure=True` would merge two identical calls into one task; it cannot."""
    seen: list[Any] = []
    tool = _tool(remote_handlers.token, dask_client.get_executor())  # pure=True by default
    run = _agent(tool, [_calls({"x": 1}, {"x": 1})], 2, seen).run({})
    assert run.status == "completed", run.errors
    first, second = (outcome["value"] for outcome in seen[0])
    assert first != second


def test_identical_calls_run_twice_in_a_process_pool(
    process_pool: concurrent.futures.ProcessPoolExecutor,
) -> None:
    """The same holds for a process pool (nothing there caches by arguments)."""
    seen: list[Any] = []
    run = _agent(
        _tool(remote_handlers.token, process_pool), [_calls({"x": 1}, {"x": 1})], 2, seen
    ).run({})
    assert run.status == "completed", run.errors
    assert len({outcome["value"] for outcome in seen[0]}) == 2


def test_a_remote_tool_error_is_an_outcome(executor: concurrent.futures.Executor) -> None:
    """A `ToolError` raised on a worker comes back as `{code, message}` for the reducer."""
    seen: list[Any] = []
    run = _agent(_tool(remote_handlers.refuse, executor), [_calls({"x": 7})], 1, seen).run({})
    assert run.status == "completed", run.errors
    assert seen[0][0]["ok"] is False
    assert dict(seen[0][0]["error"]) == {"code": "E_REFUSED", "message": "refused 7"}


def test_another_remote_exception_is_fatal_with_type_and_message_only(
    executor: concurrent.futures.Executor,
) -> None:
    """Any other exception fails the run, naming its type and message, never its locals."""
    sink = MemoryTraceSink()
    seen: list[Any] = []
    agent = _agent(_tool(remote_handlers.explode, executor), [_calls({"x": 5})], 1, seen)
    run = agent.run({}, context={"tracing": sink})
    assert run.status == "failed"
    assert seen == []
    text = json.dumps([error.to_dict() for error in run.errors]) + json.dumps(sink.records)
    assert "ValueError" in text
    assert "exploded on 5 (19)" in text
    assert "TUBELESS_AGENT_REMOTE_HANDLER_FAILED" in text
    assert "hunter2" not in text
    assert "Traceback" not in text


def test_cancellation_reaches_running_handlers_and_skips_queued_ones(
    executor: concurrent.futures.Executor, tmp_path: pathlib.Path
) -> None:
    """Two handlers run and wait on the remote signal; the third call, queued on the
    executor (two workers), never runs its handler; the run returns after both drained."""
    signal = threading.Event()

    def cancel_when_both_started() -> None:
        # Which two start first is the executor's choice (Dask does not keep the order).
        for _ in range(WAIT * 100):
            if len(list(tmp_path.glob("started-*"))) >= 2:
                break
            threading.Event().wait(0.01)
        signal.set()

    seen: list[Any] = []
    calls = _calls(*({"x": x, "folder": str(tmp_path)} for x in range(3)))
    agent = _agent(_tool(remote_handlers.wait_for_cancel, executor), [calls], 3, seen)
    canceller = threading.Thread(target=cancel_when_both_started)
    canceller.start()
    run = agent.run({}, context={"signal": signal})
    canceller.join()

    assert run.status == "cancelled"
    assert seen == []
    started = sorted(path.name[len("started-") :] for path in tmp_path.glob("started-*"))
    finished = sorted(path.name for path in tmp_path.glob("finished-*"))
    assert len(started) == 2
    assert finished == [f"finished-{x}-True" for x in started]
    assert _our_threads() == []
    assert _flags() == []


def test_remote_sleep_raises_on_cancellation(
    process_pool: concurrent.futures.ProcessPoolExecutor, tmp_path: pathlib.Path
) -> None:
    """`context.sleep` on a worker ends early, and the call counts as cancelled."""
    signal = threading.Event()

    def cancel_when_started() -> None:
        for _ in range(WAIT * 100):
            if (tmp_path / "started-0").exists():
                break
            threading.Event().wait(0.01)
        signal.set()

    seen: list[Any] = []
    agent = _agent(
        _tool(remote_handlers.sleeper, process_pool),
        [_calls({"x": 0, "folder": str(tmp_path)})],
        1,
        seen,
    )
    canceller = threading.Thread(target=cancel_when_started)
    canceller.start()
    run = agent.run({}, context={"signal": signal})
    canceller.join()
    assert run.status == "cancelled"
    assert (tmp_path / "finished-0").exists()
    assert all(error.kind == "cancellation" for error in run.errors)
    assert _flags() == []


def test_max_concurrency_still_bounds_calls_in_flight(
    executor: concurrent.futures.Executor, tmp_path: pathlib.Path
) -> None:
    """With two free workers and `max_concurrency=1`, call 1 starts only after call 0."""
    seen: list[Any] = []
    calls = _calls(*({"x": x, "folder": str(tmp_path), "seconds": 0.5} for x in range(2)))
    run = _agent(_tool(remote_handlers.overlap_probe, executor), [calls], 1, seen).run({})
    assert run.status == "completed", run.errors
    assert [outcome["value"] for outcome in seen[0]] == [False, False]


def test_the_same_probe_sees_overlap_without_the_bound(
    process_pool: concurrent.futures.ProcessPoolExecutor, tmp_path: pathlib.Path
) -> None:
    """The probe above can fail: with `max_concurrency=2` call 0 sees call 1 start."""
    seen: list[Any] = []
    calls = _calls(*({"x": x, "folder": str(tmp_path), "seconds": WAIT} for x in range(2)))
    run = _agent(_tool(remote_handlers.overlap_probe, process_pool), [calls], 2, seen).run({})
    assert run.status == "completed", run.errors
    assert seen[0][0]["value"] is True


def _shape(sink: MemoryTraceSink) -> list[tuple[Any, ...]]:
    """Names, runs, steps and payload keys, in order; progress records are left out: how
    many go out depends on timing (at most one per 50 ms per attempt, the last kept)."""
    return [
        (r["name"], r.get("pipelineId"), r.get("stepId"), sorted(r.get("payload", {})))
        for r in sink.records
        if "progress" not in r.get("payload", {})
    ]


def test_traces_have_the_shape_of_a_thread_run_tool(executor: concurrent.futures.Executor) -> None:
    """Same record names, in the same order, with the same payload keys."""
    shapes = []
    for where in (None, executor):
        sink = MemoryTraceSink()
        calls = _calls({"x": 1}, {"x": 2})
        batches = [calls, _calls({"x": 3})]
        run = _agent(_tool(remote_handlers.echo, where), batches, 1, []).run(
            {}, context={"tracing": sink}
        )
        assert run.status == "completed", run.errors
        shapes.append(_shape(sink))
    assert shapes[0] == shapes[1]
    assert any(name == "step.attempted" for name, *_ in shapes[0])


def test_a_function_tool_runs_on_an_executor_with_typed_arguments(
    executor: concurrent.futures.Executor,
) -> None:
    """`tool_from_function(executor=)`: the JSON arguments travel, the worker types them."""
    seen: list[Any] = []
    tool = tool_from_function(remote_handlers.days_between, executor=executor)
    call = {"start": "2026-12-01", "end": "2026-12-04"}
    run = _agent(tool, [_calls(call)], 1, seen).run({})
    assert run.status == "completed", run.errors
    assert seen[0][0]["value"]["days"] == 3
    assert seen[0][0]["value"]["pid"] != os.getpid()


def test_an_unpicklable_handler_fails_at_definition(
    process_pool: concurrent.futures.ProcessPoolExecutor,
) -> None:
    """A lambda cannot reach a process pool: the definition says so, with its code."""
    with pytest.raises(AgentDefinitionError, match="cannot be pickled") as caught:
        _tool(lambda value, context: value, process_pool)
    assert caught.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert "<lambda>" in str(caught.value)


def test_a_closure_over_a_lock_fails_at_definition(executor: concurrent.futures.Executor) -> None:
    """Even Dask's cloudpickle, which ships lambdas by value, cannot ship a lock."""
    lock = threading.Lock()

    def guarded(value: Any, context: Any) -> Any:
        with lock:
            return value

    with pytest.raises(AgentDefinitionError, match="cannot be pickled"):
        _tool(guarded, executor)


def test_the_executor_must_be_an_executor() -> None:
    """Anything else is a definition error."""
    with pytest.raises(AgentDefinitionError, match=r"concurrent\.futures\.Executor"):
        _tool(remote_handlers.echo, object())  # type: ignore[arg-type]


def test_the_run_never_shuts_the_executor_down(
    process_pool: concurrent.futures.ProcessPoolExecutor,
) -> None:
    """After runs, the user's pool still takes work."""
    _agent(_tool(remote_handlers.echo, process_pool), [_calls({"x": 1})], 1, []).run({})
    assert process_pool.submit(pow, 2, 5).result(timeout=WAIT) == 32


def test_an_executor_that_refuses_the_call_fails_the_run() -> None:
    """A shut-down pool refuses `submit`: the run fails naming the error's type."""
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=1)
    tool = _tool(remote_handlers.echo, pool)
    pool.shutdown()
    run = _agent(tool, [_calls({"x": 1})], 1, []).run({})
    assert run.status == "failed"
    text = json.dumps([error.to_dict() for error in run.errors])
    assert "RuntimeError" in text
    assert "TUBELESS_AGENT_REMOTE_HANDLER_FAILED" in text

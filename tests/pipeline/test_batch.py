"""`run_many`: one run per input on threads, a process pool or a Dask cluster, resumable.

The pipelines live in `batch_pipelines.py` beside this file, which worker processes import
by name (this directory goes on `sys.path` before any pool or cluster starts).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import os
import pathlib
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import tubeless
from tubeless.trace import SqliteTraceStore

HERE = str(pathlib.Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The test pipelines, the durable one journaling to a fresh store of this module."""
    store = tmp_path_factory.mktemp("batch") / "checkpoints.db"
    os.environ["BATCH_TEST_STORE"] = str(store)
    sys.modules.pop("batch_pipelines", None)
    return importlib.import_module("batch_pipelines")


def _inputs(effects: pathlib.Path, count: int, wait: float = 0) -> list[dict[str, Any]]:
    return [{"n": n, "effects": str(effects), "wait": wait} for n in range(count)]


def _effects(path: pathlib.Path) -> Counter[int]:
    return (
        Counter(int(line) for line in path.read_text().splitlines()) if path.exists() else Counter()
    )


def _batch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tubeless-batch")]


def test_each_input_runs_once_on_threads(pipelines: Any, tmp_path: pathlib.Path) -> None:
    """Every index comes back exactly once with its own value, and no batch thread is left."""
    effects = tmp_path / "effects.txt"
    results = dict(tubeless.run_many(pipelines.doubler, _inputs(effects, 30), max_workers=4))
    assert sorted(results) == list(range(30))
    assert {index: run.value for index, run in results.items()} == {n: 2 * n for n in range(30)}
    assert _effects(effects) == Counter(range(30))
    assert _batch_threads() == []


def test_inputs_are_read_lazily(pipelines: Any, tmp_path: pathlib.Path) -> None:
    """At most `max_workers` inputs are taken from the iterable before a run ends."""
    taken: list[int] = []
    effects = tmp_path / "effects.txt"

    def inputs() -> Iterator[dict[str, Any]]:
        for options in _inputs(effects, 10):
            taken.append(options["n"])
            yield options

    batch = tubeless.run_many(pipelines.doubler, inputs(), max_workers=3)
    next(batch)
    assert len(taken) <= 4
    assert len(list(batch)) == 9


def test_leaving_early_cancels_the_runs_in_flight(pipelines: Any, tmp_path: pathlib.Path) -> None:
    """Closing the batch after one result starts nothing more, cancels and drains the rest."""
    effects = tmp_path / "effects.txt"
    release = threading.Event()
    inputs = _inputs(effects, 20, wait=30)
    inputs[0]["wait"] = 0
    batch = tubeless.run_many(pipelines.doubler, inputs, max_workers=3)
    index, run = next(batch)
    assert (index, run.status) == (0, "completed")
    batch.close()  # what `break` does: waits for the two runs that wait on the signal
    release.set()
    assert sum(_effects(effects).values()) <= 4
    assert _batch_threads() == []


def test_a_durable_batch_run_again_reuses_finished_inputs(
    pipelines: Any, tmp_path: pathlib.Path
) -> None:
    """With `key`, a second batch returns each input from its journal: no call runs again."""
    effects = tmp_path / "effects.txt"
    inputs = [{**options, "n": options["n"] + 1000} for options in _inputs(effects, 8)]
    key = lambda options: f"batch-{options['n']}"  # noqa: E731
    first = dict(tubeless.run_many(pipelines.durable_doubler, inputs, key=key, max_workers=4))
    second = dict(tubeless.run_many(pipelines.durable_doubler, inputs, key=key, max_workers=4))
    assert {i: r.value for i, r in first.items()} == {i: r.value for i, r in second.items()}
    assert all(run.status == "completed" for run in second.values())
    assert _effects(effects) == Counter(range(1000, 1008))


def test_every_run_reaches_the_trace_store(pipelines: Any, tmp_path: pathlib.Path) -> None:
    """A store in the shared context receives the records of every run of the batch."""
    effects = tmp_path / "effects.txt"
    with SqliteTraceStore(tmp_path / "runs.sqlite") as store:
        runs = dict(
            tubeless.run_many(pipelines.doubler, _inputs(effects, 6), context={"tracing": store})
        )
        ids = {record["runId"] for record in store.events() if record.get("parentRunId") is None}
    assert ids == {run.run_id for run in runs.values()}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"executor": "pool"}, "executor must be an Executor"),
        ({"max_workers": 0}, "max_workers must be a positive integer"),
        ({"max_workers": True}, "max_workers must be a positive integer"),
        ({"key": "n"}, "key must be a function"),
        ({"context": [1]}, "context must be a mapping"),
    ],
)
def test_bad_arguments_are_refused_at_the_call(
    pipelines: Any, arguments: dict[str, Any], message: str
) -> None:
    """Each bad argument is named before any run starts."""
    with pytest.raises((TypeError, ValueError), match=message):
        tubeless.run_many(pipelines.doubler, [], **arguments)


def test_a_pipeline_workers_cannot_import_is_refused(tmp_path: pathlib.Path) -> None:
    """A pipeline defined in no importable module cannot go to a process pool."""
    local = tubeless.define_pipeline(
        id="local", steps=[tubeless.create_steps()("one", run=lambda inputs, context: 1)]
    )
    pool = concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    )
    try:
        with pytest.raises(TypeError, match="defined at module level"):
            tubeless.run_many(local, [{}], executor=pool)
    finally:
        pool.shutdown()


@pytest.mark.slow
def test_a_process_pool_runs_each_input_once(pipelines: Any, tmp_path: pathlib.Path) -> None:
    """On spawned processes the pipeline is imported by name; reports come back whole."""
    effects = tmp_path / "effects.txt"
    pool = concurrent.futures.ProcessPoolExecutor(
        2, mp_context=multiprocessing.get_context("spawn")
    )
    try:
        results = dict(tubeless.run_many(pipelines.doubler, _inputs(effects, 12), executor=pool))
    finally:
        pool.shutdown()
    assert {i: r.value for i, r in results.items()} == {n: 2 * n for n in range(12)}
    assert _effects(effects) == Counter(range(12))


@pytest.fixture(scope="module")
def cluster(pipelines: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A `LocalCluster` of two worker processes with two threads each, closed after."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    scratch = str(tmp_path_factory.mktemp("dask"))
    with dask.config.set({"temporary-directory": scratch}):
        local = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=True,
            dashboard_address=None,
            local_directory=scratch,
        )
        client = distributed.Client(local)
        client.run(sys.path.insert, 0, HERE)
        yield client
        client.close()
        local.close()


@pytest.mark.slow
def test_a_dask_cluster_runs_each_input_once(
    pipelines: Any, cluster: Any, tmp_path: pathlib.Path
) -> None:
    """On a real LocalCluster every input runs once and its traces reach the store."""
    effects = tmp_path / "effects.txt"
    executor = cluster.get_executor(pure=False)
    inputs = _inputs(effects, 16)
    inputs.append(dict(inputs[0]))  # an equal input still runs on its own
    with SqliteTraceStore(tmp_path / "runs.sqlite") as store:
        results = dict(
            tubeless.run_many(
                pipelines.doubler, inputs, executor=executor, context={"tracing": store}
            )
        )
    assert {i: r.value for i, r in results.items()} == {
        **{n: 2 * n for n in range(16)},
        16: 0,
    }
    assert _effects(effects) == Counter([*range(16), 0])
    reader = SqliteTraceStore(tmp_path / "runs.sqlite", read_only=True)
    roots = {r["runId"] for r in reader.events() if r.get("parentRunId") is None}
    reader.close()
    assert roots == {run.run_id for run in results.values()}


@pytest.mark.slow
def test_a_killed_worker_leaves_its_inputs_to_the_others(
    pipelines: Any, cluster: Any, tmp_path: pathlib.Path
) -> None:
    """A durable batch finishes every input once a worker dies mid-run; nothing ran twice
    except the calls that were running in the killed worker."""
    effects = tmp_path / "effects.txt"
    inputs = [{**o, "n": o["n"] + 2000, "wait": 0.3} for o in _inputs(effects, 12)]
    executor = cluster.get_executor(pure=False)
    key = lambda options: f"kill-{options['n']}"  # noqa: E731
    pids = list(cluster.run(os.getpid).values())
    results: dict[int, Any] = {}
    for index, run in tubeless.run_many(
        pipelines.durable_doubler, inputs, executor=executor, key=key, max_workers=4
    ):
        results[index] = run
        if len(results) == 2:
            os.kill(pids[0], signal.SIGKILL)
    assert sorted(results) == list(range(12))
    assert {i: r.status for i, r in results.items() if r.status != "completed"} == {}, [
        (r.errors[0].to_dict()) for r in results.values() if r.errors
    ]
    assert {i: r.value for i, r in results.items()} == {i: 2 * (i + 2000) for i in range(12)}
    counts = _effects(effects)
    assert set(counts) == {n + 2000 for n in range(12)}
    assert sum(count - 1 for count in counts.values()) <= 2  # at most the killed worker's two

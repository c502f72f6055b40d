"""The trace-store contract, run against both stores: `SqliteTraceStore` and
`PostgresTraceStore` (on a throwaway PostgreSQL server)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tubeless import create_steps, define_pipeline
from tubeless.errors import TraceRecordError, TraceSinkError, TraceStoreError
from tubeless.trace import PostgresTraceStore, SqliteTraceStore, _sqlite, project_runs

Records = dict[str, dict[str, Any]]
MakeRecord = Callable[..., dict[str, Any]]
OpenStore = Callable[..., Any]


Execute = Callable[[str], object]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[OpenStore, Execute]:
    """The store under test on one fresh database: how to open it (`read_only=` as the
    stores take it), and how another program runs one SQL statement on that database."""
    if request.param == "sqlite":
        path = tmp_path / "runs.sqlite"
        # Pages of 3 rows: every read of the contract crosses page boundaries.
        monkeypatch.setattr(_sqlite, "_PAGE_SIZE", 3)

        def execute_sqlite(statement: str) -> object:
            with contextlib.closing(sqlite3.connect(path)) as connection, connection:
                return connection.execute(statement).fetchall()

        return lambda **options: SqliteTraceStore(path, **options), execute_sqlite
    url = request.getfixturevalue("postgres_url")
    server = request.getfixturevalue("postgres_server")

    def execute_postgres(statement: str) -> object:
        return server.execute(url, statement)

    return lambda **options: PostgresTraceStore(url, **options), execute_postgres


@pytest.fixture
def open_store(backend: tuple[OpenStore, Execute]) -> OpenStore:
    """Open the store under test (`read_only=` as the stores take it)."""
    return backend[0]


def _log(run_id: str, message: str) -> dict[str, Any]:
    return {
        "version": 3,
        "name": "pipeline.log",
        "pipelineId": "p",
        "runId": run_id,
        "timestampMs": 1,
        "payload": {"level": "log", "message": message},
    }


def test_records_read_back_exactly(open_store: OpenStore, every_kind: Records) -> None:
    """Every kind reads back equal, `iteration` and absent-versus-empty fields included."""
    records = list(every_kind.values())
    records[3]["itemKey"] = ""
    with open_store() as store:
        for record in records:
            store.export(record)
        assert store.events() == records
    with open_store(read_only=True) as reader:
        back = reader.events()
    assert back == records
    assert back[2]["iteration"] == records[2]["iteration"]
    assert "correlationId" not in back[1] and back[3]["itemKey"] == ""


@pytest.mark.parametrize(
    "fields",
    [
        {"timestampMs": 1700000000000.0},
        {"timestampMs": 1700000000000.5},
        {"timestampMs": 2**70},
        {"timestampMs": -3},
        {"durationMs": 12},
        {"durationMs": 12.0},
        {"durationMs": 0.1},
        {"durationMs": 2**1100},
        {"version": 3.0},
    ],
)
def test_numbers_keep_their_json_type(
    open_store: OpenStore, make_record: MakeRecord, fields: dict[str, Any]
) -> None:
    """Ints stay ints and floats stay floats, whatever the column's type."""
    record = make_record("step.complete", **fields)
    with open_store() as store:
        store.export(record)
        (back,) = store.events()
    assert back == record
    for key, value in fields.items():
        assert type(back[key]) is type(value)


def test_events_filter_by_run_and_pipeline_in_write_order(open_store: OpenStore) -> None:
    """Filters by run and pipeline work (across SQLite's pages); `event_rows` ids increase;
    reads see the buffer."""
    with open_store() as store:
        for index in range(10):
            record = _log(f"run-{index % 2}", str(index))
            record["pipelineId"] = "even" if index % 2 == 0 else "odd"
            store.export(record)
        assert len(store.events()) == 10
        messages = [record["payload"]["message"] for record in store.events(run_id="run-1")]
        assert messages == ["1", "3", "5", "7", "9"]
        assert len(store.events(pipeline_id="even")) == 5
        assert store.events(run_id="run-1", pipeline_id="even") == []
        ids = [row_id for row_id, _ in store.event_rows()]
        assert ids == sorted(ids) and len(set(ids)) == 10


def test_an_invalid_record_is_refused(open_store: OpenStore, make_record: MakeRecord) -> None:
    """A bad record raises `TraceRecordError` and the store keeps working."""
    with open_store() as store:
        with pytest.raises(TraceRecordError):
            store.export(make_record("pipeline.log", timestampMs="now"))
        store.export(make_record("pipeline.log"))
        assert len(store.events()) == 1


def test_a_closed_store_refuses_calls(open_store: OpenStore) -> None:
    """After `close`, export and `clear_history` raise `TraceSinkError`, reads `TraceStoreError`."""
    store = open_store()
    store.close()
    store.close()
    with pytest.raises(TraceSinkError, match="closed"):
        store.export(_log("run", "late"))
    with pytest.raises(TraceSinkError, match="closed"):
        store.clear_history()
    with pytest.raises(TraceStoreError, match="closed"):
        store.events()


def test_read_only_refuses_to_write_and_to_clear(open_store: OpenStore) -> None:
    """A read-only store reads what was committed and refuses `export` and `clear_history`."""
    with open_store() as store:
        store.export(_log("run", "kept"))
    with open_store(read_only=True) as reader:
        with pytest.raises(TraceSinkError, match="read-only"):
            reader.export(_log("run", "refused"))
        with pytest.raises(TraceSinkError, match="read-only"):
            reader.clear_history()
        assert [record["payload"]["message"] for record in reader.events()] == ["kept"]


def test_rows_cannot_be_updated_or_deleted(backend: tuple[OpenStore, Execute]) -> None:
    """The table is append-only for every connection: UPDATE and DELETE abort."""
    open_store, execute = backend
    with open_store() as store:
        store.export(_log("run", "kept"))
    for statement in (
        "UPDATE pipeline_run_events SET run_id = 'x'",
        "DELETE FROM pipeline_run_events",
    ):
        with pytest.raises(Exception, match="append-only"):
            execute(statement)
    with open_store(read_only=True) as reader:
        assert [record["payload"]["message"] for record in reader.events()] == ["kept"]


def test_clear_history_deletes_every_record_and_ids_keep_growing(open_store: OpenStore) -> None:
    """`clear_history` empties the store; a later record gets a higher id than any before."""
    with open_store() as store:
        for index in range(70):
            store.export(_log("run", str(index)))
        highest = store.event_rows()[-1][0]
        store.clear_history()
        assert store.events() == []
        store.export(_log("run", "after"))
        ((row_id, _),) = store.event_rows()
        assert row_id > highest


def test_threads_share_one_store(open_store: OpenStore) -> None:
    """Records exported from many threads at once are all stored, each thread's in order."""
    barrier = threading.Barrier(4)

    def write(worker: int) -> None:
        barrier.wait()
        for index in range(150):
            store.export(_log(f"run-{worker}", str(index)))

    with open_store() as store:
        threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for worker in range(4):
            messages = [r["payload"]["message"] for r in store.events(run_id=f"run-{worker}")]
            assert messages == [str(index) for index in range(150)]


def test_a_pipeline_run_traced_to_the_store_projects_back(open_store: OpenStore) -> None:
    """A real run's records, read back from the store, project to that run's view."""
    step = create_steps({"type": "object"})
    one = step("one", run=lambda inputs, context: 1)
    two = step("two", run=lambda inputs, context: inputs["one"] + 1, depends_on=[one])
    pipeline = define_pipeline(id="contract", steps=[one, two], finalize=two)
    with open_store() as store:
        run = pipeline.run(context={"tracing": store})
        (stored,) = project_runs(store.events())
    assert (stored.run_id, stored.status) == (run.run_id, "completed")
    assert sorted(step.id for step in stored.steps) == ["one", "two"]


def test_the_longest_ids_are_stored_and_filtered(open_store: OpenStore) -> None:
    """Run and pipeline ids of 4096 random characters are stored and filter exactly."""
    import random

    rng = random.Random(3)
    alphabet = "abcdefghijklmnopqrstuvwxyzäöü漢字😀"
    long_run = "".join(rng.choice(alphabet) for _ in range(4096))
    long_pipeline = "".join(rng.choice(alphabet) for _ in range(4096))
    record = _log(long_run, "long")
    record["pipelineId"] = long_pipeline
    with open_store() as store:
        store.export(record)
        store.export(_log("short", "short"))
        assert store.events(run_id=long_run) == [record]
        assert store.events(pipeline_id=long_pipeline) == [record]

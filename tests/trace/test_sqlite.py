"""The SQLite trace store beyond the contract suite: its schema, batching, writer thread, read-only
mode and several processes (the contract both stores keep is `test_trace_store_contract.py`)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from tubeless.errors import TraceSinkError, TraceStoreError
from tubeless.trace import SqliteTraceStore, _sqlite

REFERENCE_COLUMNS = [
    "id",
    "version",
    "run_id",
    "correlation_id",
    "parent_run_id",
    "pipeline_id",
    "step_id",
    "attempt_id",
    "item_key",
    "event_name",
    "timestamp_ms",
    "duration_ms",
    "payload_json",
    "error_json",
]


def _count(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute("SELECT count(*) FROM pipeline_run_events").fetchone()[0])


def _max_id(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute("SELECT max(id) FROM pipeline_run_events").fetchone()[0])


def _log(run_id: str, message: str) -> dict[str, Any]:
    return {
        "version": 3,
        "name": "pipeline.log",
        "pipelineId": "p",
        "runId": run_id,
        "timestampMs": 1,
        "payload": {"level": "log", "message": message},
    }


def _writer_done(store: SqliteTraceStore) -> None:
    """Wait until the store's writer thread (if any) has ended of itself."""
    writer = store._writer
    if writer is not None:
        writer.join()


def test_the_table_is_the_reference_table_plus_one_column(tmp_path: Path) -> None:
    """The schema is `pipeline_run_events` with its indexes and triggers, plus `extra_json`."""
    path = tmp_path / "runs.sqlite"
    SqliteTraceStore(path).close()
    with sqlite3.connect(path) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(pipeline_run_events)")]
        indexes = {row[1] for row in connection.execute("PRAGMA index_list(pipeline_run_events)")}
        triggers = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
        assert columns == [*REFERENCE_COLUMNS, "extra_json"]
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 3
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {
        "pipeline_run_events_run_id_idx",
        "pipeline_run_events_pipeline_id_idx",
        "pipeline_run_events_timestamp_idx",
    } <= indexes
    assert triggers == {"pipeline_run_events_no_update", "pipeline_run_events_no_delete"}


def test_clear_history_deletes_every_record_and_stays_append_only(tmp_path: Path) -> None:
    """Committed and buffered records go; later ids are higher; rows stay undeletable."""
    path = tmp_path / "runs.sqlite"
    with SqliteTraceStore(path) as store:
        for index in range(70):  # one committed batch and a buffered tail
            store.export(_log("run", str(index)))
        _writer_done(store)
        last_id = _max_id(path)
        store.clear_history()
        assert _count(path) == 0
        assert store.events() == []
        store.export(_log("run", "after"))
        ((row_id, record),) = store.event_rows()
        assert row_id > last_id and record == _log("run", "after")
    with sqlite3.connect(path) as connection:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            connection.execute("DELETE FROM pipeline_run_events")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            connection.execute("UPDATE pipeline_run_events SET run_id = 'x'")


def test_a_failed_clear_deletes_nothing(tmp_path: Path) -> None:
    """When the deletion fails (another writer holds the lock), every row is still there."""
    path = tmp_path / "runs.sqlite"
    with SqliteTraceStore(path) as store:
        store.export(_log("run", "kept"))
        store.flush()
        store._connection.execute("PRAGMA busy_timeout = 0")  # fail at once, not in 30 s
        with sqlite3.connect(path, isolation_level=None) as other:
            other.execute("BEGIN IMMEDIATE")  # holds the write lock
            with pytest.raises(TraceSinkError, match=r"Cannot clear.*locked"):
                store.clear_history()
            other.execute("ROLLBACK")
        assert [r["payload"]["message"] for r in store.events()] == ["kept"]


@pytest.mark.parametrize("read_only", [False, True])
def test_another_schema_version_is_refused(tmp_path: Path, read_only: bool) -> None:
    """A file whose `user_version` is not 3 (nor 0 for a writer) is refused."""
    path = tmp_path / "runs.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(TraceStoreError, match="version 7"):
        SqliteTraceStore(path, read_only=read_only)


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    """Opening a non-database file raises `TraceStoreError`."""
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not a database, just some text of a decent length" * 20)
    with pytest.raises(TraceStoreError):
        SqliteTraceStore(path)


def _batch_sizes(store: SqliteTraceStore) -> list[int]:
    """The sizes of the batches `store` commits from now on, in order, as they are committed."""
    sizes: list[int] = []
    insert = store._insert

    def counted(rows: list[Any]) -> Exception | None:
        sizes.append(len(rows))
        return insert(rows)

    store._insert = counted  # type: ignore[method-assign]
    return sizes


def test_records_are_committed_in_batches_of_64(tmp_path: Path) -> None:
    """A full batch of 64 is one commit; the writer thread ends when no record follows."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    sizes = _batch_sizes(store)
    with store._lock:  # the writer cannot take the buffer while 64 records come
        for index in range(64):
            store._pending.append(_sqlite.store_row(_log("run", str(index))))
        store._hand_over(store._pending)
    _writer_done(store)
    assert sizes == [64]
    assert _count(path) == 64
    store.close()


def test_a_partial_batch_reaches_the_file_without_a_flush(tmp_path: Path) -> None:
    """A record of a slow run is committed by the writer thread without waiting for 63 more."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    store.export(_log("run", "0"))
    _writer_done(store)
    assert _count(path) == 1
    store.export(_log("run", "1"))
    store.export(_log("run", "2"))
    _writer_done(store)
    assert _count(path) == 3
    assert store._writer is None
    store.close()


def test_a_fast_stream_is_still_committed_in_batches(tmp_path: Path) -> None:
    """Records exported back to back share commits: far fewer commits than records."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    sizes = _batch_sizes(store)
    for index in range(64 * 10):
        store.export(_log("run", str(index)))
    store.close()
    assert sum(sizes) == 64 * 10
    assert len(sizes) < 64
    with SqliteTraceStore(path, read_only=True) as reader:
        messages = [record["payload"]["message"] for record in reader.events()]
    assert messages == [str(index) for index in range(64 * 10)]


def test_a_write_error_is_raised_again_by_later_calls(tmp_path: Path) -> None:
    """After a failed commit, export, flush, events and close raise `TraceSinkError` again."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE pipeline_run_events")
    store.export(_log("run", "lost"))
    with pytest.raises(TraceSinkError, match="no such table"):
        store.flush()
    with pytest.raises(TraceSinkError, match="failed earlier"):
        store.export(_log("run", "later"))
    with pytest.raises(TraceSinkError, match="failed earlier"):
        store.events()
    with pytest.raises(TraceSinkError, match="lost records"):
        store.close()
    store.close()


def test_a_failed_batch_commit_is_raised_by_the_next_call(tmp_path: Path) -> None:
    """The writer thread's failure is kept: the next export, flush and close raise it."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE pipeline_run_events")
    for index in range(64):
        store.export(_log("run", str(index)))
    _writer_done(store)
    with pytest.raises(TraceSinkError, match="failed earlier: no such table"):
        store.export(_log("run", "later"))
    with pytest.raises(TraceSinkError, match="failed earlier: no such table"):
        store.flush()
    with pytest.raises(TraceSinkError, match="lost records"):
        store.close()


def test_a_batch_is_committed_whole_or_not_at_all(tmp_path: Path) -> None:
    """A row SQLite refuses fails its whole batch of 64: no row of it is kept."""
    path = tmp_path / "runs.sqlite"
    store = SqliteTraceStore(path)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON pipeline_run_events "
            "WHEN NEW.payload_json LIKE '%\"100\"%' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    for index in range(128):
        store.export(_log("run", str(index)))
    _writer_done(store)
    assert _count(path) == 64
    with pytest.raises(TraceSinkError, match="failed earlier: refused"):
        store.flush()
    with pytest.raises(TraceSinkError, match="lost records"):
        store.close()
    with SqliteTraceStore(path, read_only=True) as reader:
        kept = [record["payload"]["message"] for record in reader.events()]
    assert kept == [str(index) for index in range(64)]


def test_flush_commits_every_batch_and_ends_the_writer(tmp_path: Path) -> None:
    """After `flush` every record is committed in order and no writer thread is left."""
    path = tmp_path / "runs.sqlite"
    with SqliteTraceStore(path) as store:
        for index in range(64 * 20 + 5):
            store.export(_log("run", str(index)))
        store.flush()
        assert store._writer is None
        assert not [t for t in threading.enumerate() if t.name == "tubeless-trace-store"]
        assert _count(path) == 64 * 20 + 5
        messages = [record["payload"]["message"] for record in store.events()]
        assert messages == [str(index) for index in range(64 * 20 + 5)]


def test_no_writer_thread_outlives_a_run(tmp_path: Path) -> None:
    """A run that fills many batches leaves every record committed and no writer behind."""
    from tubeless.pipeline import create_steps, define_pipeline

    steps = create_steps()

    def work(inputs: Any, context: Any) -> int:
        for index in range(300):
            context.log.info(f"line {index}")
        return 1

    pipeline = define_pipeline(id="busy", steps=[steps("work", run=work)])
    path = tmp_path / "runs.sqlite"
    with SqliteTraceStore(path) as store:
        run = pipeline.run(None, context={"tracing": store})
        assert run.status == "completed"
        assert store._writer is None
        assert not [t for t in threading.enumerate() if t.name == "tubeless-trace-store"]
        assert _count(path) == len(store.events()) > 300


def test_reads_wait_for_the_writer_and_see_every_record(tmp_path: Path) -> None:
    """Reads and `clear_history` while batches are queued see, or delete, all of them."""
    with SqliteTraceStore(tmp_path / "runs.sqlite") as store:
        for index in range(64 * 3 + 1):
            store.export(_log("run", str(index)))
        assert len(store.events()) == 64 * 3 + 1
        for index in range(64 * 2):
            store.export(_log("run", str(index)))
        store.clear_history()
        assert store.events() == []


def test_a_corrupt_row_is_reported_by_id(tmp_path: Path) -> None:
    """A row another program wrote that is not a valid record fails the read, naming the row."""
    path = tmp_path / "runs.sqlite"
    SqliteTraceStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO pipeline_run_events (version, run_id, pipeline_id, event_name, "
            "timestamp_ms, payload_json) VALUES (3, 'r', 'p', 'pipeline.log', 1, '{}')"
        )
    with (
        SqliteTraceStore(path, read_only=True) as reader,
        pytest.raises(TraceStoreError, match=r"row 1 .*\$\.payload"),
    ):
        reader.events()


def test_read_only_never_creates_a_file(tmp_path: Path) -> None:
    """Opening a missing store read-only raises and leaves no file behind."""
    path = tmp_path / "missing" / "runs.sqlite"
    with pytest.raises(TraceStoreError, match="not found"):
        SqliteTraceStore(path, read_only=True)
    assert not path.parent.exists()


def test_read_only_refuses_an_uninitialised_file(tmp_path: Path) -> None:
    """A SQLite file that is not a trace store is not initialised by a reader."""
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(TraceStoreError, match="not a trace store"):
        SqliteTraceStore(path, read_only=True)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 0


def test_read_only_sees_what_a_live_writer_committed(tmp_path: Path) -> None:
    """A reader opened while a writer is open sees committed records still in the WAL."""
    path = tmp_path / "runs.sqlite"
    writer = SqliteTraceStore(path)
    writer.export(_log("run", "first"))
    writer.flush()
    with SqliteTraceStore(path, read_only=True) as reader:
        assert len(reader.events()) == 1
        writer.export(_log("run", "second"))
        writer.flush()
        assert len(reader.events()) == 2
    writer.close()


def test_read_only_on_a_closed_store_adds_no_files(tmp_path: Path) -> None:
    """Reading a cleanly closed WAL store reads every record and leaves the directory as it was."""
    path = tmp_path / "runs.sqlite"
    with SqliteTraceStore(path) as writer:
        for index in range(70):
            writer.export(_log("run", f"message {index}"))
    before = sorted(tmp_path.iterdir())
    with SqliteTraceStore(path, read_only=True) as reader:
        messages = [record["payload"]["message"] for record in reader.events()]
        assert sorted(tmp_path.iterdir()) == before
    assert messages == [f"message {index}" for index in range(70)]
    assert sorted(tmp_path.iterdir()) == before == [path]


def test_read_only_beside_an_open_writer_reads_its_commits(tmp_path: Path) -> None:
    """While another connection holds the store open for writing, a reader sees its commits."""
    path = tmp_path / "runs.sqlite"
    SqliteTraceStore(path).close()
    with sqlite3.connect(path, isolation_level=None) as writer:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute(
            "INSERT INTO pipeline_run_events (version, run_id, pipeline_id, event_name, "
            "timestamp_ms, payload_json) VALUES (3, 'live', 'p', 'pipeline.log', 1, "
            '\'{"level":"log","message":"committed"}\')'
        )
        sidecars = sorted(tmp_path.iterdir())
        assert Path(f"{path}-wal") in sidecars
        with SqliteTraceStore(path, read_only=True) as reader:
            assert [record["runId"] for record in reader.events()] == ["live"]
        assert sorted(tmp_path.iterdir()) == sidecars
    writer.close()


def test_read_only_refuses_a_hard_linked_file(tmp_path: Path) -> None:
    """A store file with a second hard link is refused rather than read."""
    path = tmp_path / "runs.sqlite"
    SqliteTraceStore(path).close()
    (tmp_path / "alias.sqlite").hardlink_to(path)
    with pytest.raises(TraceStoreError, match="2 hard links"):
        SqliteTraceStore(path, read_only=True)
    assert sorted(tmp_path.iterdir()) == [tmp_path / "alias.sqlite", path]


def _reference_store(path: Path) -> None:
    """Create a store as the reference implementation does: no `extra_json` column."""
    columns = ", ".join(
        f"{name} {kind}"
        for name, kind in zip(
            REFERENCE_COLUMNS,
            ["INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER NOT NULL", "TEXT NOT NULL"]
            + ["TEXT"] * 2
            + ["TEXT NOT NULL"]
            + ["TEXT"] * 3
            + ["TEXT NOT NULL", "INTEGER NOT NULL", "REAL", "TEXT NOT NULL", "TEXT"],
            strict=True,
        )
    )
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE pipeline_run_events ({columns})")
        connection.execute(
            "INSERT INTO pipeline_run_events (version, run_id, pipeline_id, event_name, "
            "timestamp_ms, payload_json) VALUES (3, 'r', 'p', 'pipeline.log', 1, "
            '\'{"level":"log","message":"from the reference"}\')'
        )
        connection.execute("PRAGMA user_version = 3")


def test_a_reference_store_is_read_and_extended(tmp_path: Path) -> None:
    """A store without `extra_json` is read as is, and gains the column when written."""
    path = tmp_path / "runs.sqlite"
    _reference_store(path)
    with SqliteTraceStore(path, read_only=True) as reader:
        assert reader.events() == [_log("r", "from the reference") | {"pipelineId": "p"}]
    with SqliteTraceStore(path) as store:
        store.export(_log("mine", "appended"))
        assert [record["runId"] for record in store.events()] == ["r", "mine"]


_WRITER = textwrap.dedent(
    """
    import sys
    from tubeless.trace import SqliteTraceStore

    path, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    store = SqliteTraceStore(path)
    for index in range(count):
        store.export({
            "version": 3, "name": "pipeline.log", "pipelineId": "p",
            "runId": "run-" + worker, "timestampMs": index,
            "payload": {"level": "log", "message": str(index)},
        })
    store.close()
    """
)


@pytest.mark.slow
def test_several_processes_append_to_one_new_store(tmp_path: Path) -> None:
    """Processes that create and fill one store at the same moment lose no record."""
    path = tmp_path / "new" / "runs.sqlite"
    workers, count = 4, 700
    with contextlib.ExitStack() as stack:
        processes = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", _WRITER, str(path), str(worker), str(count)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
            for worker in range(workers)
        ]
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        for process in processes:  # release them together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in processes:
            process.communicate(timeout=120)
            assert process.returncode == 0
    with SqliteTraceStore(path, read_only=True) as reader:
        rows = reader.event_rows()
        assert len(rows) == workers * count
        for worker in range(workers):
            records = reader.events(run_id=f"run-{worker}")
            assert [r["payload"]["message"] for r in records] == [str(i) for i in range(count)]
    assert [row_id for row_id, _ in rows] == sorted({row_id for row_id, _ in rows})


def test_an_unusable_path_is_a_store_error(tmp_path: Path) -> None:
    """A path whose parent is a file cannot hold a store: `TraceStoreError`, not `OSError`."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TraceStoreError, match="Cannot open"):
        SqliteTraceStore(blocker / "runs.sqlite")

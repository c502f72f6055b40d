"""A SQLite trace store: an append-only table of records that is a sink and a reader.

The table is `pipeline_run_events`, as the TypeScript tubeless writes it, plus one column,
`extra_json`, for what those columns cannot keep exactly (see `_sqlite_rows`), so a record
read back equals, field for field and type for type, the record written.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from tubeless.errors import TraceSinkError, TraceStoreError
from tubeless.trace._ndjson import FLUSH_INTERVAL
from tubeless.trace._sqlite_rows import COLUMNS, INSERT, Row, store_row
from tubeless.trace._store_state import (
    checked_record,
    close_store,
    raise_if_failed,
    raise_if_unusable,
)
from tubeless.trace._wire import decode_record

__all__ = ["STORE_SCHEMA_VERSION", "SqliteTraceStore"]

STORE_SCHEMA_VERSION = 3
"""The `PRAGMA user_version` of a trace store."""
_BATCH_SIZE = 64
_INSERT_BATCH = INSERT + ", ({})".format(", ".join("?" * 14)) * (_BATCH_SIZE - 1)
"""One statement inserting a full batch: `INSERT ... VALUES (?, ...), (?, ...), ...`."""
_BACKLOG = 8
"""Full batches the writer thread may fall behind by before `export` waits for it."""
_LINGER_SECONDS = 0.05
"""How long the writer thread waits for another record before it ends."""
_PAGE_SIZE = 20_000
_BUSY_TIMEOUT_SECONDS = 30.0

_APPEND_ONLY = "BEGIN SELECT RAISE(ABORT, 'pipeline_run_events is append-only'); END"
_TRIGGERS = {
    "pipeline_run_events_no_update": "UPDATE",
    "pipeline_run_events_no_delete": "DELETE",
}
"""The append-only triggers: name -> the statement each refuses."""
_CREATE_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {event} ON pipeline_run_events {_APPEND_ONLY}"
    for name, event in _TRIGGERS.items()
)
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS pipeline_run_events (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      version INTEGER NOT NULL,
      run_id TEXT NOT NULL,
      correlation_id TEXT,
      parent_run_id TEXT,
      pipeline_id TEXT NOT NULL,
      step_id TEXT,
      attempt_id TEXT,
      item_key TEXT,
      event_name TEXT NOT NULL,
      timestamp_ms INTEGER NOT NULL,
      duration_ms REAL,
      payload_json TEXT NOT NULL,
      error_json TEXT,
      extra_json TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS pipeline_run_events_run_id_idx ON pipeline_run_events(run_id, id)",
    "CREATE INDEX IF NOT EXISTS pipeline_run_events_pipeline_id_idx "
    "ON pipeline_run_events(pipeline_id, id DESC)",
    "CREATE INDEX IF NOT EXISTS pipeline_run_events_timestamp_idx "
    "ON pipeline_run_events(timestamp_ms DESC)",
    *_CREATE_TRIGGERS,
)


@contextlib.contextmanager
def _immediate(connection: sqlite3.Connection) -> Iterator[None]:
    """One `BEGIN IMMEDIATE` transaction: committed at the end, rolled back on any error."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:  # a failed COMMIT may leave it open
            connection.execute("ROLLBACK")
        raise


class SqliteTraceStore:
    """A trace sink and reader backed by one SQLite file (WAL, append-only).

    Records are validated and buffered on the exporting thread; each full batch of 64 is
    committed as one transaction, a single `INSERT` of its rows, by the store's writer
    thread, in order, while the run goes on (`export` waits only when the writer falls 8
    batches behind). A batch that does not fill is committed by the writer within
    `FLUSH_INTERVAL` seconds (50 ms, as the NDJSON sink flushes) of its first record, so
    a slow run's records reach the file as they happen, and a killed run loses at most
    the last 50 ms of them. What else is committed (by `flush`, say) goes in
    `BEGIN IMMEDIATE`. `flush()`, `close()`, `clear_history()` and every read wait for
    the writer, then commit whatever is left. The writer runs only while records come: it
    ends 50 ms after the last commit, and at `flush()` (which every run calls at its end)
    and `close()`, so none outlives a run. Other connections see a record only once it
    is committed. Several threads and several processes may append
    to one store at once: writers wait up to 30 seconds for each other. After a write
    fails, every later call raises that failure again (a failure of the writer thread's
    commit is raised by the next call).

    Args:
        path: the database file. Unless `read_only`, missing parent directories and the
            file are created, and a new file is initialised (`PRAGMA user_version = 3`).
        read_only: open an existing store for reading only: no database is created,
            initialised or migrated, `export` raises, and no file is added beside it.
            Records committed by a writer that is still running are read, through the
            `-wal` and `-shm` files it keeps open. A file with several hard links is refused.

    Raises:
        TraceStoreError: when the file cannot be opened, is missing or hard-linked
            (`read_only`), is not a SQLite database, or has a `user_version` other than 3
            (or 0 when writable).
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self._path = Path(path)
        self._label = str(self._path)
        self._read_only = read_only
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: list[Row] = []
        self._pending_since = 0.0
        """The `time.monotonic()` at which the oldest row of `_pending` was buffered."""
        self._batches: deque[list[Row]] = deque()
        """Full batches waiting for the writer thread, oldest first."""
        self._writer: threading.Thread | None = None
        self._writing = False
        """Whether the writer thread is committing a batch (it holds the connection)."""
        self._stopping = False
        self._error: BaseException | None = None
        self._closed = False
        self._connection = self._open()
        try:
            self._check_schema()
            self._extra_column = self._has_extra_column()
        except BaseException:
            self._connection.close()
            raise

    def _open(self) -> sqlite3.Connection:
        if self._read_only:
            target, uri = self._read_only_uri(), True
        else:
            target, uri = str(self._path), False
        try:
            if not self._read_only:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                target,
                timeout=_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
                uri=uri,
            )
        except (sqlite3.Error, OSError) as error:
            raise TraceStoreError(f"Cannot open trace store {self._path}: {error}") from error
        return connection

    def _read_only_uri(self) -> str:
        """Return the URI that reads the store without adding files beside it.

        Raises:
            TraceStoreError: when the file is missing or has several hard links.
        """
        if not self._path.is_file():
            raise TraceStoreError(f"Trace store not found: {self._path}")
        real = self._path.resolve()
        try:
            links = real.stat().st_nlink
        except OSError as error:
            raise TraceStoreError(f"Cannot open trace store {self._path}: {error}") from error
        if links > 1:
            # Sidecar files and locks follow one name; another name for the file escapes them.
            raise TraceStoreError(
                f"Cannot open trace store {self._path}: the file has {links} hard links"
            )
        uri = f"{real.as_uri()}?mode=ro"
        if any(real.with_name(real.name + suffix).exists() for suffix in ("-wal", "-shm")):
            # A writer may be live: read its committed WAL records under SQLite's locking.
            # The files exist already, so SQLite creates nothing new.
            return uri
        # No sidecars, so no WAL writer is active (one keeps them while open) and the file
        # is read as it is, without the -wal and -shm files WAL mode would otherwise create.
        return f"{uri}&immutable=1"

    def _check_schema(self) -> None:
        try:
            version = self._pragma("user_version")
            if self._read_only and version != STORE_SCHEMA_VERSION:
                raise TraceStoreError(f"{self._path} is not a trace store (version {version})")
            if version not in (0, STORE_SCHEMA_VERSION):
                raise TraceStoreError(
                    f"{self._path} has trace store version {version}; "
                    f"expected {STORE_SCHEMA_VERSION}"
                )
            if not self._read_only:
                self._initialise()
        except sqlite3.Error as error:
            raise TraceStoreError(f"Cannot open trace store {self._path}: {error}") from error

    def _initialise(self) -> None:
        connection = self._connection
        self._enable_wal()
        self._pragma("synchronous = NORMAL")
        self._pragma("foreign_keys = ON")
        with _immediate(connection):
            for statement in _SCHEMA:
                connection.execute(statement)
            if not self._has_extra_column():
                # A store written by the TypeScript tubeless lacks this column.
                connection.execute("ALTER TABLE pipeline_run_events ADD COLUMN extra_json TEXT")
            connection.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")

    def _enable_wal(self) -> None:
        # Switching to WAL takes an exclusive lock without SQLite's busy handler, so
        # processes creating one store together retry here for up to the busy timeout.
        deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
        delay = 0.001
        while self._pragma("journal_mode") != "wal":
            try:
                self._pragma("journal_mode = WAL")
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _pragma(self, statement: str) -> Any:
        # fetchall() runs the statement to completion, so it holds no lock afterwards.
        rows = self._connection.execute(f"PRAGMA {statement}").fetchall()
        return rows[0][0] if rows else None

    def _has_extra_column(self) -> bool:
        rows = self._connection.execute("PRAGMA table_info(pipeline_run_events)").fetchall()
        return any(row[1] == "extra_json" for row in rows)

    def export(self, record: dict[str, Any]) -> None:
        """Validate `record` and buffer it for the writer thread (see the class docstring).

        Raises:
            TraceRecordError: when `record` is not a valid trace record, or holds text that
                is not UTF-8 (nothing is stored; the store stays usable).
            TraceSinkError: when the store is read-only or closed, or a commit failed
                before.
        """
        decode_record(record)
        row = store_row(record)
        with self._lock:
            raise_if_unusable(self)
            if self._read_only:
                raise TraceSinkError(f"Trace store {self._path} was opened read-only")
            pending = self._pending
            pending.append(row)
            if len(pending) >= _BATCH_SIZE:
                self._hand_over(pending)
            elif len(pending) == 1:
                self._pending_since = time.monotonic()
                self._wake_writer()

    def _hand_over(self, batch: list[Row]) -> None:
        """Queue a full batch for the writer thread, starting it if need be (lock held)."""
        self._pending = []
        self._batches.append(batch)
        self._wake_writer()
        while len(self._batches) > _BACKLOG and self._writer is not None:
            self._changed.wait()

    def _wake_writer(self) -> None:
        """Start the writer thread, or tell the running one that rows came (lock held)."""
        if self._stopping:
            return  # `flush` or `close` is stopping the writer; it commits what is left
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._write_batches, name="tubeless-trace-store", daemon=True
            )
            self._writer.start()
        else:
            self._changed.notify_all()

    def _next_batch(self) -> list[Row] | None:
        """The writer's next batch: a full one, or the buffer once it is due (lock held).

        Returns `None` when the writer should end: it is being stopped, or nothing came for
        `_LINGER_SECONDS`.
        """
        while not self._batches:
            if self._stopping:
                return None
            if not self._pending:
                came = self._changed.wait_for(
                    lambda: self._batches or self._pending or self._stopping, _LINGER_SECONDS
                )
                if not came:
                    return None
                continue
            wait = self._pending_since + FLUSH_INTERVAL - time.monotonic()
            if wait <= 0:
                batch, self._pending = self._pending, []
                return batch
            self._changed.wait(wait)
        return self._batches.popleft()

    def _write_batches(self) -> None:
        """The writer thread: commit the batches and due buffers in order; end when idle."""
        with self._lock:
            try:
                while self._error is None:
                    batch = self._next_batch()
                    if batch is None:
                        return
                    self._writing = True
                    self._lock.release()
                    try:
                        error = self._insert(batch)
                    finally:
                        self._lock.acquire()
                        self._writing = False
                        self._changed.notify_all()
                    if error is not None:
                        self._error = error
                        self._batches.clear()
            finally:
                self._writer = None
                self._changed.notify_all()

    def _insert(self, rows: list[Row]) -> Exception | None:
        """Commit `rows` in one transaction; return the failure instead of raising it.

        A full batch is one `INSERT` of all its rows, run on its own: SQLite makes the
        statement its own transaction, taking the write lock before it writes (waiting as
        `BEGIN IMMEDIATE` would) and committing or rolling back every row together. That
        is one call into SQLite per batch instead of one per row, so the writer thread
        takes the GIL back once, not 64 times, while the run's threads hold it.
        """
        connection = self._connection
        try:
            if len(rows) == _BATCH_SIZE:
                connection.execute(_INSERT_BATCH, list(itertools.chain.from_iterable(rows)))
            else:
                with _immediate(connection):
                    connection.executemany(INSERT, rows)
        except Exception as error:  # sqlite3.Error, or MemoryError's kin: reported later
            return error
        return None

    def _stop_writer(self) -> None:
        """End the writer thread after it committed every queued batch, and wait for it."""
        with self._lock:
            writer = self._writer
            if writer is None:
                return
            self._stopping = True
            self._changed.notify_all()
        try:
            writer.join()
        finally:
            with self._lock:
                self._stopping = False

    def flush(self) -> None:
        """Commit the buffered records.

        Raises:
            TraceSinkError: when the commit fails, or an earlier one failed.
        """
        self._stop_writer()
        with self._lock:
            raise_if_unusable(self)
            self._commit()

    def clear_history(self) -> None:
        """Delete every stored record, in one transaction, after committing the buffer.

        The append-only triggers are dropped for the deletion and restored in the same
        transaction, so rows still cannot be updated or deleted one by one. Row ids keep
        growing: a record written later gets a higher id than any deleted one.

        Raises:
            TraceSinkError: when the store is read-only or closed, or a commit or the
                deletion fails now (nothing is deleted then) or a commit failed before.
        """
        with self._lock:
            raise_if_unusable(self)
            if self._read_only:
                raise TraceSinkError(f"Trace store {self._path} was opened read-only")
            self._commit()
            connection = self._connection
            try:
                with _immediate(connection):
                    for trigger in _TRIGGERS:
                        connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                    connection.execute("DELETE FROM pipeline_run_events")
                    for statement in _CREATE_TRIGGERS:
                        connection.execute(statement)
            except sqlite3.Error as error:
                raise TraceSinkError(f"Cannot clear trace store {self._path}: {error}") from error

    def close(self) -> None:
        """Commit the buffered records and close the database; closing twice is harmless.

        Raises:
            TraceSinkError: when the final commit fails, or an earlier one failed.
        """
        self._stop_writer()
        close_store(self, self._connection.close)

    def events(
        self, run_id: str | None = None, pipeline_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Return the stored records in write order, optionally of one run or pipeline.

        Raises:
            TraceStoreError: when a stored row is not a valid trace record, or holds a
                definition snapshot that no longer matches its fingerprints.
            TraceSinkError: when committing the buffer fails, or an earlier commit failed.
        """
        return [record for _, record in self.event_rows(run_id, pipeline_id)]

    def event_rows(
        self, run_id: str | None = None, pipeline_id: str | None = None
    ) -> list[tuple[int, dict[str, Any]]]:
        """Return `(row id, record)` pairs in write order; ids only grow.

        Raises:
            TraceStoreError: when a stored row is not a valid trace record, or holds a
                definition snapshot that no longer matches its fingerprints.
            TraceSinkError: when committing the buffer fails, or an earlier commit failed.
        """
        with self._lock:
            if self._closed:
                raise TraceStoreError(f"Trace store {self._path} is closed")
            raise_if_unusable(self)
            self._commit()
            return list(self._read_rows(run_id, pipeline_id))

    def _read_rows(
        self, run_id: str | None, pipeline_id: str | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        extra = "extra_json" if self._extra_column else "NULL"
        columns = COLUMNS.replace("extra_json", extra)
        where, parameters = "id > ?", []
        for column, value in (("run_id", run_id), ("pipeline_id", pipeline_id)):
            if value is not None:
                where += f" AND {column} = ?"
                parameters.append(value)
        query = (
            f"SELECT id, {columns} FROM pipeline_run_events "
            f"WHERE {where} ORDER BY id LIMIT {_PAGE_SIZE}"
        )
        connection = self._connection
        try:
            connection.execute("BEGIN")  # one snapshot across every page
            try:
                after = -1
                while True:
                    page = connection.execute(query, [after, *parameters]).fetchall()
                    for row in page:
                        yield row[0], checked_record(self._label, row)
                    if len(page) < _PAGE_SIZE:
                        return
                    after = page[-1][0]
            finally:
                connection.execute("COMMIT")
        except sqlite3.Error as error:
            raise TraceStoreError(f"Cannot read trace store {self._path}: {error}") from error

    def _commit(self) -> None:
        """Commit the queued batches and the buffer on this thread (lock held).

        It waits until the writer thread is not inside a commit; holding the lock, it
        keeps the writer from taking another batch while it uses the connection.
        """
        while self._writing:
            self._changed.wait()
        raise_if_failed(self)
        rows = [row for batch in self._batches for row in batch]
        rows += self._pending
        self._batches.clear()
        self._pending = []
        if not rows:
            return
        error = self._insert(rows)
        if error is not None:
            self._error = error
            raise TraceSinkError(f"Cannot write trace store {self._path}: {error}") from error

    def __reduce__(self) -> tuple[Any, ...]:
        # A store travels as its path (to a batch's worker process, say): the other
        # process opens its own connection; buffered records stay with this one.
        return functools.partial(SqliteTraceStore, read_only=self._read_only), (str(self._path),)

    def __enter__(self) -> SqliteTraceStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

"""The SQLite checkpoint store (the protocol every store follows: `_checkpoint_lease`).

`SqliteCheckpointStore` keeps checkpoints in their own SQLite file (WAL,
`synchronous=FULL`, created with mode 0600; layout version 2: snapshots in
`agent_checkpoints`, change logs in `agent_checkpoint_changes`, a version 1 file gaining
the second table from its first lease) and leases keys with `flock` on one empty
lock file per key in the directory `<path>-locks` (the kernel drops the lock with the
last descriptor of a dead process; there are no PID files to go stale). `sqlite3` loads
when the first lease is taken. Creating the file is safe when several threads or
processes lease their keys at once (the schema is made in one immediate transaction; a
lock met while creating is waited out). Inspection (`keys`, `read`,
`pending_approvals`) opens the file read-only and creates nothing, so it works on a file
the reader may not write. Every storage failure is a `CheckpointStoreError` naming the
store and the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import tempfile
import threading
import time
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tubeless.agent._approvals import checkpoint_pending_approvals
from tubeless.agent._checkpoint_lease import busy_error
from tubeless.agent._journal_changes import fold_changes
from tubeless.agent._store_errors import (
    WRITE_FAILED_CODE,
    damaged,
    is_busy,
    not_a_store,
    read_error,
    write_error,
)
from tubeless.errors import AgentError, CheckpointStoreError

if TYPE_CHECKING:
    import sqlite3

    from tubeless.errors import PendingApproval

_BUSY_TIMEOUT_SECONDS = 30.0
_READ_ONLY_OPEN = ("SQLITE_READONLY", "SQLITE_CANTOPEN")
_SCHEMA_VERSION = 2
"""1: snapshots only; 2: the change log beside them (a version 1 file is upgraded by the
first lease, in the transaction that checks the schema)."""
_TABLES = (
    "CREATE TABLE IF NOT EXISTS agent_checkpoints ("
    "key TEXT PRIMARY KEY NOT NULL, checkpoint TEXT NOT NULL, writes INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agent_checkpoint_changes ("
    "key TEXT NOT NULL, seq INTEGER NOT NULL, change TEXT NOT NULL, PRIMARY KEY (key, seq)) "
    "WITHOUT ROWID",
)
_READ_SNAPSHOT = "SELECT CAST(checkpoint AS BLOB) FROM agent_checkpoints WHERE key = ?"
_READ_CHANGES = (
    "SELECT CAST(change AS BLOB) FROM agent_checkpoint_changes WHERE key = ? ORDER BY seq"
)


def _tables(connection: sqlite3.Connection) -> list[str]:
    """The names of the tables (and indexes) in the database behind `connection`."""
    return [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]


def _private_file(path: Path) -> None:
    """Create `path` with mode 0600 if it does not exist (never loosening an existing one).

    The database file itself is never opened here: SQLite's locks are POSIX record locks,
    which a process loses on a file the moment it closes *any* descriptor of it, so an
    open and close beside a live connection would let another process write under it
    (seen as `file is not a database` after a sibling worker was killed). The file is
    made as a private temporary, closed, then hard-linked into place.
    """
    if path.exists():
        return
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(descriptor)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another thread or process made it first
    finally:
        os.unlink(temporary)


def _creating(prepare: Callable[[], None]) -> None:
    """Run `prepare` (making the file's schema), waiting out locks other creators hold.

    SQLite answers some lock conflicts of a brand-new file (switching it to WAL, say) at
    once instead of calling its busy handler; only these setup steps are retried.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
    pause = 0.002
    while True:
        try:
            prepare()
            return
        except Exception as error:
            if not is_busy(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))  # jitter, not secrecy
        pause = min(pause * 2, 0.1)


def _text(value: object, store: str, key: str) -> str:
    """A stored checkpoint (read as bytes, so damage is ours to name) as text."""
    if not isinstance(value, bytes):
        raise damaged(store, key, "the checkpoint is not text")
    return value.decode("utf-8")


def _read_checkpoint(connection: sqlite3.Connection, store: str, key: str) -> str | None:
    """The snapshot of `key` with its change log replayed, read in one transaction.

    Raises:
        CheckpointStoreError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a damaged snapshot
            or change log; SQLite's own errors pass through.
    """
    import sqlite3

    connection.execute("BEGIN")
    try:
        row = connection.execute(_READ_SNAPSHOT, (key,)).fetchone()
        try:
            rows = connection.execute(_READ_CHANGES, (key,)).fetchall()
        except sqlite3.OperationalError:
            if "agent_checkpoint_changes" in _tables(connection):
                raise
            rows = []  # a version 1 file, read without upgrading it
    finally:
        connection.execute("COMMIT")
    if row is None:
        if rows:
            raise damaged(store, key, "a change log without its checkpoint")
        return None
    snapshot = _text(row[0], store, key)
    try:
        return fold_changes(snapshot, [_text(change, store, key) for (change,) in rows])
    except CheckpointStoreError:
        raise
    except AgentError as error:
        raise damaged(store, key, error.message) from error


@typing.final
class SqliteCheckpointStore:
    """Checkpoints in a SQLite file of their own (never the trace store's file).

    Args:
        path: the database file; created (mode 0600) with its parent directory when
            missing. Key locks live in the directory `<path>-locks` beside it.

    Each lease opens its own connection, so leases of different keys write in parallel
    (SQLite serialises the commits); `write` is one transaction with `synchronous=FULL`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._locks = self.path.with_name(self.path.name + "-locks")
        self._ready = False
        self._ready_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteCheckpointStore({str(self.path)!r})"

    def _connect(self, key: str) -> sqlite3.Connection:
        """A read-write connection for a lease, creating the file and its schema."""
        import sqlite3  # on first use: `import tubeless` never loads SQLite

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _private_file(self.path)
            connection = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except (sqlite3.Error, OSError) as error:
            raise read_error(error, store=str(self.path), key=key, action="open") from error
        try:
            _creating(lambda: self._prepare(connection))
        except sqlite3.Error as error:
            connection.close()
            raise read_error(error, store=str(self.path), key=key, action="open") from error
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """WAL, full sync, and (once per store object) the schema in one transaction."""
        import sqlite3

        if connection.execute("PRAGMA journal_mode = WAL").fetchone()[0] != "wal":
            raise sqlite3.OperationalError("cannot switch to WAL mode")
        connection.execute("PRAGMA synchronous = FULL")
        with self._ready_lock:
            if self._ready:
                return
            connection.execute("BEGIN IMMEDIATE")
            try:
                self._check_version(connection)
                for table in _TABLES:
                    connection.execute(table)
                connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                connection.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise
            self._ready = True

    def _check_version(self, connection: sqlite3.Connection, key: str | None = None) -> int:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if version not in (0, 1, _SCHEMA_VERSION):
            tables = _tables(connection)
            if "agent_checkpoints" not in tables:
                raise not_a_store(str(self.path), key, tables)
            raise damaged(
                str(self.path),
                key,
                f"checkpoint store version {version}, expected {_SCHEMA_VERSION}",
            )
        return version

    def _lock(self, key: str) -> int:
        """Open and `flock` the key's lock file; the descriptor holds the lease."""
        import fcntl

        try:
            self._locks.mkdir(mode=0o700, parents=True, exist_ok=True)
            name = hashlib.sha256(key.encode("utf-8")).hexdigest() + ".lock"
            descriptor = os.open(self._locks / name, os.O_CREAT | os.O_RDWR, 0o600)
        except OSError as error:
            raise read_error(error, store=str(self.path), key=key, action="open") from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise busy_error(key) from None
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def acquire(self, key: str) -> _SqliteLease:
        """Lease `key` (see `CheckpointStore.acquire`).

        Raises:
            AgentError: `TUBELESS_AGENT_EXECUTION_BUSY` when a live lease (in this or any
                other process) holds `key`.
            CheckpointStoreError: `TUBELESS_AGENT_CHECKPOINT_READ_FAILED` when the file
                cannot be opened (or created), `TUBELESS_AGENT_CHECKPOINT_INVALID` when it
                is damaged.
        """
        descriptor = self._lock(key)
        try:
            connection = self._connect(key)
        except BaseException:
            os.close(descriptor)
            raise
        return _SqliteLease(self.path, key, connection, descriptor)

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that can only read (and creates no file, not even the WAL index).

        A WAL file needs its shared-memory index, which a reader that may not write the
        directory cannot create; with no WAL file to read, the database file alone is the
        whole checkpoint store, so it is opened as immutable.
        """
        import sqlite3

        uri = self.path.absolute().as_uri()
        connection = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None
        )
        try:
            self._check_version(connection)
            return connection
        except sqlite3.Error as error:
            connection.close()
            wal = self.path.with_name(self.path.name + "-wal")
            name = getattr(error, "sqlite_errorname", "") or ""
            if not name.startswith(_READ_ONLY_OPEN) or wal.exists():
                raise
        except BaseException:
            connection.close()
            raise
        connection = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)
        try:
            self._check_version(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    @contextlib.contextmanager
    def _reading(self, key: str | None) -> Iterator[sqlite3.Connection | None]:
        """A read-only connection whose checkpoint table exists, or `None` for none."""
        import sqlite3

        if not self.path.exists():
            yield None
            return
        store = str(self.path)
        try:
            connection = self._connect_read_only()
        except sqlite3.Error as error:
            raise read_error(error, store=store, key=key, action="open") from error
        try:
            tables = _tables(connection)
            if "agent_checkpoints" in tables:
                yield connection
            elif tables:
                raise not_a_store(store, key, tables)
            else:
                yield None  # a file being created by a first lease right now
        except (sqlite3.Error, UnicodeDecodeError) as error:
            raise read_error(error, store=store, key=key, action="read") from error
        finally:
            connection.close()

    def keys(self) -> list[str]:
        """Every key with a saved checkpoint, sorted (none when the file does not exist).

        Raises:
            CheckpointStoreError: when the file cannot be read or is damaged.
        """
        with self._reading(None) as connection:
            if connection is None:
                return []
            rows = connection.execute(
                "SELECT CAST(key AS BLOB) FROM agent_checkpoints ORDER BY key"
            ).fetchall()
            return [bytes(row[0]).decode("utf-8") for row in rows]

    def read(self, key: str) -> str | None:
        """The checkpoint saved under `key`, read without leasing it (for inspection).

        Raises:
            CheckpointStoreError: when the file cannot be read or is damaged.
        """
        with self._reading(key) as connection:
            if connection is None:
                return None
            return _read_checkpoint(connection, str(self.path), key)

    def pending_approvals(self, key: str) -> tuple[PendingApproval, ...]:
        """The calls of execution `key` waiting for approval, read without leasing it.

        Empty when nothing waits (or the key or the file does not exist).

        Raises:
            CheckpointStoreError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a corrupt file or
                checkpoint, `TUBELESS_AGENT_CHECKPOINT_READ_FAILED` for a file that cannot
                be read.
        """
        text = self.read(key)
        try:
            return checkpoint_pending_approvals(text)
        except CheckpointStoreError:
            raise
        except AgentError as error:
            raise damaged(str(self.path), key, error.message) from error


class _SqliteLease:
    """One key's lease: a connection and the key's `flock`ed descriptor."""

    def __init__(
        self, path: Path, key: str, connection: sqlite3.Connection, descriptor: int
    ) -> None:
        self._path = path
        self._key = key
        self._connection: sqlite3.Connection | None = connection
        self._descriptor = descriptor

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise AgentError("Checkpoint lease is closed", code=WRITE_FAILED_CODE)
        return self._connection

    def read(self) -> str | None:
        """The saved checkpoint text, or `None`.

        Raises:
            CheckpointStoreError: when the file cannot be read or is damaged.
        """
        import sqlite3

        store = str(self._path)
        try:
            return _read_checkpoint(self._open(), store, self._key)
        except (sqlite3.Error, UnicodeDecodeError) as error:
            raise read_error(error, store=store, key=self._key, action="read") from error

    def write(self, text: str) -> None:
        """Replace the checkpoint and drop its change log, in one durable transaction.

        Raises:
            CheckpointStoreError: `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when SQLite
                refuses, with the operating system's reason when one explains it.
        """
        self._transaction(
            text,
            (
                "INSERT INTO agent_checkpoints (key, checkpoint, writes) VALUES (?, ?, 1) "
                "ON CONFLICT (key) DO UPDATE SET checkpoint = excluded.checkpoint, "
                "writes = writes + 1",
                (self._key, text),
            ),
            ("DELETE FROM agent_checkpoint_changes WHERE key = ?", (self._key,)),
        )

    def append(self, change: str) -> None:
        """Add `change` to the checkpoint's change log in one durable transaction.

        Raises:
            CheckpointStoreError: as `write`.
        """
        self._transaction(
            change,
            (
                "INSERT INTO agent_checkpoint_changes (key, seq, change) "
                "SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM agent_checkpoint_changes "
                "WHERE key = ?",
                (self._key, change, self._key),
            ),
        )

    def _transaction(self, text: str, *statements: tuple[str, tuple[str, ...]]) -> None:
        """Run `statements` in one transaction (`text`: what they save, for errors)."""
        import sqlite3

        try:
            connection = self._open()
            if len(statements) == 1:
                connection.execute(*statements[0])
                return
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    connection.execute(*statement)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            path = self._path
            raise write_error(
                error,
                store=str(path),
                key=self._key,
                files=(path, path.with_name(path.name + "-wal")),
                size=len(text.encode("utf-8", "surrogatepass")),
            ) from error

    def close(self) -> None:
        """Close the connection and release the key's lock."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.close()
        finally:
            os.close(self._descriptor)

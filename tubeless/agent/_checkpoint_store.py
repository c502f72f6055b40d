"""Checkpoint stores: where a durable agent's journal lives between processes.

A store hands out one lease per execution key. `lease.read()` returns the saved
checkpoint text (or `None`), `lease.write(text)` replaces it atomically and returns only
once it is durable, `lease.close()` gives the key up and deletes nothing. One live lease
per key, across processes: a second owner gets `TUBELESS_AGENT_EXECUTION_BUSY`, and a
lease whose process died is released by the operating system.

`SqliteCheckpointStore` keeps checkpoints in their own SQLite file (WAL,
`synchronous=FULL`, created with mode 0600) and leases keys with `flock` on one empty
lock file per key in the directory `<path>-locks` (the kernel drops the lock with the
last descriptor of a dead process; there are no PID files to go stale). `sqlite3` loads
when the first lease is taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tubeless._quote import quote
from tubeless.agent._approvals import checkpoint_pending_approvals
from tubeless.errors import AgentError

if TYPE_CHECKING:
    import sqlite3

    from tubeless.errors import PendingApproval

BUSY_CODE = "TUBELESS_AGENT_EXECUTION_BUSY"
WRITE_FAILED_CODE = "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"
_BUSY_TIMEOUT_SECONDS = 30.0
_SCHEMA_VERSION = 1
_TABLE = (
    "CREATE TABLE IF NOT EXISTS agent_checkpoints ("
    "key TEXT PRIMARY KEY NOT NULL, checkpoint TEXT NOT NULL, writes INTEGER NOT NULL)"
)


@runtime_checkable
class CheckpointLease(Protocol):
    """Ownership of one execution key, from `CheckpointStore.acquire` until `close()`."""

    def read(self) -> str | None:
        """The saved checkpoint text, or `None` when the key has none yet."""
        ...

    def write(self, text: str) -> None:
        """Replace the checkpoint atomically; return only once it is durable.

        A lease that can expire raises `AgentError` with `TUBELESS_AGENT_LEASE_LOST` once
        another owner took the key over: the run then stops before its next dispatch.
        """
        ...

    def close(self) -> None:
        """Release the key; the checkpoint stays."""
        ...


@runtime_checkable
class CheckpointStore(Protocol):
    """Anything with `acquire(key) -> CheckpointLease` can hold a durable agent's journal."""

    def acquire(self, key: str) -> CheckpointLease:
        """Own `key` until the lease is closed.

        Raises:
            AgentError: `TUBELESS_AGENT_EXECUTION_BUSY` when another lease holds `key`.
        """
        ...


def busy_error(key: str) -> AgentError:
    """The error of a second owner of `key`."""
    return AgentError(
        f"Execution {quote(key)} is running elsewhere (its checkpoint is leased)", code=BUSY_CODE
    )


def _private_file(path: Path) -> None:
    """Create `path` with mode 0600 if it does not exist (never loosening an existing one)."""
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(descriptor)


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

    def _connect(self) -> sqlite3.Connection:
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
            raise AgentError(
                f"Cannot open checkpoint store {self.path}: {error}", code=WRITE_FAILED_CODE
            ) from error
        try:
            connection.execute("PRAGMA busy_timeout = 30000")
            if connection.execute("PRAGMA journal_mode = WAL").fetchone()[0] != "wal":
                raise sqlite3.OperationalError("cannot switch to WAL mode")
            connection.execute("PRAGMA synchronous = FULL")
            with self._ready_lock:
                if not self._ready:
                    version = connection.execute("PRAGMA user_version").fetchone()[0]
                    if version not in (0, _SCHEMA_VERSION):
                        raise sqlite3.DatabaseError(
                            f"checkpoint store version {version}, expected {_SCHEMA_VERSION}"
                        )
                    connection.execute(_TABLE)
                    connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                    self._ready = True
        except sqlite3.Error as error:
            connection.close()
            raise AgentError(
                f"Cannot open checkpoint store {self.path}: {error}", code=WRITE_FAILED_CODE
            ) from error
        return connection

    def _lock(self, key: str) -> int:
        """Open and `flock` the key's lock file; the descriptor holds the lease."""
        import fcntl

        self._locks.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = hashlib.sha256(key.encode("utf-8")).hexdigest() + ".lock"
        descriptor = os.open(self._locks / name, os.O_CREAT | os.O_RDWR, 0o600)
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
                other process) holds `key`; `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when
                the file cannot be opened.
        """
        descriptor = self._lock(key)
        try:
            connection = self._connect()
        except BaseException:
            os.close(descriptor)
            raise
        return _SqliteLease(key, connection, descriptor)

    def keys(self) -> list[str]:
        """Every key with a saved checkpoint, sorted (none when the file does not exist)."""
        if not self.path.exists():
            return []
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute("SELECT key FROM agent_checkpoints ORDER BY key")
            return [row[0] for row in rows]

    def read(self, key: str) -> str | None:
        """The checkpoint saved under `key`, read without leasing it (for inspection)."""
        if not self.path.exists():
            return None
        with contextlib.closing(self._connect()) as connection:
            row = connection.execute(
                "SELECT checkpoint FROM agent_checkpoints WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else str(row[0])

    def pending_approvals(self, key: str) -> tuple[PendingApproval, ...]:
        """The calls of execution `key` waiting for approval, read without leasing it.

        Empty when nothing waits (or the key or the file does not exist).

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a corrupt checkpoint.
        """
        return checkpoint_pending_approvals(self.read(key))


class _SqliteLease:
    """One key's lease: a connection and the key's `flock`ed descriptor."""

    def __init__(self, key: str, connection: sqlite3.Connection, descriptor: int) -> None:
        self._key = key
        self._connection: sqlite3.Connection | None = connection
        self._descriptor = descriptor

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise AgentError("Checkpoint lease is closed", code=WRITE_FAILED_CODE)
        return self._connection

    def read(self) -> str | None:
        """The saved checkpoint text, or `None`."""
        row = (
            self._open()
            .execute("SELECT checkpoint FROM agent_checkpoints WHERE key = ?", (self._key,))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def write(self, text: str) -> None:
        """Replace the checkpoint in one durable transaction.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when SQLite refuses.
        """
        import sqlite3

        try:
            self._open().execute(
                "INSERT INTO agent_checkpoints (key, checkpoint, writes) VALUES (?, ?, 1) "
                "ON CONFLICT (key) DO UPDATE SET checkpoint = excluded.checkpoint, "
                "writes = writes + 1",
                (self._key, text),
            )
        except sqlite3.Error as error:
            raise AgentError(f"Checkpoint write failed: {error}", code=WRITE_FAILED_CODE) from error

    def close(self) -> None:
        """Close the connection and release the key's lock."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.close()
        finally:
            os.close(self._descriptor)

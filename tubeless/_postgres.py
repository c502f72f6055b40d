"""Connections to PostgreSQL for the Postgres stores: the one module that imports psycopg.

A `Session` is one autocommit psycopg connection that is opened again when it drops (a
server restart, `pg_terminate_backend`, a cloud database closing an idle connection during
a long model call). Statements that fail because the connection broke are run again on a
new connection, for up to `reconnect_seconds`; every other database error is the caller's.
What runs again must be safe to run twice: the stores' statements are conditional (a
checkpoint write on its lease's epoch) or idempotent, so running one again re-reads the
authoritative state instead of trusting what this process remembers.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tubeless.errors import MissingExtraError, TubelessError

RECONNECT_SECONDS = 10.0
"""How long a statement keeps trying to reach the server after its connection dropped."""
_CONNECT_TIMEOUT_SECONDS = 5
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
"""TCP keepalives: a peer that vanished without closing (a partition, a dead host) breaks
the connection within about 25 seconds instead of the system's two hours."""


def load_psycopg(feature: str) -> Any:
    """The `psycopg` module.

    Raises:
        MissingExtraError: `TUBELESS_EXTRA_MISSING` when the `postgres` extra is missing.
    """
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        raise MissingExtraError(feature, extra="postgres", missing="psycopg") from None


def redact(dsn: str) -> str:
    """`dsn` without its password, for reprs and messages."""
    head, at, tail = dsn.rpartition("@")
    if not at or "://" not in head:
        return dsn
    scheme, _, credentials = head.partition("://")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}{':***' if ':' in credentials else ''}@{tail}"


class Session:
    """One connection to `dsn`, opened on first use and again after it drops.

    Thread-safe: one statement at a time (a lock), so a lease's renewal thread and its
    writer share it.

    Args:
        dsn: a libpq connection string or `postgresql://` URL.
        name: the connection's `application_name` (seen in `pg_stat_activity`).
        fail: builds the coded error raised for a database failure, from a message.
        reconnect_seconds: how long to keep reconnecting after the connection dropped.
    """

    def __init__(
        self,
        dsn: str,
        *,
        name: str,
        fail: Callable[[str], TubelessError],
        reconnect_seconds: float = RECONNECT_SECONDS,
    ) -> None:
        self._psycopg = load_psycopg(name)
        self._dsn = dsn
        self._name = name
        self._fail = fail
        self._reconnect_seconds = reconnect_seconds
        self._lock = threading.Lock()
        self._connection: Any = None
        self._closed = False
        self.reconnects = 0
        """How many times the connection was opened again after it dropped."""

    def _connect(self) -> Any:
        if self._connection is None or self._connection.closed:
            if self._connection is not None:
                self.reconnects += 1
            self._connection = self._psycopg.connect(
                self._dsn,
                autocommit=True,
                application_name=self._name,
                connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                **_KEEPALIVES,
            )
        return self._connection

    def _drop(self) -> None:
        connection = self._connection
        if connection is not None and not connection.closed:
            connection.close()

    def execute(self, sql: str, parameters: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement (its own transaction) and return its rows.

        Raises:
            TubelessError: from `fail`, when the database refuses the statement or
                cannot be reached for `reconnect_seconds`.
        """
        return self._run(lambda connection: _rows(connection.execute(sql, parameters)))

    def transaction(self, statements: Sequence[tuple[str, Any]]) -> None:
        """Run `statements` in one transaction (rolled back whole on any error).

        Raises:
            TubelessError: as `execute` does.
        """

        def run(connection: Any) -> list[tuple[Any, ...]]:
            with connection.transaction():
                for sql, parameters in statements:
                    connection.execute(sql, parameters)
            return []

        self._run(run)

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `sql` once per row, pipelined, in one transaction.

        Raises:
            TubelessError: as `execute` does.
        """

        def run(connection: Any) -> list[tuple[Any, ...]]:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.executemany(sql, rows)
            return []

        self._run(run)

    def _run(self, work: Callable[[Any], list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        psycopg = self._psycopg
        deadline = time.monotonic() + self._reconnect_seconds
        delay = 0.05
        with self._lock:
            while True:
                if self._closed:
                    raise self._fail("The database session is closed")
                try:
                    connection = self._connect()
                except psycopg.Error as error:
                    # Unreachable after a drop: try again (a first connection fails at once).
                    if self._connection is None or time.monotonic() > deadline:
                        raise self._fail(_message(error)) from error
                else:
                    try:
                        return work(connection)
                    except psycopg.Error as error:
                        if not (connection.broken or connection.closed):
                            raise self._fail(_message(error)) from error
                        self._drop()
                        if time.monotonic() > deadline:
                            raise self._fail(_message(error)) from error
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def close(self) -> None:
        """Close the connection; later statements raise. Closing twice is harmless."""
        with self._lock:
            self._closed = True
            self._drop()


def _rows(cursor: Any) -> list[tuple[Any, ...]]:
    return list(cursor.fetchall()) if cursor.description is not None else []


def _message(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."

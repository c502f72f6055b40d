"""What the SQLite and the PostgreSQL trace stores share: how each refuses use once it
failed or closed, how each checks a stored row, and how each closes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tubeless.errors import TraceSinkError, TraceStoreError
from tubeless.trace._sqlite_rows import row_record
from tubeless.trace._wire import decode_record


class BufferedStore(Protocol):
    """A trace store's state, guarded by its lock."""

    _label: str
    """How messages name the store (its path, or its redacted DSN)."""
    _lock: threading.Lock
    _error: BaseException | None
    """The failure of a commit, which every later call raises again."""
    _closed: bool

    def _commit(self) -> None:
        """Write the buffered records (lock held)."""


def close_store(store: BufferedStore, disconnect: Callable[[], None]) -> None:
    """Commit `store`'s buffer and `disconnect`, once; then raise any commit's failure."""
    with store._lock:
        if store._closed:
            return
        try:
            if store._error is None:
                store._commit()
        finally:
            store._closed = True
            disconnect()
        if store._error is not None:
            raise TraceSinkError(
                f"Trace store {store._label} lost records: {store._error}"
            ) from store._error


def checked_record(label: str, row: Sequence[Any]) -> dict[str, Any]:
    """The record of a stored row, or `TraceStoreError` naming the store and the row."""
    try:
        record = row_record(row)
        decode_record(record)
    except (ValueError, TypeError, RecursionError) as error:
        text = f"{label} row {row[0]} is not a valid trace record: {error}"
        raise TraceStoreError(text) from error
    return record


def raise_if_failed(store: BufferedStore) -> None:
    """Raise the failure of an earlier commit again, if there was one."""
    if store._error is not None:
        raise TraceSinkError(
            f"Trace store {store._label} failed earlier: {store._error}"
        ) from store._error


def raise_if_unusable(store: BufferedStore) -> None:
    """Raise when `store` failed earlier or is closed."""
    raise_if_failed(store)
    if store._closed:
        raise TraceSinkError(f"Trace store {store._label} is closed")

"""What a `--store` names: a SQLite file (relative to the working directory) or a
`postgresql://` URL of a shared database. The one place the CLI tells them apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tubeless.errors import CliLoadError

__all__ = ["is_store_url", "open_checkpoint_reader", "open_trace_reader", "open_trace_writer"]

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_store_url(text: str) -> bool:
    """Whether `--store` names a PostgreSQL database rather than a file."""
    return text.startswith(_URL_SCHEMES)


def _existing(text: str, what: str) -> Path:
    path = Path.cwd() / text
    if not path.exists():
        raise CliLoadError(f"{what} not found at {path}")
    return path


def open_trace_reader(text: str) -> Any:
    """A read-only trace store: nothing is created.

    Raises:
        CliLoadError: when a store file is missing.
        TraceStoreError: when the store cannot be opened or is of another version.
    """
    from tubeless.trace import PostgresTraceStore, SqliteTraceStore

    if is_store_url(text):
        return PostgresTraceStore(text, read_only=True)
    return SqliteTraceStore(_existing(text, "Run store"), read_only=True)


def open_trace_writer(text: str) -> Any:
    """A trace store to append to, created when missing."""
    from tubeless.trace import PostgresTraceStore, SqliteTraceStore

    if is_store_url(text):
        return PostgresTraceStore(text)
    return SqliteTraceStore(Path.cwd() / text)


def open_checkpoint_reader(text: str) -> Any:
    """A checkpoint store to list waiting calls from (it is only read).

    Raises:
        CliLoadError: when a store file is missing.
    """
    from tubeless.agent import PostgresCheckpointStore, SqliteCheckpointStore

    if is_store_url(text):
        return PostgresCheckpointStore(text)
    path = Path.cwd() / text
    if not path.is_file():
        raise CliLoadError(f"Checkpoint store not found at {path}")
    return SqliteCheckpointStore(path)

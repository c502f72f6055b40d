"""The coded errors of a checkpoint store: what broke, in which store, for which key.

A storage failure is one of three things, and each has its own code
(`CheckpointStoreError`): the store cannot be opened or read
(`TUBELESS_AGENT_CHECKPOINT_READ_FAILED`), what it holds is damaged
(`TUBELESS_AGENT_CHECKPOINT_INVALID`), or a write failed
(`TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED`). SQLite reports a failed `write(2)` as a bare
`disk I/O error`; the operating system's reason is worked out from the limits that cause
it (the process's file-size limit, the free space of the file system) so the message says
`File too large` or `No space left on device`.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from tubeless._quote import quote
from tubeless.errors import CheckpointStoreError

READ_FAILED_CODE = "TUBELESS_AGENT_CHECKPOINT_READ_FAILED"
INVALID_CODE = "TUBELESS_AGENT_CHECKPOINT_INVALID"
WRITE_FAILED_CODE = "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"
_CORRUPT_NAMES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_BUSY_NAMES = ("SQLITE_BUSY", "SQLITE_LOCKED")
_WAL_SLACK = 256 * 1024
"""Room a commit needs beyond the checkpoint's own bytes (WAL frame headers, b-tree pages)."""


_NAMES_BY_MESSAGE = (
    ("database disk image is malformed", "SQLITE_CORRUPT"),
    ("file is not a database", "SQLITE_NOTADB"),
    ("database is locked", "SQLITE_BUSY"),
    ("database or disk is full", "SQLITE_FULL"),
    ("disk I/O error", "SQLITE_IOERR"),
)
"""SQLite's messages for its primary codes, for Pythons without `sqlite_errorname` (3.10)."""


def _sqlite_name(error: BaseException) -> str:
    name = getattr(error, "sqlite_errorname", None)
    if isinstance(name, str):
        return name
    text = str(error)
    return next((code for message, code in _NAMES_BY_MESSAGE if message in text), "")


def is_busy(error: BaseException) -> bool:
    """Whether SQLite refused because another connection holds a lock."""
    return _sqlite_name(error).startswith(_BUSY_NAMES)


def is_corrupt(error: BaseException) -> bool:
    """Whether an error means the file or the stored text is damaged."""
    return isinstance(error, UnicodeDecodeError) or _sqlite_name(error).startswith(_CORRUPT_NAMES)


def _where(key: str | None) -> str:
    return "" if key is None else f" (key {quote(key)})"


def _said(error: BaseException) -> str:
    name = _sqlite_name(error)
    return f"{str(error)[:300]}" + (f" [{name}]" if name else "")


def damaged(store: str, key: str | None, problem: str) -> CheckpointStoreError:
    """The error of a store or checkpoint that is corrupt: nothing of it can be trusted."""
    return CheckpointStoreError(
        f"Checkpoint store {store} is damaged{_where(key)}: {problem}; restore the file from "
        "a backup, or run with a new execution key",
        code=INVALID_CODE,
        store=store,
        key=key,
    )


def not_a_store(store: str, key: str | None, tables: Sequence[str]) -> CheckpointStoreError:
    """The error of a SQLite file that holds something else (`tables`: a trace store's, say)."""
    what = (
        "a trace store (what run --store writes), not a checkpoint store"
        if "pipeline_run_events" in tables
        else "not a checkpoint store (it has no checkpoint table)"
    )
    return CheckpointStoreError(
        f"{store} is {what}; give the path of the file the durable agent writes (its "
        "Durability store)",
        code=INVALID_CODE,
        store=store,
        key=key,
    )


def read_error(
    error: BaseException, *, store: str, key: str | None, action: Literal["open", "read"]
) -> CheckpointStoreError:
    """A failure to open or read a store: damage when the file is corrupt."""
    if isinstance(error, UnicodeDecodeError):
        return damaged(store, key, f"the stored text is not UTF-8 (byte {error.start})")
    if is_corrupt(error):
        return damaged(store, key, _said(error))
    return CheckpointStoreError(
        f"Cannot {action} checkpoint store {store}{_where(key)}: {_said(error)}",
        code=READ_FAILED_CODE,
        store=store,
        key=key,
    )


def write_error(
    error: BaseException, *, store: str, key: str, files: Sequence[Path], size: int
) -> CheckpointStoreError:
    """A failed checkpoint write, with the operating system's reason when one explains it.

    `files` are the store's files that grow with a write (the database and its WAL);
    `size` is how many bytes the write saves.
    """
    if is_corrupt(error):
        return damaged(store, key, _said(error))
    number = _os_errno(error, files, size)
    reason = (
        _said(error)
        if number is None
        else f"{os.strerror(number)} ({errno.errorcode.get(number, number)}; SQLite said: "
        f"{_said(error)})"
    )
    return CheckpointStoreError(
        f"Checkpoint write{_where(key)} to {store} failed: {reason}",
        code=WRITE_FAILED_CODE,
        store=store,
        key=key,
    )


def _os_errno(error: BaseException, files: Sequence[Path], size: int) -> int | None:
    """The `errno` behind a failed write: SQLite keeps it to itself, so ask the limits."""
    if isinstance(error, OSError) and error.errno:
        return error.errno
    name = _sqlite_name(error)
    if name.startswith("SQLITE_FULL"):
        return errno.ENOSPC  # SQLite's only source of SQLITE_FULL here is ENOSPC
    if not name.startswith("SQLITE_IOERR"):
        return None
    needed = size + _WAL_SLACK
    sizes = [0]
    for file in files:
        with contextlib.suppress(OSError):
            sizes.append(file.stat().st_size)
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and max(sizes) + needed >= limit:
            return errno.EFBIG
    with contextlib.suppress(OSError, IndexError):
        space = os.statvfs(files[0].parent)
        if space.f_bavail * space.f_frsize < needed:
            return errno.ENOSPC
    return None

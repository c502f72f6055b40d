"""Whether `--store` and `--trace` would write to the same file.

Opening the trace truncates its file, so pointing it at the store (or at one of the
store's `-journal`, `-wal` or `-shm` files) would destroy recorded runs. Two paths are
the same file when they resolve (through symlinks) to one path, share an inode, or differ
only in case on a case-insensitive filesystem.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["STORE_SIDECARS", "destinations_conflict"]

STORE_SIDECARS = ("-journal", "-wal", "-shm")
"""The files SQLite keeps beside a database."""


def _canonical(path: Path) -> str:
    # `realpath` follows every symlink it meets, dangling ones included, and keeps the
    # missing tail of a path that does not exist yet.
    return os.path.realpath(os.path.abspath(path))


def _nearest_directory(path: str) -> str | None:
    current = path
    while True:
        if os.path.isdir(current):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _ignores_case(directory: str | None) -> bool:
    """Probe whether `directory` treats names that differ only in case as one file."""
    if directory is None:
        return True
    token = secrets.token_hex(6)
    probe = os.path.join(directory, f".tubeless-case-{token}-a")
    flipped = os.path.join(directory, f".tubeless-case-{token}-A")
    try:
        with open(probe, "x", encoding="utf-8"):
            pass
    except OSError:
        # Cannot probe: assume the worst, so a trace never truncates a store.
        return True
    try:
        return os.path.samefile(probe, flipped)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def _same_file(left: Path, right: Path) -> bool:
    left_path, right_path = _canonical(left), _canonical(right)
    if left_path == right_path:
        return True
    try:
        if os.path.samefile(left, right):
            return True
    except OSError:
        pass  # one of them does not exist yet
    if left_path.lower() != right_path.lower():
        return False
    directory = _nearest_directory(os.path.dirname(left_path)) or _nearest_directory(
        os.path.dirname(right_path)
    )
    return _ignores_case(directory)


def destinations_conflict(store: Path, trace: Path) -> bool:
    """Whether writing a trace to `trace` would overwrite the store at `store` or its files."""
    if _same_file(store, trace):
        return True
    for base in {str(store), _canonical(store)}:
        for suffix in STORE_SIDECARS:
            if _same_file(Path(base + suffix), trace):
                return True
    return False

"""Putting the terminal back when the process dies before a live frame is closed.

A live frame hides the cursor and repaints rows in place. A process killed in the middle
(the CLI's second Ctrl-C) never reaches the reporter's `close`, so each live frame
registers how to undo itself here while it is up.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

__all__ = ["forget_frame", "keep_frame", "restore_terminals"]

_lock = threading.Lock()
_frames: dict[int, tuple[int, Callable[[], str]]] = {}
"""Live frames by registration key: the file descriptor and the bytes that undo them."""


def keep_frame(key: int, descriptor: int, undo: Callable[[], str]) -> None:
    """Register a live frame drawn on `descriptor`; `undo()` returns what erases it."""
    with _lock:
        _frames[key] = (descriptor, undo)


def forget_frame(key: int) -> None:
    """Unregister a frame its reporter closed."""
    with _lock:
        _frames.pop(key, None)


def restore_terminals() -> None:
    """Erase every live frame and show the cursor again, for a process about to die.

    Safe in a signal handler: it takes no lock a reporter may hold and writes straight
    to each terminal's file descriptor, bypassing buffered streams. Nothing happens when
    no live frame is up.
    """
    for descriptor, undo in list(_frames.values()):
        with contextlib.suppress(Exception):
            os.write(descriptor, undo().encode("utf-8", "replace"))

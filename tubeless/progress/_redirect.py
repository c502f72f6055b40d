"""While a live frame is on screen, `print()` output goes above it instead of under it.

A frame is repainted by moving the cursor up over the rows it painted. Text that a tool
writes to the same terminal in between lands inside those rows and is painted over, and
the frame's top rows are left behind as a stale copy. So, as rich's live display does,
the live reporter swaps `sys.stdout` and `sys.stderr` for `LineRedirect`s while the frame
is up: complete lines are handed to the reporter, which erases the frame, writes them and
paints the frame again below. Only streams on the reporter's own terminal are swapped;
output to a file or a pipe is left alone. Writes to the file descriptors themselves
(subprocesses, C code) are not seen.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["LineRedirect", "install", "same_terminal", "uninstall"]


def _device(stream: object) -> tuple[int, int] | None:
    try:
        if not stream.isatty():  # type: ignore[attr-defined]
            return None
        status = os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return status.st_dev, status.st_rdev


def same_terminal(stream: object, other: object) -> bool:
    """Whether both streams write to one terminal device."""
    device = _device(stream)
    return device is not None and device == _device(other)


class LineRedirect:
    """Stands in for `sys.stdout` or `sys.stderr` while a live frame is on screen.

    Complete lines go to `emit`; a partial line waits for its newline (or `release`).
    Everything else a stream offers (`fileno`, `encoding`, `buffer`, ...) is the
    replaced stream's.

    Args:
        target: the stream replaced.
        emit: shows complete lines (ending with a newline) above the frame.
    """

    def __init__(self, target: TextIO, emit: Callable[[str], None]) -> None:
        self.target = target
        self._emit: Callable[[str], None] | None = emit
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        """Queue `text`; hand its complete lines to the frame."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            emit = self._emit
            if emit is None:
                return self.target.write(text)
            self._pending += text
            if "\n" in self._pending:
                lines, _, self._pending = self._pending.rpartition("\n")
                emit(f"{lines}\n")
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Write each of `lines`."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush the replaced stream (a partial line stays queued until its newline)."""
        with contextlib.suppress(OSError, ValueError):
            self.target.flush()

    def isatty(self) -> bool:
        """Whether the replaced stream is a terminal."""
        return bool(self.target.isatty())

    def release(self) -> str:
        """Stop redirecting: later writes go straight to the replaced stream.

        Returns:
            The partial line still queued (empty when none), for the caller to show.
        """
        with self._lock:
            self._emit = None
            pending, self._pending = self._pending, ""
        return pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def install(stream_name: str, screen: TextIO, emit: Callable[[str], None]) -> LineRedirect | None:
    """Swap `sys.<stream_name>` for a `LineRedirect` when it writes to `screen`'s terminal."""
    current = getattr(sys, stream_name)
    if isinstance(current, LineRedirect) or not same_terminal(current, screen):
        return None
    redirect = LineRedirect(current, emit)
    setattr(sys, stream_name, redirect)
    return redirect


def uninstall(stream_name: str, redirect: LineRedirect) -> str:
    """Put the replaced stream back (unless someone swapped ours since); return pending text."""
    if getattr(sys, stream_name) is redirect:
        setattr(sys, stream_name, redirect.target)
    return redirect.release()

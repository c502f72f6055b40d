"""Ctrl-C for a running command: the first SIGINT cancels the run, a second one kills."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType, TracebackType
from typing import Any, TextIO

__all__ = ["SIGINT_MESSAGE", "InterruptGuard"]

SIGINT_MESSAGE = "SIGINT received; cancelling pipeline work."
"""The one line printed on stderr for the first SIGINT."""


class InterruptGuard:
    """While active, the first SIGINT sets `run_signal` and prints one line on `stream`.

    The handler then restores the default SIGINT handling, so a second Ctrl-C kills the
    process at once while the run drains. Outside the main thread (where Python cannot
    install signal handlers) the guard does nothing. Leaving it restores the old handler.

    Args:
        run_signal: the run's cancellation event.
        stream: where the line goes (stderr).
    """

    def __init__(self, run_signal: threading.Event, stream: TextIO) -> None:
        self._signal = run_signal
        self._stream = stream
        self._previous: Any = None
        self._installed = False
        self.interrupted = False
        """Whether a SIGINT arrived while the guard was active."""

    def __enter__(self) -> InterruptGuard:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        except ValueError:  # not the main thread
            self._installed = False
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self._announce()
        # The handler runs on the main thread, which may hold the event's internal lock
        # right now (inside `Event.wait`); setting it from another thread cannot deadlock.
        threading.Thread(target=self._signal.set, name="tubeless-sigint").start()

    def _announce(self) -> None:
        line = f"{SIGINT_MESSAGE}\n"
        # A raw write: the main thread may be in the middle of a buffered write to the
        # same stream, and buffered streams refuse re-entrant writes.
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            self._stream.flush()
        try:
            os.write(self._stream.fileno(), line.encode("utf-8", "replace"))
        except (OSError, ValueError, AttributeError, RuntimeError):
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                self._stream.write(line)

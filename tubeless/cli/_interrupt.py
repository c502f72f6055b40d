"""Ctrl-C for a running command: the first SIGINT cancels the run, a second one kills."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, TextIO

from tubeless.progress import restore_terminals

__all__ = ["SIGINT_MESSAGE", "InterruptGuard"]

SIGINT_MESSAGE = "SIGINT received; cancelling pipeline work."
"""The one line printed on stderr for the first SIGINT."""


def _kill(signum: int, frame: FrameType | None) -> None:
    """The second SIGINT: put the terminal back (a live frame), then die of SIGINT."""
    restore_terminals()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


class InterruptGuard:
    """While active, the first SIGINT sets `run_signal` and prints one line on `stream`.

    A second Ctrl-C kills the process at once while the run drains: it erases a live
    progress frame and shows the cursor again (`restore_terminals`), then dies of SIGINT
    as the default handling would. Outside the main thread (where Python cannot
    install signal handlers) the guard does nothing. Leaving it restores the old handler.

    The line is written by a helper thread, never by the handler itself: the main thread
    may be in the middle of a write to the same stream, and with a live frame on screen
    `sys.stderr` puts the line above the frame.

    Args:
        run_signal: the run's cancellation event.
        stream: where the line goes (default: `sys.stderr` when it is written).
    """

    def __init__(self, run_signal: threading.Event, stream: TextIO | None = None) -> None:
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
        signal.signal(signal.SIGINT, _kill)
        # The handler runs on the main thread, which may hold the event's internal lock
        # right now (inside `Event.wait`) or be inside a buffered write (which refuses a
        # re-entrant one): another thread writes the line and sets the event.
        helper = threading.Thread(target=self._announce_and_cancel, name="tubeless-sigint")
        # The helper starts with SIGINT blocked (threads inherit the mask): a second
        # Ctrl-C must reach the main thread, since one delivered to the helper would not
        # interrupt the main thread's wait (a handler that ignores the signal), and the
        # process would not die.
        blocked = hasattr(signal, "pthread_sigmask")
        if blocked:
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            helper.start()
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _announce_and_cancel(self) -> None:
        stream = sys.stderr if self._stream is None else self._stream
        with contextlib.suppress(OSError, ValueError, RuntimeError, AttributeError):
            stream.write(f"{SIGINT_MESSAGE}\n")
            stream.flush()
        self._signal.set()

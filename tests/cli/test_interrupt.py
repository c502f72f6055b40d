"""Tests for the SIGINT guard around a running command."""

from __future__ import annotations

import io
import os
import signal
import threading

from tubeless.cli import _interrupt
from tubeless.cli._interrupt import SIGINT_MESSAGE, InterruptGuard


def test_the_first_sigint_sets_the_signal_and_prints_one_line() -> None:
    """SIGINT sets the run's event, prints the line once; a second one would kill."""
    run_signal = threading.Event()
    stream = io.StringIO()
    previous = signal.getsignal(signal.SIGINT)
    with InterruptGuard(run_signal, stream) as guard:
        os.kill(os.getpid(), signal.SIGINT)
        assert run_signal.wait(timeout=30)
        assert signal.getsignal(signal.SIGINT) is _interrupt._kill
    assert guard.interrupted
    assert stream.getvalue() == f"{SIGINT_MESSAGE}\n"
    assert signal.getsignal(signal.SIGINT) is previous


def test_without_sigint_nothing_happens_and_the_handler_is_restored() -> None:
    """Leaving the guard untouched restores the previous handler and sets nothing."""
    run_signal = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    with InterruptGuard(run_signal, io.StringIO()) as guard:
        assert signal.getsignal(signal.SIGINT) is not previous
    assert not guard.interrupted
    assert not run_signal.is_set()
    assert signal.getsignal(signal.SIGINT) is previous


def test_outside_the_main_thread_the_guard_does_nothing() -> None:
    """Python installs signal handlers only on the main thread; elsewhere the guard is inert."""
    outcome: list[bool] = []

    def enter() -> None:
        with InterruptGuard(threading.Event(), io.StringIO()) as guard:
            outcome.append(guard.interrupted)

    worker = threading.Thread(target=enter)
    worker.start()
    worker.join()
    assert outcome == [False]

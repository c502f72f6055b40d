"""Shared doubles for the pipeline tests: a recording logger, a trace sink and a clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tubeless.testing import FakeClock, MemoryTraceSink, RecordingLogger


@pytest.fixture
def logger() -> RecordingLogger:
    """A fresh recording logger."""
    return RecordingLogger()


@pytest.fixture
def sink() -> MemoryTraceSink:
    """A fresh in-memory trace sink."""
    return MemoryTraceSink()


@pytest.fixture
def clock() -> FakeClock:
    """A clock that advances one millisecond per reading."""
    return FakeClock(tick=1)


@pytest.fixture
def thread_baseline() -> Iterator[int]:
    """The live thread count before the test; the test must end with the same count."""
    baseline = threading.active_count()
    yield baseline
    assert threading.active_count() == baseline


DEADLOCK_GUARD = 30.0
"""Seconds a test waits for an event before declaring a deadlock (never reached when green)."""


class Background:
    """Runs a callable on its own thread and hands back its result (or exception)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._work = work
        self._value: Any = None
        self._error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-background")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as error:
            self._error = error
        finally:
            self.done.set()

    def result(self) -> Any:
        """Wait for the callable and return its value, re-raising its exception."""
        self._thread.join(DEADLOCK_GUARD)
        assert not self._thread.is_alive(), "background work deadlocked"
        if self._error is not None:
            raise self._error
        return self._value


@pytest.fixture
def background() -> Iterator[Callable[[Callable[[], Any]], Background]]:
    """Start callables on their own threads; every thread is joined when the test ends."""
    started: list[Background] = []

    def start(work: Callable[[], Any]) -> Background:
        job = Background(work)
        started.append(job)
        return job

    yield start
    for job in started:
        job.done.wait(DEADLOCK_GUARD)
        job._thread.join(DEADLOCK_GUARD)


def _wait_for(event: threading.Event) -> None:
    assert event.wait(DEADLOCK_GUARD), "expected event never happened"


@pytest.fixture
def wait_for() -> Callable[[threading.Event], None]:
    """Wait for an event, failing the test instead of hanging when it never comes."""
    return _wait_for

"""Shared doubles for the agent tests: a trace sink, a thread baseline and recorders."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tubeless.testing import MemoryTraceSink


class Recorder:
    """A thread-safe list of what callbacks saw, in call order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Any] = []

    def add(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)

    @property
    def items(self) -> list[Any]:
        with self._lock:
            return list(self._items)


@pytest.fixture
def sink() -> MemoryTraceSink:
    """A fresh in-memory trace sink."""
    return MemoryTraceSink()


@pytest.fixture
def thread_baseline() -> Iterator[int]:
    """The live thread count before the test; the test must end with the same count."""
    baseline = threading.active_count()
    yield baseline
    assert threading.active_count() == baseline


@pytest.fixture
def recorder() -> Callable[[], Recorder]:
    """Make fresh recorders."""
    return Recorder

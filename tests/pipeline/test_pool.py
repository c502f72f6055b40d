"""`run_lazily`: every item once, bounded, drained; helpers start only when needed."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from tubeless.pipeline._pool import run_lazily

WAIT = 30.0


def test_every_item_runs_exactly_once(thread_baseline: int) -> None:
    """Each item runs once, whether the caller alone or helpers too take items."""
    for concurrency in (1, 2, 5):
        ran: list[int] = []  # list.append is atomic: no lock needed
        run_lazily(20, concurrency, ran.append, lambda: True)
        assert sorted(ran) == list(range(20))


def test_slow_items_run_together_up_to_the_bound(thread_baseline: int) -> None:
    """Items that wait (as a tool on the network does) all run at once, never more."""
    together = threading.Barrier(4, timeout=WAIT)
    lock = threading.Lock()
    running = peak = 0

    def work(index: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if index < 4:
            together.wait()  # only passes when four items run at the same time
        with lock:
            running -= 1

    run_lazily(10, 4, work, lambda: True)
    assert peak == 4


def test_quick_items_do_not_wait_for_a_helper_to_wake(thread_baseline: int) -> None:
    """When the caller finishes every item itself, a helper still queued is not awaited."""
    release = threading.Event()
    ran: list[int] = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(release.wait, WAIT)  # the only pool thread is busy
        finished = threading.Event()

        def call() -> None:
            run_lazily(3, 2, ran.append, lambda: True, executor=pool)
            finished.set()

        caller = threading.Thread(target=call)
        caller.start()
        assert finished.wait(WAIT), "run_lazily waited for a helper that never started"
        assert ran == [0, 1, 2]
        release.set()
        caller.join(WAIT)
        assert blocker.result() is True


def test_a_stop_starts_nothing_new_and_drains_what_started(thread_baseline: int) -> None:
    """Once `keep_going` says no, no item starts; started ones finish before the return."""
    stop = threading.Event()
    finished: list[int] = []
    both = threading.Barrier(2, timeout=WAIT)

    def work(index: int) -> None:
        if index < 2:
            both.wait()  # items 0 and 1 run together
            stop.set()
        finished.append(index)

    run_lazily(10, 2, work, lambda: not stop.is_set())
    assert sorted(finished) == [0, 1]


def test_an_exception_escaping_a_helper_reaches_the_caller(thread_baseline: int) -> None:
    """`work` must not raise; if it does on a helper, the caller raises it after the drain."""
    both = threading.Barrier(2, timeout=WAIT)

    def work(index: int) -> None:
        both.wait()
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("bug in work")

    with pytest.raises(RuntimeError, match="bug in work"):
        run_lazily(2, 2, work, lambda: True)

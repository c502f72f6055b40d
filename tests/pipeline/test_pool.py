"""`run_lazily`: every item once, bounded, drained; helpers start only when held up."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable

import pytest

from tubeless.pipeline import _pool
from tubeless.pipeline._pool import LazyPool, run_lazily

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


def test_items_nothing_holds_up_run_on_the_caller_alone(
    thread_baseline: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No helper thread is made unless a batch is held up for a whole watcher tick."""
    monkeypatch.setattr(_pool, "HANDOFF_SECONDS", WAIT)  # no tick falls within the test
    pool = LazyPool(3, name="probe")
    caller = threading.current_thread()
    threads: set[threading.Thread] = set()
    try:
        for _ in range(50):
            run_lazily(
                4, 4, lambda index: threads.add(threading.current_thread()), lambda: True, pool=pool
            )
        helpers = [thread for thread in threading.enumerate() if thread.name.startswith("probe_")]
    finally:
        pool.close()
    assert threads == {caller}
    assert helpers == []


def test_a_held_up_batch_gets_helpers_and_close_joins_them(thread_baseline: int) -> None:
    """An item that waits makes the watcher start a helper; `close` ends every thread."""
    pool = LazyPool(1, name="probe")
    helped = threading.Event()
    names: dict[int, str] = {}

    def work(index: int) -> None:
        names[index] = threading.current_thread().name
        if index == 0:
            assert helped.wait(WAIT), "no helper took item 1 while item 0 waited"
        else:
            helped.set()

    try:
        run_lazily(2, 2, work, lambda: True, pool=pool)
        # The caller runs one item and a helper the other (item 0 too, if the caller was
        # held up for a tick before taking it).
        caller, helper = sorted(names.values(), key=lambda name: name.startswith("probe_"))
        assert caller == threading.current_thread().name
        assert helper.startswith("probe_")
        assert any(thread.name.startswith("probe") for thread in threading.enumerate())
    finally:
        pool.close()
    assert not any(thread.name.startswith("probe") for thread in threading.enumerate())


def test_after_a_batch_helpers_ran_the_next_asks_for_one_at_once(
    thread_baseline: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slow tools stay slow: once helpers ran items, the next batch does not wait a tick."""
    pool = LazyPool(1, name="probe")
    try:
        first = threading.Barrier(2, timeout=WAIT)
        run_lazily(2, 2, lambda index: first.wait() and None, lambda: True, pool=pool)
        # From now on the watcher looks at most once more: it cannot find a batch held up.
        monkeypatch.setattr(_pool, "HANDOFF_SECONDS", WAIT)
        second = threading.Barrier(2, timeout=WAIT)
        run_lazily(2, 2, lambda index: second.wait() and None, lambda: True, pool=pool)
    finally:
        pool.close()


def test_a_batch_after_a_helped_one_submits_every_helper_before_its_first_item(
    thread_baseline: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a helped batch, the next submits all the helpers it may use at once, not each
    helper the next one (a chain of thread wake-ups, each waiting its turn)."""
    pool = LazyPool(3, name="probe")
    submit = pool.submit
    held: list[Callable[[], None]] = []
    try:
        first = threading.Barrier(2, timeout=WAIT)
        run_lazily(2, 2, lambda index: first.wait() and None, lambda: True, pool=pool)
        monkeypatch.setattr(_pool, "HANDOFF_SECONDS", WAIT)  # the watcher helps no batch now
        pool.submit = held.append  # type: ignore[method-assign]
        seen: list[int] = []
        run_lazily(4, 4, lambda index: seen.append(len(held)), lambda: True, pool=pool)
        assert seen == [3, 3, 3, 3]  # held back, the helpers left every item to the caller
    finally:
        for helper in held:  # they arrive late, find no item and end
            submit(helper)
        pool.close()


def test_quick_items_do_not_wait_for_a_helper_to_wake(thread_baseline: int) -> None:
    """When the caller finishes every item itself, a helper still on its way is not awaited."""
    pool = LazyPool(1, name="probe")
    asked = threading.Event()
    release = threading.Event()
    submit = pool.submit

    def held_back(helper: Callable[[], None]) -> None:
        def late() -> None:
            release.wait(WAIT)
            helper()

        asked.set()
        submit(late)

    pool.submit = held_back  # type: ignore[method-assign]
    ran: list[int] = []

    def work(index: int) -> None:
        if index == 0:
            assert asked.wait(WAIT), "the watcher never asked for a helper"
        ran.append(index)

    try:
        run_lazily(3, 2, work, lambda: True, pool=pool)  # returns with the helper held back
        assert ran == [0, 1, 2]
        assert not release.is_set()
    finally:
        release.set()
        pool.close()


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


def test_an_applications_executor_has_one_pool_that_starts_no_thread() -> None:
    """`LazyPool.on` gives every run one pool per executor; its work runs on that executor."""
    names: list[str] = []
    gate = threading.Barrier(3, timeout=30)

    def work(index: int) -> None:
        gate.wait()  # three items at once, or the barrier breaks
        names.append(threading.current_thread().name)

    with concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="app") as executor:
        pool = LazyPool.on(executor)
        assert LazyPool.on(executor) is pool
        run_lazily(3, 3, work, lambda: True, pool=pool)
        pool.close()  # a no-op: the executor is the application's

    assert sorted(name.split("_")[0] for name in names) == ["MainThread", "app", "app"]
    assert not [t for t in threading.enumerate() if t.name.startswith("tubeless")]

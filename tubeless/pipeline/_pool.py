"""A lazy, bounded worker pool: items start in order, at most `concurrency` at once.

Waking a thread costs more than a quick item (a validated tool call takes microseconds;
handing work to a sleeping thread disturbs the caller for tens of them), so a batch starts
on the calling thread alone. Helper threads join a batch only once an item keeps it busy:
a watcher thread looks at the running batches every `HANDOFF_SECONDS`, and a batch whose
threads started no item since the last look gets a helper, which takes the next item and,
while items remain, asks for one more. Slow items (a tool waiting on the network) so all
start within two ticks of each other; quick ones never wake a thread. A pool whose last
batch needed helpers starts the next one with all its helpers at once, as slow tools tend
to stay slow; one whose helpers then find nothing to take goes back to waiting for a tick.

A pool made on an application's `ThreadPoolExecutor` (`LazyPool.on(executor)`, one per
executor) starts no thread of its own: its helpers and its watcher are tasks there, the
watcher ending whenever no batch runs, so many runs at once share one watcher and one set
of threads, and the application's `shutdown()` never waits on the library.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sys
import threading
import weakref
from collections.abc import Callable

HANDOFF_SECONDS = 0.001
"""How often the watcher looks for a batch held up by a slow item."""
_IDLE_TICKS = 20
"""Ticks without any batch after which the watcher sleeps until the next batch."""


def run_lazily(
    count: int,
    concurrency: int,
    work: Callable[[int], None],
    keep_going: Callable[[], bool],
    *,
    pool: LazyPool | None = None,
) -> None:
    """Run `work(0) .. work(count - 1)`, starting them in order, at most `concurrency` at once.

    Before taking each next item a thread asks `keep_going()`; once it says no, nothing new
    starts, and the call returns after every started item has finished (drain). `work` must
    not raise. The calling thread is one of the workers (it would only wait otherwise), so
    a pool needs `concurrency - 1` threads; with `concurrency == 1` everything runs inline.

    Args:
        count: how many items.
        concurrency: the bound on items running at once.
        work: runs one item.
        keep_going: whether another item may start.
        pool: a pool (with at least `concurrency - 1` workers) to reuse across calls;
            otherwise one is made for this call and closed before it returns.
    """
    if min(concurrency, count) <= 1:
        for index in range(count):
            if not keep_going():
                return
            work(index)
        return
    if pool is not None:
        pool.run(count, concurrency, work, keep_going)
        return
    own = LazyPool(min(concurrency, count) - 1)
    try:
        own.run(count, concurrency, work, keep_going)
    finally:
        own.close()


class LazyPool:
    """The helper threads of `run_lazily` batches and the watcher that starts them.

    Threads are made on first need: the watcher with the first batch, helpers when a batch
    is first held up. `close()` stops and joins them all; call it once no batch runs.
    While its last batch had items run by helpers, a batch asks for a helper as it starts.

    Args:
        workers: the most helpers that may run at once (batches need `concurrency - 1`).
        name: the prefix of the threads' names.
        executor: an application's thread pool to run the helpers and the watcher on,
            never shut down here (see `LazyPool.on`).
    """

    def __init__(
        self,
        workers: int,
        *,
        name: str = "tubeless-worker",
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
    ) -> None:
        self._workers = workers
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stop = threading.Event()
        # Insertion-ordered, so a batch leaves in O(1) with hundreds of runs on one pool.
        self._batches: dict[_Batch, None] = {}
        self._watcher: threading.Thread | None = None
        self._watching = False  # the watcher task runs on the application's executor
        self._sleeping = False
        self._eager = False  # the last batch had items run by helpers
        self._borrowed = executor is not None
        # A borrowed executor is held weakly: `LazyPool.on` keys this pool on it.
        self._lender = None if executor is None else weakref.ref(executor)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    @classmethod
    def on(cls, executor: concurrent.futures.ThreadPoolExecutor) -> LazyPool:
        """The one pool of every run that borrows `executor` (made on first use).

        Its watcher is a task on `executor` that ends once no batch runs, so the pool
        needs no `close()`; it lives as long as `executor` does.
        """
        with _SHARED_LOCK:
            pool = _SHARED.get(executor)
            if pool is None:
                pool = _SHARED[executor] = cls(sys.maxsize, executor=executor)
            return pool

    def run(
        self,
        count: int,
        concurrency: int,
        work: Callable[[int], None],
        keep_going: Callable[[], bool],
    ) -> None:
        """Run one batch (see `run_lazily`) with this pool's threads.

        Raises:
            RuntimeError: when the pool is closed.
        """
        batch = _Batch(count, min(concurrency - 1, self._workers), work, keep_going, self)
        if self._eager:
            # The last batch was helped: this one starts its helpers now, so it needs no
            # watcher, nor the pool's lock (hundreds of runs share one pool: each hold is a
            # wait for some of them). `_eager` is a hint; a stale read costs a tick or a
            # helper that finds no item.
            if self._stop.is_set():
                raise RuntimeError("LazyPool is closed")
            batch.start_helpers()
            try:
                batch.run()
            finally:
                self._eager = batch.helped
            return
        start = None
        with self._lock:
            if self._stop.is_set():
                raise RuntimeError("LazyPool is closed")
            self._batches[batch] = None
            if self._borrowed:
                if not self._watching:
                    self._watching = True
                    self._start_watching()
            elif self._watcher is None:
                start = self._watcher = threading.Thread(
                    target=self._watch, name=f"{self._name}-watcher", daemon=True
                )
            elif self._sleeping:
                self._wake.notify()
        if start is not None:
            start.start()
        try:
            batch.run()
        finally:
            with self._lock:
                del self._batches[batch]
                self._eager = batch.helped

    def close(self) -> None:
        """Stop the watcher and wait for every thread of the pool to end.

        A pool on an application's executor (`LazyPool.on`) is not closed: its watcher
        ends by itself and the executor is the application's.
        """
        if self._borrowed:
            return
        with self._lock:
            self._stop.set()
            self._wake.notify()
            watcher, executor = self._watcher, self._executor
        if watcher is not None:
            watcher.join()
        if executor is not None:
            executor.shutdown(wait=True)

    def _start_watching(self) -> None:
        """Submit the watcher task (the lock is held; `_watching` is already set)."""
        lender = self._lender() if self._lender is not None else None
        try:
            if lender is None:
                raise RuntimeError("the executor is gone")
            lender.submit(self._watch)
        except RuntimeError:  # the application shut its executor down: run without helpers
            self._watching = False

    def submit(self, helper: Callable[[], None]) -> None:
        """Start `helper` on a pool thread (the threads are made on first use)."""
        if self._lender is not None:
            lender = self._lender()
            if lender is not None:  # shut down, it refuses: the caller runs every item
                with contextlib.suppress(RuntimeError):
                    lender.submit(helper)
            return
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix=self._name
                )
            executor = self._executor
        executor.submit(helper)

    def _watch(self) -> None:
        seen: dict[_Batch, int] = {}  # items each watched batch had started at the last look
        idle = 0
        while True:
            with self._lock:
                while not self._stop.is_set() and self._resting(idle):
                    if self._borrowed:  # a task on the application's executor: end it
                        self._watching = False  # the next batch submits the watcher again
                        return
                    self._sleeping = True
                    self._wake.wait()
                    idle = 0
                self._sleeping = False
            if self._stop.wait(HANDOFF_SECONDS):
                return
            with self._lock:
                looks = {batch: batch.started for batch in self._batches if batch.watched}
                idle = 0 if self._batches else idle + 1
            for batch, started in looks.items():
                if seen.get(batch) == started:  # nothing started for a whole tick: slow
                    batch.held_up()
            seen = looks

    def _resting(self, idle: int) -> bool:
        """Whether the watcher has nothing to do (the lock is held).

        Batches whose items all started (or that may get no more helpers) need no look;
        without any batch, the watcher waits a few ticks first, as quick batches follow
        each other closely and waking a thread costs more than a tick.
        """
        if self._batches:
            return not any(batch.watched for batch in self._batches)
        return idle >= _IDLE_TICKS


_SHARED: weakref.WeakKeyDictionary[concurrent.futures.ThreadPoolExecutor, LazyPool] = (
    weakref.WeakKeyDictionary()
)
"""The pool of each application executor that runs have borrowed (`LazyPool.on`)."""
_SHARED_LOCK = threading.Lock()


class _Batch:
    """The threads of one batch: the caller, and helpers started once it is held up."""

    def __init__(
        self,
        count: int,
        spare: int,
        work: Callable[[int], None],
        keep_going: Callable[[], bool],
        pool: LazyPool,
    ) -> None:
        self._work = work
        self._keep_going = keep_going
        self._pool = pool
        self._lock = threading.Lock()
        # Held while the caller waits for busy helpers; the last of them releases it. A
        # bare lock, made only when the caller must wait: a `Condition` would make a waiter
        # lock per wait and take the batch's lock again on waking.
        self._idle: threading.Lock | None = None
        self._cursor = iter(range(count))
        self._left = count
        self._spare = spare  # helpers that may still be started
        self._arriving = 0  # helpers started that have not asked for an item yet
        self._busy = 0  # helpers that took an item and have not finished
        self._error: BaseException | None = None
        self.started = 0
        """Items started so far (the watcher compares it between ticks)."""
        self.helped = False
        """Whether a helper took an item."""

    @property
    def watched(self) -> bool:
        """Whether a helper may still start: items remain and helpers may be added.

        Both counts only fall, so a `False` read without the lock stays true.
        """
        return bool(self._left and self._spare)

    def run(self) -> None:
        """Work as the calling thread, then wait for the helpers that took items.

        A helper still arriving when the items run out takes none and ends on its own
        (the pool's close waits for it), so quick items never wait on a thread wake-up.

        Raises:
            BaseException: whatever escaped `work` in a helper (a bug: `work` must not raise).
        """
        self._loop(helper=False)
        with self._lock:
            idle = None
            if self._busy:
                idle = self._idle = threading.Lock()
                idle.acquire()
        if idle is not None:
            idle.acquire()  # released by the last busy helper, once
        if self._error is not None:
            raise self._error

    def start_helpers(self) -> None:
        """Before any item starts (no other thread knows the batch yet: no lock), submit
        every helper the batch may use, as slow items are expected.

        All at once rather than each helper asking for the next: with hundreds of threads
        waiting for the interpreter, each link of such a chain waits its turn, and the
        caller runs the items the late helpers would have taken.
        """
        count = max(0, min(self._spare, self._left - 1))
        self._spare -= count
        self._arriving += count
        for _ in range(count):
            self._pool.submit(self._help)

    def held_up(self) -> None:
        """Start a helper, unless none may start or one is on its way (from the watcher)."""
        with self._lock:
            claimed = self._claim_helper()
        if claimed:
            self._pool.submit(self._help)

    def _claim_helper(self) -> bool:
        """Count a helper as on its way, if one may start and none is (the lock is held).

        The caller submits it after releasing the lock: a submit can start a thread, and
        the batch's other threads would wait for that.
        """
        if self._left and self._spare and not self._arriving:
            self._spare -= 1
            self._arriving += 1
            return True
        return False

    def _help(self) -> None:
        self._loop(helper=True)

    def _loop(self, helper: bool) -> None:
        busy = False
        try:
            while True:
                with self._lock:
                    if helper and not busy:  # a helper's first pass: it has arrived
                        self._arriving -= 1
                    index = next(self._cursor, None) if self._keep_going() else None
                    if index is None:
                        if busy:  # done: leave the batch in this same hold of the lock
                            busy = False
                            self._leave()
                        return
                    self.started += 1
                    self._left -= 1
                    more = helper and self._helping(busy)
                    busy = helper
                if more:
                    self._pool.submit(self._help)
                self._work(index)
        except BaseException as error:
            if not helper:
                raise
            self._error = error
        finally:
            if busy:
                with self._lock:
                    self._leave()

    def _helping(self, busy: bool) -> bool:
        """A helper took an item (the lock is held): it is busy from its first, and as the
        batch proved slow, the next item gets a thread of its own; whether to submit one."""
        if not busy:
            self._busy += 1
            self.helped = True
        return self._claim_helper()

    def _leave(self) -> None:
        """A helper that took items is done (the lock is held): the last one wakes the
        caller, which waits for all of them, so it wakes once rather than per helper."""
        self._busy -= 1
        if not self._busy and self._idle is not None:
            self._idle.release()

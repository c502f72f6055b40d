"""A lazy, bounded worker pool: items start in order, at most `concurrency` at once."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable


def run_lazily(
    count: int,
    concurrency: int,
    work: Callable[[int], None],
    keep_going: Callable[[], bool],
    *,
    executor: concurrent.futures.ThreadPoolExecutor | None = None,
) -> None:
    """Run `work(0) .. work(count - 1)`, starting them in order, at most `concurrency` at once.

    Before taking each next item a worker asks `keep_going()`; once it says no, nothing new
    starts, and the call returns after every started item has finished (drain). `work` must
    not raise. The calling thread is one of the workers (it would only wait otherwise), so
    a pool needs `concurrency - 1` threads; with `concurrency == 1` everything runs inline.

    Helpers are started one at a time: a thread that takes an item while more remain asks
    for one more helper, unless one is already on its way. Slow items (a tool waiting on
    the network) still all run at once, a thread wake-up apart; quick ones mostly run on
    the threads already running, instead of waking `concurrency - 1` threads that would
    find nothing left to do.

    Args:
        count: how many items.
        concurrency: the bound on items running at once.
        work: runs one item.
        keep_going: whether another item may start.
        executor: a pool (with at least `concurrency - 1` workers) to reuse; otherwise a
            pool is made for this call and shut down before it returns.
    """
    if min(concurrency, count) <= 1:
        for index in range(count):
            if not keep_going():
                return
            work(index)
        return
    own = executor is None
    pool = executor or concurrent.futures.ThreadPoolExecutor(
        max_workers=min(concurrency, count) - 1, thread_name_prefix="tubeless-worker"
    )
    try:
        _Helpers(count, concurrency, work, keep_going, pool).run()
    finally:
        if own:
            pool.shutdown(wait=True)


class _Helpers:
    """The threads of one `run_lazily` call: the caller, and helpers started on demand."""

    def __init__(
        self,
        count: int,
        concurrency: int,
        work: Callable[[int], None],
        keep_going: Callable[[], bool],
        pool: concurrent.futures.ThreadPoolExecutor,
    ) -> None:
        self._work = work
        self._keep_going = keep_going
        self._pool = pool
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._cursor = iter(range(count))
        self._left = count
        self._spare = min(concurrency, count) - 1  # helpers that may still be started
        self._arriving = 0  # helpers started that have not asked for an item yet
        self._busy = 0  # helpers that took an item and have not finished
        self._error: BaseException | None = None

    def run(self) -> None:
        """Work as the calling thread, then wait for the helpers that took items.

        A helper still arriving when the items run out takes none and ends on its own
        (the pool's shutdown waits for it), so quick items never wait on a thread wake-up.

        Raises:
            BaseException: whatever escaped `work` in a helper (a bug: `work` must not raise).
        """
        self._loop(helper=False)
        with self._lock:
            while self._busy:
                self._idle.wait()
        if self._error is not None:
            raise self._error

    def _loop(self, helper: bool) -> None:
        busy = False
        try:
            while True:
                with self._lock:
                    if helper and not busy:  # a helper's first pass: it has arrived
                        self._arriving -= 1
                    index = next(self._cursor, None) if self._keep_going() else None
                    if index is None:
                        return
                    if helper and not busy:
                        busy = True
                        self._busy += 1
                    self._left -= 1
                    if self._left and self._spare and not self._arriving:
                        self._spare -= 1
                        self._arriving += 1
                        self._pool.submit(self._loop, True)
                self._work(index)
        except BaseException as error:
            if not helper:
                raise
            self._error = error
        finally:
            if busy:
                with self._lock:
                    self._busy -= 1
                    self._idle.notify_all()

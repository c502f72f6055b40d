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

    Args:
        count: how many items.
        concurrency: the bound on items running at once.
        work: runs one item.
        keep_going: whether another item may start.
        executor: a pool (with at least `concurrency - 1` workers) to reuse; otherwise a
            pool is made for this call and shut down before it returns.
    """
    workers = min(concurrency, count)
    if workers <= 1:
        for index in range(count):
            if not keep_going():
                return
            work(index)
        return
    lock = threading.Lock()
    cursor = iter(range(count))

    def worker() -> None:
        while True:
            with lock:
                if not keep_going():
                    return
                index = next(cursor, None)
            if index is None:
                return
            work(index)

    own = executor is None
    pool = executor or concurrent.futures.ThreadPoolExecutor(
        max_workers=workers - 1, thread_name_prefix="tubeless-worker"
    )
    try:
        futures = [pool.submit(worker) for _ in range(workers - 1)]
        worker()
        for future in futures:
            future.result()
    finally:
        if own:
            pool.shutdown(wait=True)

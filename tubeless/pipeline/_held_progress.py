"""Held-back progress sent one interval on, by one thread per run tree.

A step's progress goes out at most every `PROGRESS_INTERVAL_MS`; a report that comes
sooner is held back. A step whose work is slow (calls in flight) may report nothing more
for seconds, so the held-back state must still go out one interval on, by the wall clock
(a run's clock may be a test's). One thread per run tree does that for every step, while
something is held: it ends once nothing is, and the run joins it before it returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["HeldProgress"]


class HeldProgress:
    """The steps whose progress waits, each with the moment it is due, in hold order.

    Every method is called with `lock` held (the run tree's progress lock), except
    `stop`, which joins the thread outside it.
    """

    __slots__ = ("_due", "_running", "_stopped", "_thread", "_wake")

    def __init__(self, lock: threading.RLock) -> None:
        self._wake = threading.Condition(lock)
        self._due: dict[object, tuple[float, Callable[[], None]]] = {}
        """Step -> (when its held report is due, what sends it); all wait one interval,
        so insertion order is due order."""
        self._thread: threading.Thread | None = None
        self._running = False
        """Whether `_thread` is in its loop: it leaves once nothing is held."""
        self._stopped = False

    def hold(self, step: object, delay: float, send: Callable[[], None]) -> None:
        """Have `send()` called (lock held) `delay` seconds from now, unless dropped."""
        if step in self._due or self._stopped:
            return
        self._due[step] = (time.monotonic() + delay, send)
        if not self._running:
            ended = self._thread
            if ended is not None:
                ended.join()  # out of its loop and its lock: only its return remains
            self._running = True
            self._thread = threading.Thread(target=self._run, name="tubeless-progress", daemon=True)
            self._thread.start()

    def drop(self, step: object) -> None:
        """Forget `step`'s held report (it went out with a later one, or the step closed)."""
        self._due.pop(step, None)

    def _run(self) -> None:
        with self._wake:
            while self._due and not self._stopped:
                step = next(iter(self._due))
                due, send = self._due[step]
                left = due - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                del self._due[step]
                send()
            # Under the lock: a later `hold` sees this and starts a thread of its own.
            self._running = False

    def stop(self) -> None:
        """End the thread and wait for it (the run tree is done)."""
        with self._wake:
            self._stopped = True
            self._due.clear()
            thread = self._thread
            self._wake.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

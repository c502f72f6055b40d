"""Budget permits: one permit context serves a whole batch of calls."""

from __future__ import annotations

import threading
import time

from tubeless.agent import AgentLimits
from tubeless.agent._budget import Budget

WAIT = 5.0


def test_one_permit_context_entered_by_several_threads_holds_a_permit_per_entry(
    thread_baseline: int,
) -> None:
    """One `permit()` context entered by three threads at once admits two (max_concurrency)
    and hands every permit back when they leave."""
    budget = Budget(AgentLimits(max_concurrency=2), "run")
    permit = budget.permit(threading.Event())
    lock = threading.Lock()
    inside: list[int] = [0, 0]  # now, most at once
    release = threading.Event()

    def job() -> None:
        with permit:
            with lock:
                inside[0] += 1
                inside[1] = max(inside[1], inside[0])
            release.wait(WAIT)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=job) for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + WAIT
    while inside[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # room for the third to enter, were the context to let it
    assert inside == [2, 2]
    release.set()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)
    assert inside == [0, 2]
    assert budget.active == 0

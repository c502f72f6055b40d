"""Eight subagents on eight threads reserve against one parent budget: never over the cap."""

from __future__ import annotations

import random
import sys
import threading
from typing import Any

import pytest

from tubeless import Usage, define_agent
from tubeless.agent import pipeline_tool
from tubeless.errors import AgentLimitError

CHILDREN = 8
CAP = 1000
"""The parent's `max_total_tokens`: well below what the children would spend unbounded."""
WAIT = 30
"""Seconds before a barrier gives up (never reached when the test passes)."""


class Ledger:
    """What the children did, with their own account of the tokens held against the cap."""

    def __init__(self, seed: int) -> None:
        self.lock = threading.Lock()
        self.random = random.Random(seed)
        self.barrier = threading.Barrier(CHILDREN, timeout=WAIT)
        self.held = 0
        """Tokens reserved or spent as the children count them (never above the budget's)."""
        self.highest = 0
        self.events: list[tuple[str, str]] = []
        """`("request", child)` and `("refusal", child)` in the order they happened."""
        self.refusals: list[AgentLimitError] = []
        self.spent = 0

    def draw(self, low: int, high: int) -> int:
        with self.lock:
            return self.random.randint(low, high)


def _child_decide(ledger: Ledger) -> Any:
    def decide(state: Any, context: Any) -> Any:
        name = context.options["name"]
        ledger.barrier.wait()  # every child is in `decide` before any reserves
        for _ in range(CAP):  # until refused: each request spends at least 5 tokens of the cap
            for _ in range(ledger.draw(0, 3)):
                threading.Event().wait(0)  # a yield point: another schedule
            wanted = ledger.draw(10, 120)
            try:
                reservation = context.reserve_usage(
                    input_tokens=wanted // 2, output_tokens=wanted - wanted // 2
                )
            except AgentLimitError as error:
                with ledger.lock:
                    ledger.refusals.append(error)
                    ledger.events.append(("refusal", name))
                break
            with ledger.lock:
                ledger.held += wanted
                ledger.highest = max(ledger.highest, ledger.held)
                ledger.events.append(("request", name))  # the "request" goes out here
            used = ledger.draw(wanted // 2, wanted)
            with ledger.lock:
                # Counted down before the budget refunds, so `held` never runs ahead of it.
                ledger.held -= wanted - used
                ledger.spent += used
            reservation.settle(input_tokens=used // 2, output_tokens=used - used // 2)
        return {"kind": "finish", "result": name}

    return decide


def _tree(ledger: Ledger) -> Any:
    child = define_agent(
        id="child",
        input_schema={"type": "object"},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=_child_decide(ledger),
    )
    batch = {
        "kind": "continue",
        "calls": [
            {"id": f"c{index}", "tool": "child", "input": {"name": f"c{index}"}}
            for index in range(CHILDREN)
        ],
    }

    def decide(state: Any, context: Any) -> Any:
        return batch if context.turn == 1 else {"kind": "finish", "result": "done"}

    return define_agent(
        id="parent",
        input_schema={},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide,
        tools={"child": pipeline_tool(child, description="A child that spends tokens")},
        limits={"max_concurrency": CHILDREN, "max_total_tokens": CAP, "max_calls": CHILDREN},
    )


@pytest.mark.parametrize("seed", range(40))
def test_concurrent_subagents_never_exceed_the_parents_cap(seed: int, thread_baseline: int) -> None:
    """Over randomized schedules the tokens held stay under the cap, and refusals send nothing."""
    ledger = Ledger(seed)

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: interleavings a lock must survive
    try:
        run = _tree(ledger).run({})
    finally:
        sys.setswitchinterval(switching)

    assert run.status == "completed", run.errors
    assert ledger.highest <= CAP
    assert run.usage == Usage(
        input_tokens=run.usage.input_tokens, output_tokens=run.usage.output_tokens
    )
    assert run.usage.total_tokens == ledger.spent <= CAP
    assert len(ledger.refusals) == CHILDREN
    for error in ledger.refusals:
        assert (error.limit, error.scope, error.bound) == ("max_total_tokens", run.run_id, CAP)
        assert error.consumed + error.requested > CAP
    for child in range(CHILDREN):
        mine = [kind for kind, name in ledger.events if name == f"c{child}"]
        assert mine[-1] == "refusal" and mine.count("refusal") == 1

"""A `decide` callable that replays scripted decisions: test agents without a model."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from tubeless.agent._context import DecisionContext

ScriptEntry = Any | Callable[[Any, DecisionContext], Any]


class ScriptedDecide:
    """Replays `decisions[turn - 1]` on each turn of every invocation.

    An entry is a decision (returned as is, so malformed ones test the harness's checks)
    or a callable `entry(state, context)` returning one. The turn number picks the entry,
    so concurrent invocations each replay the script from the start.

    Attributes:
        seen: `(turn, state)` for every call, in call order (thread-safe).
    """

    def __init__(self, decisions: Sequence[ScriptEntry]) -> None:
        self._decisions = tuple(decisions)
        self._lock = threading.Lock()
        self.seen: list[tuple[int, Any]] = []

    def __call__(self, state: Any, context: DecisionContext) -> Any:
        with self._lock:
            self.seen.append((context.turn, state))
        if context.turn > len(self._decisions):
            raise LookupError(
                f"Scripted decide has no decision for turn {context.turn} "
                f"(the script has {len(self._decisions)})"
            )
        entry = self._decisions[context.turn - 1]
        return entry(state, context) if callable(entry) else entry


def scripted_decide(decisions: Sequence[ScriptEntry]) -> ScriptedDecide:
    """Build a `decide` that returns `decisions[turn - 1]` (or calls it with state, context)."""
    return ScriptedDecide(decisions)

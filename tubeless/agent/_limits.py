"""Agent limits: bounds on turns, calls, decisions, delegation depth and concurrency."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from tubeless._quote import quote
from tubeless.errors import AgentDefinitionError

MAX_SAFE_INTEGER = 2**53 - 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentLimits:
    """Hard limits of one agent invocation and of the subagents it delegates to.

    `max_calls`, `max_decisions`, `max_depth` and `max_concurrency` bound the whole subtree
    below the invocation: a subagent's own limits can only tighten them. `max_turns` is
    local to each agent.
    """

    max_turns: int = 20
    """Decision callbacks including the finishing one; also the bound on turn runs (local)."""
    max_calls: int = 100
    """Tool calls admitted in this invocation and every subagent below it (zero allowed)."""
    max_decisions: int = 100
    """Decision-callback admissions in this invocation and every subagent below it."""
    max_depth: int = 4
    """Levels of subagents below this invocation; 0 rejects every pipeline tool call."""
    max_concurrency: int = 1
    """Jobs (decisions and tool handlers) running at once in this invocation's subtree."""

    def to_dict(self) -> dict[str, int]:
        """Return the wire form `{maxTurns, maxCalls, maxDecisions, maxDepth, maxConcurrency}`."""
        return {
            "maxTurns": self.max_turns,
            "maxCalls": self.max_calls,
            "maxDecisions": self.max_decisions,
            "maxDepth": self.max_depth,
            "maxConcurrency": self.max_concurrency,
        }


_FIELDS = tuple(field.name for field in dataclasses.fields(AgentLimits))


def _check(name: str, value: object) -> int:
    minimum = 0 if name in ("max_calls", "max_depth") else 1
    safe = (
        isinstance(value, int)
        and not isinstance(value, bool)
        and minimum <= value <= MAX_SAFE_INTEGER
    )
    if not safe:
        adjective = "nonnegative" if minimum == 0 else "positive"
        raise AgentDefinitionError(
            f"Agent {name} must be a {adjective} safe integer, got {quote(value)}"
        )
    return value  # type: ignore[return-value]


def _did_you_mean(key: object) -> str:
    """`; did you mean max_calls?` for a near miss such as `max_call`, else nothing."""
    if type(key) is not str:
        return ""
    close = difflib.get_close_matches(key, _FIELDS, n=1, cutoff=0.85)
    return f"; did you mean {close[0]}?" if close else ""


def resolve_limits(limits: AgentLimits | Mapping[str, Any] | None) -> AgentLimits:
    """Check limits given as `AgentLimits`, a dict with snake_case keys, or `None`.

    Raises:
        AgentDefinitionError: for an unknown key ("Unsupported agent limit: <key>") or a
            value that is not a safe integer of at least its minimum.
    """
    if limits is None:
        return AgentLimits()
    if isinstance(limits, AgentLimits):
        values = {name: getattr(limits, name) for name in _FIELDS}
    elif isinstance(limits, Mapping):
        for key in limits:
            if key not in _FIELDS:
                raise AgentDefinitionError(f"Unsupported agent limit: {key}{_did_you_mean(key)}")
        values = dict(limits)
    else:
        raise AgentDefinitionError("Agent limits must be an AgentLimits or a dict")
    return AgentLimits(**{name: _check(name, value) for name, value in values.items()})

"""Agent limits: bounds on turns, calls, decisions, delegation depth, concurrency and usage."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from typing import Any

from tubeless._fields import wire, wire_dict
from tubeless._quote import quote
from tubeless.errors import AgentDefinitionError

MAX_SAFE_INTEGER = 2**53 - 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentLimits:
    """Hard limits of one agent invocation and of the subagents it delegates to.

    `max_calls`, `max_decisions`, `max_depth`, `max_concurrency`, `max_repairs`, the usage
    limits (`max_input_tokens`, `max_output_tokens`, `max_total_tokens`, `max_cost`) and
    `max_seconds` bound the whole subtree below the invocation: a subagent's own limits can
    only tighten them. `max_turns` is local to each agent. An optional limit left unset
    stays out of `to_dict()`, so definitions without one keep their identity.
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
    max_input_tokens: int | None = None
    """Input tokens reserved or reported by `decide` in the subtree (`None`: unbounded)."""
    max_output_tokens: int | None = None
    """Output tokens reserved or reported by `decide` in the subtree (`None`: unbounded)."""
    max_total_tokens: int | None = None
    """Input plus output tokens in the subtree (`None`: unbounded)."""
    max_cost: float | None = None
    """Cost in the subtree, in the application's own unit (`None`: unbounded)."""
    max_seconds: float | None = None
    """Wall-clock seconds for this invocation and every subagent below it (`None`: no bound).

    Checked before every decision and batch; each call's deadline is at most the time
    left. Running out fails the run with `TUBELESS_AGENT_LIMIT_REACHED`."""

    max_repairs: int = dataclasses.field(default=0, metadata=wire(omit="falsy"))
    """Invalid decisions sent back to `decide` (as `context.rejection`) in this invocation
    and every subagent below it; 0 fails the run on the first invalid decision."""

    def to_dict(self) -> dict[str, int | float]:
        """Return the wire form `{maxTurns, maxCalls, maxDecisions, maxDepth, maxConcurrency}`,
        plus `maxInputTokens`, `maxOutputTokens`, `maxTotalTokens`, `maxCost`, `maxSeconds`
        and `maxRepairs` when set (so limits without them keep their identity)."""
        return wire_dict(self)


_FIELDS = tuple(field.name for field in dataclasses.fields(AgentLimits))


USAGE_LIMITS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost")
"""The optional limits on usage, in the order `Usage` names its figures."""


def is_amount(value: object, *, integer: bool) -> bool:
    """Whether `value` is a usage amount: a nonnegative safe integer, or (not `integer`) a
    finite nonnegative number; `bool` is neither."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_SAFE_INTEGER
    return not integer and isinstance(value, float) and math.isfinite(value) and value >= 0


def _check_usage(name: str, value: object) -> Any:
    if value is None:
        return None
    integer = name != "max_cost"
    if not is_amount(value, integer=integer):
        kind = "nonnegative safe integer" if integer else "finite nonnegative number"
        raise AgentDefinitionError(f"Agent {name} must be a {kind} or None, got {quote(value)}")
    return value


MAX_SECONDS = 1e9
"""The largest number of seconds a limit, a timeout or a backoff may give (about 31 years)."""


def check_seconds(value: object, label: str) -> float:
    """`value` as seconds: a finite number above zero, at most `MAX_SECONDS`.

    Raises:
        AgentDefinitionError: for anything else (zero, negatives, NaN, booleans, strings).
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not (0 < value <= MAX_SECONDS) or math.isnan(value):  # type: ignore[operator, arg-type]
        raise AgentDefinitionError(
            f"{label} must be a number of seconds above 0 (at most {MAX_SECONDS:g}), "
            f"got {quote(value)}"
        )
    return float(value)  # type: ignore[arg-type]


def _check(name: str, value: object) -> Any:
    if name in USAGE_LIMITS:
        return _check_usage(name, value)
    if name == "max_seconds":
        return None if value is None else check_seconds(value, "Agent max_seconds")
    minimum = 0 if name in ("max_calls", "max_depth", "max_repairs") else 1
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
    return value


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
            value that is not a safe integer of at least its minimum (a usage limit: not
            `None` nor a nonnegative safe integer, or for `max_cost` a finite nonnegative
            number).
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
    checked: dict[str, Any] = {name: _check(name, value) for name, value in values.items()}
    return AgentLimits(**checked)

"""Checking what `decide` returns: untrusted data until proven to be a decision."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeGuard

from tubeless._frozen import FrozenDict, slot_init
from tubeless._quote import quote, quote_list, type_name
from tubeless.agent._state import SEQUENCES, OwnedDict
from tubeless.errors import AgentError

CALL_ID_LIMIT = 256
_CALL_KEYS = frozenset({"id", "tool", "input"})


@slot_init
@dataclasses.dataclass(frozen=True, slots=True)
class AgentCall:
    """One requested tool call, shape-checked (its input is not validated yet)."""

    id: str
    """Turn-local call id."""
    tool: str
    """Registered tool name (not yet resolved)."""
    input: Any
    """Raw arguments for the tool's input schema (`None` is a value)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ContinueDecision:
    """Run a batch of calls, then decide again."""

    calls: tuple[AgentCall, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class FinishDecision:
    """Finish with a raw result (validated by the result schema next)."""

    result: Any


def _invalid(message: str) -> AgentError:
    return AgentError(message, code="TUBELESS_AGENT_INVALID_DECISION")


def _plain(value: object) -> bool:
    return type(value) in (dict, FrozenDict, OwnedDict)


def _keys_text(keys: object) -> str:
    return quote_list(keys)


def _is_text(value: object) -> TypeGuard[str]:
    """Whether `value` is exactly a `str`: a subclass may compare, hash or print oddly."""
    return type(value) is str


def _is_unicode(text: str) -> bool:
    """Whether `text` encodes as UTF-8: a call id goes into every trace record of its run."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_decision(raw: object) -> ContinueDecision | FinishDecision:
    """Check the envelope and every call's shape.

    Whatever `decide` returned, the outcome is a decision or this error: a value that
    breaks the check itself (a key whose comparison raises, say) is an invalid decision.

    Raises:
        AgentError: `TUBELESS_AGENT_INVALID_DECISION` naming the offending key or call.
    """
    try:
        return _parse_decision(raw)
    except AgentError:
        raise
    except Exception as error:  # RecursionError included
        raise _invalid(
            f"Agent decision could not be read: checking it raised {type_name(error)}"
        ) from None


def _parse_decision(raw: object) -> ContinueDecision | FinishDecision:
    calls = _envelope(raw)
    if isinstance(calls, FinishDecision):
        return calls
    # A list first: one comprehension call per decision, not a generator step per call.
    parsed = tuple([_parse_call(call, position) for position, call in enumerate(calls)])
    seen: set[str] = set()
    for call in parsed:
        if call.id in seen:
            raise _invalid(f"Duplicate agent call id: {quote(call.id)}")
        seen.add(call.id)
    return ContinueDecision(parsed)


def decision_problems(raw: object, limit: int) -> list[tuple[str, AgentError, object]]:
    """Up to `limit` problems of a decision `parse_decision` refused, in one pass.

    Each is `(JSON pointer into the decision, error, the offending call or None)`; for the
    repair path only, so the usual path never builds these messages.
    """
    try:
        calls = _envelope(raw)
    except AgentError as error:
        return [("", error, None)]
    if isinstance(calls, FinishDecision):
        return []
    problems: list[tuple[str, AgentError, object]] = []
    seen: set[str] = set()
    for position, call in enumerate(calls):
        if len(problems) >= limit:
            break
        try:
            parsed = _parse_call(call, position)
        except AgentError as error:
            problems.append((f"/calls/{position}", error, call))
            continue
        if parsed.id in seen:
            duplicate = _invalid(f"Duplicate agent call id: {quote(parsed.id)}")
            problems.append((f"/calls/{position}/id", duplicate, call))
        seen.add(parsed.id)
    return problems


def _envelope(raw: object) -> FinishDecision | list[Any] | tuple[Any, ...]:
    """A finish decision, or the calls of a continue decision (their shapes unchecked)."""
    if not _plain(raw):
        raise _invalid(f"Agent decision must be a plain dict, got {type_name(raw)}")
    assert isinstance(raw, dict)
    kind = raw.get("kind")
    if not _is_text(kind) or kind not in ("finish", "continue"):
        raise _invalid(
            "Agent decision must be {'kind': 'finish', 'result': ...} or "
            f"{{'kind': 'continue', 'calls': [...]}}, got kind {quote(kind)}"
        )
    if kind == "finish":
        if "result" not in raw:
            raise _invalid("Agent finish decision requires a result key (None is a valid result)")
        extra = set(raw) - {"kind", "result"}
        if extra:
            raise _invalid(f"Agent finish decision has unexpected keys: {_keys_text(extra)}")
        return FinishDecision(raw["result"])
    extra = set(raw) - {"kind", "calls"}
    if extra:
        raise _invalid(f"Agent continue decision has unexpected keys: {_keys_text(extra)}")
    calls = raw.get("calls")
    if type(calls) not in SEQUENCES or not calls:
        raise _invalid("Agent continue decision requires a non-empty calls list")
    assert isinstance(calls, (list, tuple))
    return calls


def _parse_call(call: object, position: int) -> AgentCall:
    if type(call) is dict and call.keys() == _CALL_KEYS:
        # The usual shape, checked without building any message.
        call_id, tool = call["id"], call["tool"]
        if (
            type(call_id) is str  # as `_is_text`, inline: this runs for every call
            and call_id.strip()
            and len(call_id) <= CALL_ID_LIMIT
            and call_id.isascii()
            and type(tool) is str
            and tool.strip()
        ):
            return AgentCall(call_id, tool, call["input"])
    return _parse_odd_call(call, position)


def _parse_odd_call(call: object, position: int) -> AgentCall:
    """`_parse_call` for any other shape: the same checks, naming what is wrong."""
    where = f"Agent call #{position + 1}"
    if not _plain(call):
        raise _invalid(f"{where} must be a plain dict, got {type_name(call)}")
    assert isinstance(call, dict)
    call_id = call.get("id")
    if _is_text(call_id) and call_id.strip():
        where = f"Agent call {quote(call_id)}"
    missing = _CALL_KEYS - set(call)
    if missing:
        raise _invalid(
            f"{where} requires the keys id, tool and input; missing {_keys_text(missing)}"
        )
    extra = set(call) - _CALL_KEYS
    if extra:
        raise _invalid(f"{where} has unexpected keys: {_keys_text(extra)}")
    if not _is_text(call_id) or not call_id.strip():
        raise _invalid(f"{where} requires a non-blank string id")
    if len(call_id) > CALL_ID_LIMIT:
        raise _invalid(f"Agent call #{position + 1} id is longer than {CALL_ID_LIMIT} characters")
    if not call_id.isascii() and not _is_unicode(call_id):
        raise _invalid(f"Agent call #{position + 1} id holds a lone surrogate (not UTF-8 text)")
    tool = call["tool"]
    if not _is_text(tool) or not tool.strip():
        raise _invalid(f"{where} requires a non-blank string tool name")
    return AgentCall(call_id, tool, call["input"])

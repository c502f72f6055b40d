"""The cassette document: what a recorded run holds, checked on the way in and out.

A cassette holds, per agent of the tree (by its path from the root: `<root id>`, then
`<parent path>/<turn>/<call id>` for a subagent), each turn's validated decision and the
outcomes of that turn's calls in decision order. Nothing else: no credentials, no request
or response bodies, no timings, no run ids. The code that reads and writes the file lives
in `_cassette.py`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from tubeless._fields import wire_dict
from tubeless._quote import quote, quote_list, type_name
from tubeless.errors import CassetteError

FORMAT = 1
"""The version of the cassette document, written as `tubelessCassette`."""


def _problem(where: str, message: str) -> CassetteError:
    return CassetteError(f"Cassette {where}: {message}")


def plain_json(value: Any, where: str) -> Any:
    """`value` as JSON data (dicts and lists), or a `CassetteError` naming `where`."""
    try:
        return json.loads(json.dumps(value, allow_nan=False, ensure_ascii=False))
    except (TypeError, ValueError) as error:
        raise _problem(where, f"is not JSON data ({type_name(error)})") from None


def canonical(value: Any) -> str:
    """The stable text of JSON data, for comparing a live value with a recorded one."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _mapping(
    value: Any, where: str, keys: frozenset[str], required: frozenset[str]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _problem(where, f"must be an object, got {type_name(value)}")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise _problem(where, f"has unknown keys {quote_list(unknown)}")
    missing = sorted(required - set(value))
    if missing:
        raise _problem(where, f"lacks the keys {quote_list(missing)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _problem(where, f"must be a list, got {type_name(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _problem(where, "must be a non-blank string")
    return value


def _check_outcome(value: Any, where: str) -> None:
    keys = frozenset({"id", "tool", "ok", "value", "error"})
    outcome = _mapping(value, where, keys, frozenset({"id", "tool", "ok"}))
    _text(outcome["id"], f"{where} id")
    _text(outcome["tool"], f"{where} tool")
    if outcome["ok"] is True and "value" in outcome and "error" not in outcome:
        return
    if outcome["ok"] is False and "error" in outcome and "value" not in outcome:
        error = _mapping(
            outcome["error"], f"{where} error", frozenset({"code", "message"}), frozenset()
        )
        if not all(isinstance(error.get(key, ""), str) for key in ("code", "message")):
            raise _problem(f"{where} error", "code and message must be strings")
        return
    raise _problem(where, "must be {id, tool, ok: true, value} or {id, tool, ok: false, error}")


def _check_decision(value: Any, where: str) -> tuple[str, ...]:
    """Check a recorded decision's envelope; return its call ids (none for a finish)."""
    if isinstance(value, dict) and value.get("kind") == "finish":
        _mapping(value, where, frozenset({"kind", "result"}), frozenset({"kind", "result"}))
        return ()
    decision = _mapping(value, where, frozenset({"kind", "calls"}), frozenset({"kind", "calls"}))
    if decision["kind"] != "continue":
        raise _problem(where, "kind must be 'continue' or 'finish'")
    ids = []
    for position, call in enumerate(_list(decision["calls"], f"{where} calls")):
        label = f"{where} call #{position + 1}"
        keys = frozenset({"id", "tool", "input"})
        _mapping(call, label, keys, keys)
        ids.append(_text(call["id"], f"{label} id"))
        _text(call["tool"], f"{label} tool")
    if not ids or len(set(ids)) != len(ids):
        raise _problem(where, "must hold at least one call, each with its own id")
    return tuple(ids)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordedTurn:
    """One turn of one agent: the decision it took and its calls' outcomes."""

    turn: int
    """The turn number, from 1."""
    decision: Any
    """The validated decision as `decide` gave it: `{"kind": "continue", "calls": [...]}`
    (raw call inputs, before the tools' schemas) or `{"kind": "finish", "result": ...}`."""
    outcomes: tuple[Any, ...] = ()
    """The outcomes of the turn's calls, in decision order (none for a finish)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `{turn, decision}` plus `outcomes` for a batch."""
        out: dict[str, Any] = {"turn": self.turn, "decision": self.decision}
        if self.decision.get("kind") == "continue":
            out["outcomes"] = list(self.outcomes)
        return out

    @classmethod
    def from_dict(cls, value: Any, where: str) -> RecordedTurn:
        """Check and read one turn."""
        keys = frozenset({"turn", "decision", "outcomes"})
        turn = _mapping(value, where, keys, frozenset({"turn", "decision"}))
        number = turn["turn"]
        if type(number) is not int or number < 1:
            raise _problem(where, "turn must be a positive integer")
        where = f"{where} (turn {number})"
        ids = _check_decision(turn["decision"], f"{where} decision")
        outcomes = _list(turn.get("outcomes", []), f"{where} outcomes")
        for position, outcome in enumerate(outcomes):
            _check_outcome(outcome, f"{where} outcome #{position + 1}")
        if tuple(outcome["id"] for outcome in outcomes) != ids:
            raise _problem(where, "outcomes must match the decision's calls, in order")
        return cls(turn=number, decision=turn["decision"], outcomes=tuple(outcomes))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordedAgent:
    """Every turn of one agent of the tree."""

    path: str
    """The agent's path from the root: `<root id>`, `<root id>/<turn>/<call id>`, ..."""
    turns: tuple[RecordedTurn, ...]
    """Its turns, in order from turn 1."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `{path, turns}`."""
        return wire_dict(self)

    @classmethod
    def from_dict(cls, value: Any, where: str) -> RecordedAgent:
        """Check and read one agent's turns."""
        keys = frozenset({"path", "turns"})
        agent = _mapping(value, where, keys, keys)
        path = _text(agent["path"], f"{where} path")
        where = f"agent {quote(path)}"
        turns = tuple(RecordedTurn.from_dict(turn, where) for turn in _list(agent["turns"], where))
        if [turn.turn for turn in turns] != list(range(1, len(turns) + 1)):
            raise _problem(where, "turns must be numbered 1, 2, ... in order")
        return cls(path=path, turns=turns)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CassetteDocument:
    """A recorded run: every agent of the tree, sorted by path."""

    agents: tuple[RecordedAgent, ...]
    """Each agent's turns, sorted by path (stable across runs and thread timings)."""

    def agent(self, path: str) -> RecordedAgent | None:
        """The recorded agent at `path`, if any."""
        for agent in self.agents:
            if agent.path == path:
                return agent
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `{tubelessCassette: 1, agents: [...]}`."""
        return {"tubelessCassette": FORMAT, "agents": [agent.to_dict() for agent in self.agents]}

    def to_text(self) -> str:
        """The file's text: indented JSON with sorted keys, ending in a newline.

        Text stays readable (not `\\u`-escaped) unless it holds a lone surrogate, which
        UTF-8 cannot carry: then every non-ASCII character is escaped.
        """
        value = self.to_dict()
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, indent=2, sort_keys=True)
        return text + "\n"

    @classmethod
    def from_dict(cls, value: Any) -> CassetteDocument:
        """Check and read a whole document.

        Raises:
            CassetteError: `TUBELESS_CASSETTE_INVALID`, naming the first problem.
        """
        keys = frozenset({"tubelessCassette", "agents"})
        document = _mapping(value, "document", keys, keys)
        if document["tubelessCassette"] != FORMAT:
            raise _problem("document", f"has format {quote(document['tubelessCassette'])}")
        agents = tuple(
            RecordedAgent.from_dict(agent, f"agent #{position + 1}")
            for position, agent in enumerate(_list(document["agents"], "agents"))
        )
        paths = [agent.path for agent in agents]
        if paths != sorted(set(paths)):
            raise _problem("document", "agents must be sorted by path, each path once")
        return cls(agents=agents)

    @classmethod
    def from_text(cls, text: str) -> CassetteDocument:
        """Read a document from the file's text.

        Raises:
            CassetteError: `TUBELESS_CASSETTE_INVALID` when the text is not a cassette.
        """

        def refuse(constant: str) -> float:
            raise ValueError(f"{constant} is not JSON")

        try:
            value = json.loads(text, parse_constant=refuse)
        except ValueError as error:
            raise _problem("document", f"is not JSON: {str(error)[:200]}") from None
        return cls.from_dict(value)


def document_of(recorded: Mapping[str, Mapping[int, RecordedTurn]]) -> CassetteDocument:
    """The document of a recording: agents sorted by path, turns in order."""
    agents = tuple(
        RecordedAgent(path=path, turns=tuple(turns[number] for number in sorted(turns)))
        for path, turns in sorted(recorded.items())
    )
    return CassetteDocument(agents=agents)

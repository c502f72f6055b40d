"""The change log of a checkpoint: what a journal write appends, and how a read replays it.

A store keeps the document as a snapshot and a log of changes appended since
(`fold_changes` replays them): each change is a JSON array of operations, `["set", path,
value]` (put `value` at `path`) and `["add", path, items]` (extend the list at `path`,
made when missing), a path being the keys and list indices from the document's top. A
state that grows by appending to its lists is logged as `add`s of the new items
(`state_changes`), so a write costs what changed, not what the state holds.
"""

from __future__ import annotations

import json
import operator
import typing
from collections.abc import Sequence
from typing import Any

from tubeless._quote import quote
from tubeless.agent._journal_document import Path, invalid


def encode_set(path: Path, value: Any) -> str:
    """The change that puts `value` at `path` (its JSON written now, as the value is now)."""
    return dumps(("set", path, value))


def encode_add(path: Path, items: Sequence[Any]) -> str:
    """The change that extends the list at `path` (made when missing) with `items`."""
    return dumps(("add", path, items))


dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
"""Compact JSON of a document value (one encoder: `json.dumps` with options makes one per
call)."""


_DIFF_DEPTH = 32


def state_changes(path: Path, old: Any, new: Any, changes: list[str], depth: int = 0) -> None:
    """Append to `changes` what turns `old` into `new` at `path`.

    Dictionaries are compared key by key and a list that only grew logs its new items,
    so an accumulating state costs its growth; anything else that differs is set whole.
    """
    if old is new:
        return
    if depth < _DIFF_DEPTH and isinstance(old, dict) and isinstance(new, dict):
        if all(name in new for name in old):
            for name, value in new.items():
                if name in old:
                    state_changes((*path, name), old[name], value, changes, depth + 1)
                else:
                    changes.append(encode_set((*path, name), value))
            return
    elif _sequence(old) and _sequence(new) and len(new) >= len(old):
        # Entries a commit kept are the very same objects: checked in C before the JSON.
        if all(map(operator.is_, old, new)) or all(
            _same(before, after) for before, after in zip(old, new, strict=False)
        ):
            if len(new) > len(old):
                changes.append(encode_add(path, new[len(old) :]))
            return
    elif type(old) is type(new) and old == new:
        return
    changes.append(encode_set(path, new))


def _sequence(value: object) -> bool:
    return isinstance(value, (list, tuple))


def _same(before: Any, after: Any) -> bool:
    """Whether two values save the same (the JSON tells `1` from `True` and `1.0`)."""
    return before is after or dumps(before) == dumps(after)


def fold_changes(snapshot: str, changes: Sequence[str]) -> str:
    """The document text of `snapshot` with `changes` replayed in order.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` when the snapshot is not a JSON
            object or a change is malformed or does not fit the document.
    """
    if not changes:
        return snapshot
    try:
        document = json.loads(snapshot)
    except (ValueError, RecursionError) as error:
        raise invalid(f"not JSON ({str(error)[:120]})") from None
    if not isinstance(document, dict):
        raise invalid("not a tubeless agent checkpoint")
    for number, change in enumerate(changes, start=1):
        try:
            operations = json.loads(change)
        except (ValueError, RecursionError):
            raise invalid(f"change {number} of the log is not JSON") from None
        if not isinstance(operations, list):
            raise invalid(f"change {number} of the log is malformed")
        for operation in operations:
            _apply(document, operation, number)
    return dumps(document)


def _apply(document: dict[str, Any], operation: object, number: int) -> None:
    """Replay one `["set"|"add", path, value]` operation onto `document`."""
    if not (
        isinstance(operation, list)
        and len(operation) == 3
        and operation[0] in ("set", "add")
        and isinstance(operation[1], list)
        and operation[1]
    ):
        raise invalid(f"change {number} of the log is malformed")
    kind, path, value = operation
    container: Any = document
    for step in path[:-1]:
        container = _child(container, step, number)
    last = path[-1]
    if kind == "set":
        fits = _index(last, container) if isinstance(container, list) else type(last) is str
        if not fits or not isinstance(container, (list, dict)):
            raise invalid(f"change {number} of the log does not fit the checkpoint")
        container[last] = value
        return
    if not (isinstance(container, dict) and type(last) is str and isinstance(value, list)):
        raise invalid(f"change {number} of the log does not fit the checkpoint")
    target = container.setdefault(last, [])
    if not isinstance(target, list):
        raise invalid(f"change {number} of the log does not fit the checkpoint")
    target.extend(value)


def _index(step: object, container: list[Any]) -> typing.TypeGuard[int]:
    return type(step) is int and 0 <= step < len(container)


def _child(container: Any, step: object, number: int) -> Any:
    if isinstance(container, dict) and type(step) is str and step in container:
        return container[step]
    if isinstance(container, list) and _index(step, container):
        return container[step]
    raise invalid(f"change {number} of the log does not fit the checkpoint (at {quote(str(step))})")

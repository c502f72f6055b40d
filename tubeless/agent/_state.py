"""Owned, frozen plain data: agent state and capability descriptors.

Plain data is `None`, `bool`, `int`, finite `float`, `str`, lists/tuples of plain data and
dicts with string keys of plain data, nested at most `PLAIN_DEPTH_LIMIT` containers deep.
Mappings become read-only `FrozenDict`s and sequences tuples, so `json.dumps(state)` works
and `==` compares by value. The same check guards model data: call inputs and finish
results (`plain_data_problem`).

What this module makes is marked as owned (`OwnedDict`, `OwnedTuple`) and reused as is
when it reappears in a later state, so a commit never walks or copies the unchanged parts
of the previous state again. Each owned container knows its height (how many containers
deep it goes), so one reused at another place still keeps the depth limit without a walk.
Other tuples and `FrozenDict`s (an outcome may hold a tool's mutable output) are checked
like everything else. Given the previous state, a sequence that starts with the previous
one's very entries (`[*previous, *new]`) has that head matched by identity and only its
tail looked at; `owned + entries` freezes the entries added then and there, so the commit
takes the result as it is.
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote, type_name
from tubeless.errors import AgentDefinitionError, AgentError


class OwnedDict(FrozenDict):
    """A read-only mapping made by `own_state`: checked plain data, reused without a walk."""

    __slots__ = ("height",)

    height: int
    """Containers from this one down to its deepest (1 when it holds no container)."""


class OwnedTuple(tuple[Any, ...]):
    """A tuple made by `own_state`: checked plain data, reused without a walk.

    `owned + entries` (a list or tuple of plain data) is an `OwnedTuple` too: the entries
    are checked and frozen as they are added, so a commit takes the sum as it is. Entries
    that are not plain data give a plain tuple instead, which the commit checks and
    rejects, naming where.
    """

    # No `__slots__`: a tuple cannot have a slot, so a height other than 1 is kept in the
    # instance's `__dict__` (made only then).
    height = 1
    """Containers from this one down to its deepest (1 when it holds no container)."""

    def __add__(self, other: Any) -> Any:
        if type(other) not in SEQUENCES:
            return NotImplemented
        try:
            tail = _frozen_items(other, 0, (), set(), False)
            height = _checked_height(tail, ())
        except (_NotPlainError, RecursionError):
            return tuple.__add__(self, tuple(other))
        return _owned_tuple(tuple.__add__(self, tuple(tail)), max(self.height, height))


PLAIN_DEPTH_LIMIT = 64
"""At most this many nested containers (the outermost counts as one) in plain data.

Deep enough for any real state or tool input, and shallow enough that walking, copying,
validating and encoding such a value never nears Python's recursion limit.
"""

_PATH_SHOWN = 8
"""At most this many steps of a path appear in a message (first and last four)."""


class _NotPlainError(ValueError):
    """Why a value is not plain data, and where."""


def _where(path: tuple[str | int, ...]) -> str:
    def step(part: str | int) -> str:
        return f"[{quote(part, 32)}]"

    if len(path) > _PATH_SHOWN:
        half = _PATH_SHOWN // 2
        hidden = len(path) - _PATH_SHOWN
        head, tail = "".join(map(step, path[:half])), "".join(map(step, path[-half:]))
        return f"{head}…({hidden} more)…{tail}"
    return "".join(map(step, path)) or "the root"


def _key_text(key: object) -> str:
    if key is None or type(key) in (bool, int, float):
        return f"key {quote(key)}"
    return f"a key of type {type_name(key)}"


SEQUENCES = frozenset({list, tuple, OwnedTuple})
"""Sequence types plain data may use."""

_OWNED = frozenset({OwnedDict, OwnedTuple})
"""The containers `own_state` made: each knows its height."""

_KEPT = frozenset({str, int, bool, OwnedDict, OwnedTuple})
"""Types kept as they are (with `None`): scalars, and what `own_state` made already."""

_KEPT_OR_NONE = _KEPT | {type(None)}
"""`_KEPT` and the type of `None`: what a sequence's owned head may hold."""

_NOTHING: FrozenDict = FrozenDict()
"""The previous state's mapping when there is none at that place."""

_FLAT = frozenset({str, int, bool})
"""Scalars that are plain data whatever their value (floats must be finite)."""


def _freeze(
    value: Any,
    path: tuple[str | int, ...],
    ancestors: set[int],
    sort_keys: bool,
    previous: Any = None,
) -> Any:
    """Freeze `value`; `previous` is what stood at the same place in the previous state."""
    kind = type(value)
    if value is None or kind in _KEPT:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise _NotPlainError(f"{value!r} is not a finite number at {_where(path)}")
    if kind is dict or kind is FrozenDict:
        return _freeze_mapping(value, path, ancestors, sort_keys, previous)
    if kind in SEQUENCES:
        return _freeze_sequence(value, path, ancestors, sort_keys, previous)
    raise _NotPlainError(f"{type_name(value)} is not plain data at {_where(path)}")


def _enter(value: Any, path: tuple[str | int, ...], ancestors: set[int]) -> None:
    if len(path) >= PLAIN_DEPTH_LIMIT:
        raise _too_deep(path)
    if id(value) in ancestors:
        raise _NotPlainError(f"cycle at {_where(path)}")
    ancestors.add(id(value))


def _too_deep(path: tuple[str | int, ...]) -> _NotPlainError:
    return _NotPlainError(
        f"nested too deeply (more than {PLAIN_DEPTH_LIMIT} levels) at {_where(path)}"
    )


def _checked_height(entries: Any, path: tuple[str | int, ...], first: int = 0) -> int:
    """The height of a container at `path` holding the frozen `entries` (a dict or list).

    Containers frozen just now were checked on the way down; an owned one kept as it is
    (from the previous state, or moved from elsewhere) is checked here, by its height.
    A list of entries stands at index `first` of its sequence on (a tail).
    """
    values = entries.values() if type(entries) is dict else entries
    height = 1 + max((entry.height for entry in values if type(entry) in _OWNED), default=0)
    if len(path) + height <= PLAIN_DEPTH_LIMIT:
        return height
    # Name the place: follow the tallest entry down to the first level past the limit.
    while len(path) < PLAIN_DEPTH_LIMIT:
        pairs = entries.items() if isinstance(entries, dict) else enumerate(entries, first)
        first = 0
        key, entries = max(
            ((key, entry) for key, entry in pairs if type(entry) in _OWNED),
            key=lambda pair: pair[1].height,
        )
        path = (*path, key)
    raise _too_deep(path)


def _owned_tuple(entries: Any, height: int) -> OwnedTuple:
    owned = OwnedTuple(entries)
    if height != 1:
        owned.height = height
    return owned


def _freeze_mapping(
    value: dict[Any, Any],
    path: tuple[str | int, ...],
    ancestors: set[int],
    sort_keys: bool,
    previous: Any,
) -> FrozenDict:
    _enter(value, path, ancestors)
    keys = list(value)
    for key in keys:
        if type(key) is not str:
            raise _NotPlainError(f"{_key_text(key)} is not a string at {_where(path)}")
    if sort_keys:
        keys.sort()
    prior = previous if type(previous) is OwnedDict else _NOTHING
    # Kept values (most of a state that grows) skip the call and its path tuple.
    items = {
        key: item
        if (item := value[key]) is None or type(item) in _KEPT
        else _freeze(item, (*path, key), ancestors, sort_keys, prior.get(key))
        for key in keys
    }
    ancestors.discard(id(value))
    owned = OwnedDict(items)
    owned.height = _checked_height(items, path)
    return owned


def _freeze_sequence(
    value: list[Any] | tuple[Any, ...],
    path: tuple[str | int, ...],
    ancestors: set[int],
    sort_keys: bool,
    previous: Any,
) -> tuple[Any, ...]:
    _enter(value, path, ancestors)
    # A state that grows returns the previous entries plus a few new ones: keep that head
    # and look only at the tail. The head is the previous sequence's very entries (matched
    # by identity in C, then copied once with the frozen tail; they stay where they were,
    # so the previous height covers them), or else entries whose types say `own_state`
    # made them (checked in C too); a head with anything else in it takes the
    # item-by-item path.
    known = len(previous) if type(previous) is OwnedTuple else 0
    if known and len(value) >= known and all(map(operator.is_, value, previous)):
        tail = _frozen_items(value, known, path, ancestors, sort_keys)
        ancestors.discard(id(value))
        height = max(previous.height, _checked_height(tail, path, known))
        return _owned_tuple(tuple.__add__(previous, tuple(tail)), height)
    start = len(value)
    while start and type(value[start - 1]) not in _KEPT_OR_NONE:
        start -= 1
    if not _KEPT_OR_NONE.issuperset(map(type, itertools.islice(value, start))):
        start = 0
    items = [
        *itertools.islice(value, start),
        *_frozen_items(value, start, path, ancestors, sort_keys),
    ]
    ancestors.discard(id(value))
    return _owned_tuple(items, _checked_height(items, path))


def _frozen_items(
    value: list[Any] | tuple[Any, ...],
    start: int,
    path: tuple[str | int, ...],
    ancestors: set[int],
    sort_keys: bool,
) -> list[Any]:
    """`value[start:]` frozen, kept values as they are."""
    return [
        item
        if (item := value[index]) is None or type(item) in _KEPT
        else _freeze(item, (*path, index), ancestors, sort_keys)
        for index in range(start, len(value))
    ]


def plain_data_problem(value: Any) -> str | None:
    """Return why `value` is not plain data (and where), or `None` when it is.

    The value is walked as `own_state` walks it (nothing is kept), so every boundary that
    takes model data applies the one rule state follows.
    """
    if type(value) is dict:
        # The usual tool input, one dict of strings, integers and booleans, in one loop
        # (a generator would resume once per key).
        for key, item in value.items():
            if type(key) is not str or not (item is None or type(item) in _FLAT):
                break
        else:
            return None
    try:
        _freeze(value, (), set(), False)
    except _NotPlainError as reason:
        return str(reason)
    except RecursionError:
        return "nested too deeply"
    return None


def own_state(value: Any, *, previous: Any = None) -> Any:
    """Copy and freeze `value` as agent state; the caller's object is never changed.

    Args:
        value: the state, plain data.
        previous: the state `value` follows (what `own_state` returned for it), if any.
            Where a sequence of `value` starts with the very entries (the same objects) of
            the sequence at the same place in `previous`, those entries are reused without
            a look, so a state that grows costs a commit what was added, not all it holds.

    What `own_state` returned, and `+` on a tuple of it (`state["log"] + entries`, which
    freezes the entries added), is kept as it is wherever it appears in `value`.

    Raises:
        AgentError: `TUBELESS_AGENT_INVALID_STATE`, naming where the value is not plain
            data (NaN, infinities, sets, bytes, class instances, functions, non-string
            keys, cycles, and more than 64 nested containers are rejected); the reason is
            the `__cause__`.
    """
    try:
        return _freeze(value, (), set(), False, previous)
    except _NotPlainError as reason:
        raise AgentError(
            f"Agent state must be finite primitives, lists and plain dicts: {reason}",
            code="TUBELESS_AGENT_INVALID_STATE",
        ) from reason
    except RecursionError as reason:
        raise AgentError(
            "Agent state must be finite primitives, lists and plain dicts: nested too deeply",
            code="TUBELESS_AGENT_INVALID_STATE",
        ) from reason


def own_descriptor(value: Any, label: str) -> FrozenDict:
    """Copy and freeze a JSON Schema descriptor with every object's keys sorted.

    Raises:
        AgentDefinitionError: when the descriptor is not a JSON object of plain data.
    """
    if not isinstance(value, dict) or type(value) not in (dict, FrozenDict, OwnedDict):
        raise AgentDefinitionError(f"{label} descriptor must be a JSON object")
    try:
        frozen = _freeze(dict(value), (), set(), True)
    except (_NotPlainError, RecursionError) as reason:
        raise AgentDefinitionError(
            f"{label} descriptor must be plain JSON data: {reason}"
        ) from reason
    assert isinstance(frozen, FrozenDict)
    return frozen

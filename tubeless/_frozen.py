"""Read-only plain data: a `dict` subclass that refuses mutation, and tuples for lists."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any, NoReturn, TypeVar

_Class = TypeVar("_Class", bound=type)


class FrozenDict(dict[str, Any]):
    """A `dict` that cannot be changed: every mutating method raises `TypeError`.

    It is still a `dict`, so `json.dumps` works and `==` compares by value.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("this mapping is read-only")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def freeze_json(value: Any) -> Any:
    """Deep-copy trusted JSON-like data into `FrozenDict`s and tuples (frozen parts reused)."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict({key: freeze_json(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze_json(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Deep-copy read-only data back into plain `dict`s and `list`s."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


def slot_init(cls: _Class) -> _Class:
    """Give the frozen, slotted dataclass `cls` an `__init__` that fills each slot through
    its descriptor: the generated one's signature, defaults and errors, in two thirds of
    the time (it calls `object.__setattr__` once a field, which looks the field up again).

    For classes made often on a hot path: a tool call's `AgentCall`, `PreparedCall` and
    `ExecutionIds`, a step's `StepReport`, a stream's `RunEvent`s. Every field must be an
    `__init__` parameter whose default, if any, is `None`, and the class must have no
    `__post_init__`.
    """
    fields = dataclasses.fields(cls)
    if "__slots__" not in cls.__dict__:
        raise TypeError(f"slot_init needs a slotted dataclass: {cls.__name__}")
    if hasattr(cls, "__post_init__") or any(
        not field.init
        or field.default_factory is not dataclasses.MISSING
        or (field.default is not None and field.default is not dataclasses.MISSING)
        for field in fields
    ):
        raise TypeError(f"slot_init needs init fields whose only default is None: {cls.__name__}")
    generated = cls.__dict__["__init__"]
    signature = inspect.signature(generated)
    bare = signature.replace(
        parameters=[
            parameter.replace(annotation=inspect.Parameter.empty)
            for parameter in signature.parameters.values()
        ],
        return_annotation=inspect.Signature.empty,
    )
    # As `dataclasses` makes `__init__`: source from the field names, defaults all `None`;
    # each slot's setter under a dunder name no field takes.
    setters = {f"__slot_set_{i}__": getattr(cls, f.name).__set__ for i, f in enumerate(fields)}
    body = "".join(f"    __slot_set_{i}__(self, {f.name})\n" for i, f in enumerate(fields))
    exec(f"def __init__{bare}:\n{body}", setters)
    init = setters["__init__"]
    init.__qualname__ = generated.__qualname__
    init.__annotations__ = generated.__annotations__
    cls.__init__ = init  # type: ignore[misc]
    return cls

"""Wire forms read from dataclass fields: one `to_dict()` for many frozen records.

A field's wire key is its name in camelCase (`step_id` -> `stepId`). A field whose
default is `None` is an optional one: it stays out of the wire form while it is `None`
(absent rather than `null`); every other field is always written. A value with a
`to_dict()` is written as that dict, a tuple as a list (its items that have a `to_dict()`
as their dicts), anything else as it is. Keys keep the order of the fields. Field
metadata made by `wire` says otherwise where a field needs it:

    step_id: str | None = None                                  # "stepId", left out if None
    max_repairs: int = dataclasses.field(default=0, metadata=wire(omit="falsy"))
    nested: NestedPipeline | None = dataclasses.field(
        default=None, metadata=wire(key="nestedPipeline")
    )

A leaf: imports nothing of tubeless, so every layer can use it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

Omit = Literal["none", "falsy", "never"]
"""When a field stays out of the wire form: when `None`, when falsy, or never."""


_METADATA_KEY = "tubeless.wire"
_HUMP = re.compile(r"_([a-z0-9])")


@dataclasses.dataclass(frozen=True, slots=True)
class _WireField:
    key: str | None = None
    omit: Omit | None = None
    convert: Callable[[Any], Any] | None = None
    written: bool = True


def wire(
    *,
    key: str | None = None,
    omit: Omit | None = None,
    convert: Callable[[Any], Any] | None = None,
    written: bool = True,
) -> Mapping[str, Any]:
    """Field metadata saying how the field appears in `wire_dict`.

    Args:
        key: the wire key (default: the field name in camelCase).
        omit: leave the field out when its value is `None` (`"none"`) or falsy
            (`"falsy"`); `"never"` always writes it (default: `"none"` for a field whose
            default is `None`, else `"never"`).
        convert: `convert(value)` -> the wire value, instead of the default conversion.
        written: `False` keeps the field out of the wire form altogether.
    """
    return {_METADATA_KEY: _WireField(key, omit, convert, written)}


OMIT_NONE = wire(omit="none")
"""Metadata of a field without a default left out of the wire form while it is `None`."""
AS_IS = wire(convert=lambda value: value)
"""Metadata of a field written exactly as it is (caller data: a tuple stays a tuple)."""


def camel_case(name: str) -> str:
    """`step_id` -> `stepId`."""
    return _HUMP.sub(lambda match: match.group(1).upper(), name)


def _item(value: Any) -> Any:
    method = getattr(type(value), "to_dict", None)
    return value if method is None else method(value)


def _default_conversion(value: Any) -> Any:
    if type(value) is tuple:
        return [_item(item) for item in value]
    return _item(value)


_Plan = tuple[tuple[str, str, Omit, Callable[[Any], Any]], ...]

# One entry per record class (a fixed set): read once, on the class's first `to_dict()`.
# Two threads may both build a class's plan; they build the same one.
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    """Each written field of `cls`: (attribute, key, omit rule, conversion)."""
    plan = _PLANS.get(cls)
    if plan is None:
        entries = []
        for field in dataclasses.fields(cls):
            spec = field.metadata.get(_METADATA_KEY) or _WireField()
            if spec.written:
                key = spec.key or camel_case(field.name)
                omit = spec.omit or ("none" if field.default is None else "never")
                entries.append((field.name, key, omit, spec.convert or _default_conversion))
        plan = _PLANS[cls] = tuple(entries)
    return plan


def wire_dict(record: object) -> dict[str, Any]:
    """The wire form of the dataclass instance `record`, as its fields' metadata says."""
    out: dict[str, Any] = {}
    for name, key, omit, convert in _plan(type(record)):
        value = getattr(record, name)
        if omit != "never" and (not value if omit == "falsy" else value is None):
            continue
        out[key] = convert(value)
    return out

"""Run extensions: the one typed slot a layer above the core owns in every run.

The core carries extension values without reading them. A root run takes them from
`RunContext.extensions`, and from the `RunContext` fields a layer above bound to a key
(`bind_context_field`: the public fields that predate extensions stay, and the core treats
them as extensions). A child run inherits the values whose key is `inherited`, plus what the
step that starts it hands it (`run_child_pipeline(..., extensions=...)`). A step reads its
run's values with `extension_of(context, key)` and sets one with `set_extension`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from tubeless._usage import Usage

T = TypeVar("T")

Extensions = dict["RunExtension[Any]", Any]
"""The values one run carries, by key."""


class RunExtension(Generic[T]):
    """A typed key for a value a run carries; the package that owns the value owns the key.

    Keys compare by identity: two keys with one name are two slots.
    """

    __slots__ = ("_check", "inherited", "name")

    def __init__(
        self,
        name: str,
        *,
        inherited: bool = False,
        check: Callable[[object], None] | None = None,
    ) -> None:
        """Make a key.

        Args:
            name: what the value is, for messages and `repr`.
            inherited: whether child runs carry the parent run's value.
            check: raises `TypeError` for a value of the wrong type (given in a context).
        """
        self.name = name
        self.inherited = inherited
        self._check = check

    def __repr__(self) -> str:
        return f"RunExtension({self.name!r})"

    def check(self, value: object) -> None:
        """Raise `TypeError` when `value` cannot be this key's value."""
        if self._check is not None:
            self._check(value)


USAGE_METER: RunExtension[Callable[[], Usage]] = RunExtension("usage meter")
"""Reads the usage a run's report carries (`meter_usage`); read once, when it is made."""

CONTEXT_FIELD_KEYS: dict[str, RunExtension[Any]] = {}
"""`RunContext` fields a layer above bound to a key (fixed: one entry per such field)."""


def check_extensions(context: Any) -> None:
    """Check a context's bound fields, and its `extensions`: a mapping of `RunExtension`
    to values its key accepts.

    Raises:
        TypeError: for a value, mapping or key of the wrong type.
    """
    for field, key in CONTEXT_FIELD_KEYS.items():
        value = getattr(context, field)
        if value is not None:
            key.check(value)
    extensions = context.extensions
    if extensions is None:
        return
    if not isinstance(extensions, Mapping):
        raise TypeError("context extensions must be a mapping of RunExtension to value")
    for key, value in extensions.items():
        if not isinstance(key, RunExtension):
            raise TypeError("context extensions must be keyed by RunExtension objects")
        key.check(value)


def root_extensions(context: Any) -> Extensions:
    """The values a root run carries: its context's `extensions` and bound fields."""
    given = context.extensions
    out: Extensions = dict(given) if given else {}
    for field, key in CONTEXT_FIELD_KEYS.items():
        value = getattr(context, field)
        if value is not None:
            out[key] = value
    return out


def child_extensions(
    parent: Extensions, given: Mapping[RunExtension[Any], Any] | None
) -> Extensions:
    """The values a child run carries: the parent's inherited ones, then `given`."""
    out: Extensions = (
        {key: value for key, value in parent.items() if key.inherited} if parent else {}
    )
    if given:
        out.update(given)
    return out

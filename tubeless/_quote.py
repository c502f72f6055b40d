"""Quoting outside values in messages: a short, escaped prefix, never the whole value.

Model output, tool names, call ids, decision kinds and ids read from data may be
megabytes long, hold control characters, or be objects whose `repr` raises. Every
message that names such a value goes through `quote`, so it stays short and printable.
"""

from __future__ import annotations

import contextlib

__all__ = ["QUOTE_LIMIT", "quote", "quote_list", "type_name"]

QUOTE_LIMIT = 64
"""At most this many characters of an outside string appear in a message."""

_LISTED = 8
"""At most this many values are quoted by `quote_list`."""


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """Return a bounded, escaped rendering of `value` for a message.

    A string shows its first `limit` characters with `repr` escaping (quotes, control
    and non-printable characters, lone surrogates), then `…` and its real length when it
    is longer. `None`, booleans and small numbers show as `repr` does; anything else
    shows only as its type name, so no `repr` or `str` of an outside object ever runs.
    """
    if isinstance(value, str):
        # str's own methods: a subclass may override slicing, len or repr.
        length = str.__len__(value)
        text = repr(str.__getitem__(value, slice(0, limit)))
        return text if length <= limit else f"{text}… ({length} characters)"
    if value is None or type(value) in (bool, int, float):
        try:
            text = repr(value)
        except ValueError:  # an int with more digits than int->str allows
            text = ""
        if 0 < len(text) <= limit:
            return text
        # Only an int has a repr this long (or none at all).
        bits = value.bit_length() if isinstance(value, int) else len(text)
        return f"an int of {bits} bits"
    return f"a value of type {type_name(value)}"


def type_name(value: object) -> str:
    """Return the name of `value`'s type, bounded and escaped, without quotes."""
    name = type(value).__name__
    return repr(name[:QUOTE_LIMIT])[1:-1]


def quote_list(values: object, limit: int = QUOTE_LIMIT) -> str:
    """Return `quote` of the first few of `values` (sorted when they sort), comma-separated."""
    items = list(values)  # type: ignore[call-overload]
    with contextlib.suppress(Exception):  # unorderable keys stay in their given order
        items.sort()
    shown = ", ".join(quote(item, limit) for item in items[:_LISTED])
    hidden = len(items) - _LISTED
    return shown if hidden <= 0 else f"{shown} and {hidden} more"

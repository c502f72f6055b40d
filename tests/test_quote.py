"""Outside values appear in messages only as a short, escaped prefix."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tubeless._quote import QUOTE_LIMIT, quote, quote_list, type_name


class _Loud(str):
    """A string whose own methods lie, as a hostile subclass might."""

    def __repr__(self) -> str:
        return "x" * 10_000

    def __len__(self) -> int:
        return 0

    def __getitem__(self, index: Any) -> str:
        return "x" * 10_000


class _Raising:
    """An object whose repr and str raise."""

    def __repr__(self) -> str:
        raise RuntimeError("repr must not run")

    __str__ = __repr__


def test_a_short_string_is_its_repr() -> None:
    """A string within the limit is quoted as `repr` quotes it."""
    assert quote("echo") == "'echo'"


def test_a_long_string_shows_a_prefix_an_ellipsis_and_its_length() -> None:
    """A 2 MB string shows 64 characters, then `…` and the real length."""
    text = quote("a" * 2_000_000)

    assert text == repr("a" * QUOTE_LIMIT) + "… (2000000 characters)"


def test_control_characters_and_lone_surrogates_are_escaped() -> None:
    """Newlines, escapes, bidi controls and lone surrogates come out as escapes."""
    text = quote("a\nb\x1b[2J\u202e\ud800")

    assert text == "'a\\nb\\x1b[2J\\u202e\\ud800'"
    assert text.isprintable()
    text.encode("utf-8")


def test_a_string_subclass_is_read_with_str_methods() -> None:
    """A subclass's own `repr`, `len` and slicing never run."""
    assert quote(_Loud("kind")) == "'kind'"


def test_other_objects_show_only_their_type() -> None:
    """An object whose `repr` raises, or a deeply nested list, shows as its type name."""
    nested: list[Any] = []
    for _ in range(10_000):
        nested = [nested]

    assert quote(_Raising()) == "a value of type _Raising"
    assert quote(nested) == "a value of type list"
    assert type_name(_Raising()) == "_Raising"


def test_scalars_show_as_repr_unless_huge() -> None:
    """None, booleans and numbers read as themselves; a 5000-digit int does not."""
    assert [quote(None), quote(True), quote(7), quote(1.5)] == ["None", "True", "7", "1.5"]
    assert quote(10**5000) == f"an int of {(10**5000).bit_length()} bits"


def test_quote_list_sorts_and_caps_what_it_names() -> None:
    """At most eight values are named, sorted when they sort, and the rest counted."""
    assert quote_list(["b", "a"]) == "'a', 'b'"
    assert quote_list([str(i) for i in range(10)]).endswith("'7' and 2 more")
    assert quote_list([1, "a", None]) == "1, 'a', None"


@settings(max_examples=200, database=None)
@given(st.text(max_size=500))
def test_every_quote_is_short_printable_and_utf8(text: str) -> None:
    """Whatever the text, its quote is printable, encodable and bounded (escapes included)."""
    quoted = quote(text)

    assert quoted.isprintable()
    quoted.encode("utf-8")
    assert len(quoted) <= QUOTE_LIMIT * len("\\U0001f600") + 2 + len("… (500 characters)")


@pytest.mark.parametrize("value", [b"raw", {1, 2}, object(), len, 1j])
def test_non_text_values_never_show_their_content(value: object) -> None:
    """Bytes, sets, objects, functions and complex numbers show their type alone."""
    assert quote(value) == f"a value of type {type(value).__name__}"

"""Tests for plain JSON copies of schema documents (`tubeless/schema/_plain.py`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from tubeless.errors import SchemaDefinitionError
from tubeless.schema import json_schema
from tubeless.schema._plain import copy_json, json_pointer, plain_json_copy


def test_mappings_and_tuples_become_dicts_and_lists() -> None:
    """Read-only mappings and tuples are copied into dicts and lists."""
    source = MappingProxyType({"required": ("a", "b"), "properties": MappingProxyType({})})
    copied = plain_json_copy(source, "JSON Schema")
    assert copied == {"required": ["a", "b"], "properties": {}}
    assert type(copied) is dict
    assert type(copied["required"]) is list


def test_read_only_mapping_schema_compiles() -> None:
    """A JSON Schema given as a read-only mapping with tuples compiles and validates."""
    schema = json_schema(MappingProxyType({"type": "object", "required": ("a",)}))
    assert schema.validate({"a": 1}) == {"a": 1}


def test_non_string_key_is_rejected_with_its_place() -> None:
    """A key that is not a string fails, naming the place as a JSON pointer."""
    with pytest.raises(SchemaDefinitionError) as caught:
        json_schema({"properties": {1: {}}})
    assert str(caught.value) == "JSON Schema keys must be strings: found 1 at #/properties"


def test_non_json_value_is_rejected() -> None:
    """A value JSON has no form for (a set) fails, naming the place."""
    with pytest.raises(SchemaDefinitionError) as caught:
        json_schema({"enum": [{"a/b": {1, 2}}]})
    assert str(caught.value) == "JSON Schema must be plain JSON data: found set at #/enum/0/a~1b"


def test_cycle_is_rejected() -> None:
    """A schema that contains itself fails instead of recursing forever."""
    cyclic: dict[str, Any] = {"type": "object"}
    cyclic["properties"] = {"self": cyclic}
    with pytest.raises(SchemaDefinitionError, match="must not contain a cycle"):
        json_schema(cyclic)


def test_shared_subtree_is_not_a_cycle() -> None:
    """The same dict used twice in a schema is copied twice, not reported as a cycle."""
    shared = {"type": "string"}
    copied = plain_json_copy({"a": shared, "b": [shared]}, "JSON Schema")
    assert copied == {"a": {"type": "string"}, "b": [{"type": "string"}]}
    assert copied["a"] is not copied["b"][0]


def test_copy_json_is_deep() -> None:
    """`copy_json` copies every dict and list."""
    source = {"a": [{"b": 1}]}
    copied = copy_json(source)
    assert copied == source
    assert copied["a"] is not source["a"]
    assert copied["a"][0] is not source["a"][0]


def test_json_pointer_escapes() -> None:
    """JSON pointers escape `~` and `/` and show the root as `#`."""
    assert json_pointer([]) == "#"
    assert json_pointer(["a~b", "c/d", 0]) == "#/a~0b/c~1d/0"

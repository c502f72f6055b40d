"""Tests for JSON Schema compilation and validation (`tubeless/schema/_jsonschema.py`)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from tubeless.errors import Issue, SchemaDefinitionError, SchemaIssues
from tubeless.schema import json_schema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def issues_of(schema: Any, value: Any) -> tuple[Issue, ...]:
    with pytest.raises(SchemaIssues) as caught:
        schema.validate(value)
    return caught.value.issues


def test_valid_value_is_returned_unchanged() -> None:
    """A matching value comes back as the very same object."""
    value = {"name": "Ada", "age": 36, "tags": ["math"]}
    assert json_schema(PERSON).validate(value) is value


def test_vendor_is_jsonschema() -> None:
    """A compiled JSON Schema reports the vendor `jsonschema`."""
    assert json_schema(PERSON).vendor == "jsonschema"


def test_root_issue_has_exact_message_and_empty_path() -> None:
    """A wrong type at the root names the expected type and has an empty path."""
    assert issues_of(json_schema({"type": "string"}), 3) == (
        Issue(message="Expected string, got integer"),
    )


def test_nested_issues_are_all_reported_sorted_by_path_then_message() -> None:
    """Every issue is reported, root issues first, then by path with indexes as numbers."""
    value = {"age": -1, "tags": ["a", 1, "b", 2, *["c"] * 7, 3], "extra": True}
    assert issues_of(json_schema(PERSON), value) == (
        Issue(message="'name' is a required property"),
        Issue(message="Unexpected property 'extra'"),
        Issue(message="Expected at least 0", path=("age",)),
        Issue(message="Expected string, got integer", path=("tags", 1)),
        Issue(message="Expected string, got integer", path=("tags", 3)),
        Issue(message="Expected string, got integer", path=("tags", 11)),
    )


def test_deep_path_mixes_keys_and_indexes() -> None:
    """An issue deep inside lists and objects carries the full path from the root."""
    schema = json_schema(
        {"type": "array", "items": {"type": "object", "properties": {"x": {"const": 1}}}}
    )
    assert issues_of(schema, [{"x": 1}, {"x": 2}]) == (
        Issue(message="Expected the constant value", path=(1, "x")),
    )


def test_bool_is_not_an_integer() -> None:
    """`True` is rejected by an integer schema, as jsonschema decides."""
    assert issues_of(json_schema({"type": "integer"}), True) == (
        Issue(message="Expected integer, got boolean"),
    )


def test_bool_is_not_a_number() -> None:
    """`False` is rejected by a number schema."""
    assert issues_of(json_schema({"type": "number"}), False) == (
        Issue(message="Expected number, got boolean"),
    )


def test_tuple_counts_as_an_array() -> None:
    """A tuple (how frozen state holds sequences) validates as a JSON array."""
    value = ("a", "b")
    schema = json_schema({"type": "array", "items": {"type": "string"}})
    assert schema.validate(value) is value
    assert issues_of(schema, ("a", 2)) == (
        Issue(message="Expected string, got integer", path=(1,)),
    )


def test_none_is_validated_like_any_value() -> None:
    """`None` is a value: a null schema accepts it and a string schema rejects it."""
    assert json_schema({"type": "null"}).validate(None) is None
    assert issues_of(json_schema({"type": "string"}), None) == (
        Issue(message="Expected string, got null"),
    )


def test_local_ref_into_defs_resolves() -> None:
    """A `#/$defs/...` reference is followed when validating."""
    schema = json_schema(
        {
            "$defs": {"word": {"type": "string", "minLength": 1}},
            "type": "array",
            "items": {"$ref": "#/$defs/word"},
        }
    )
    assert schema.validate(["a"]) == ["a"]
    assert issues_of(schema, ["a", ""]) == (
        Issue(message="Expected at least 1 character", path=(1,)),
    )


def test_ref_resolves_through_user_registry() -> None:
    """A reference to a document with an `$id` resolves through the registry passed in."""
    word = DRAFT202012.create_resource(
        {"$id": "https://example.com/word.json", "type": "string", "pattern": "^[a-z]+$"}
    )
    registry: Registry[Any] = Registry().with_resource("https://example.com/word.json", word)
    schema = json_schema(
        {"type": "array", "items": {"$ref": "https://example.com/word.json"}}, registry=registry
    )
    assert schema.validate(["abc"]) == ["abc"]
    assert issues_of(schema, ["abc", "ABC"]) == (
        Issue(message="Expected to match pattern '^[a-z]+$'", path=(1,)),
    )


def test_ref_inside_registry_document_is_checked_too() -> None:
    """A broken reference inside a registry document fails when the schema is compiled."""
    word = DRAFT202012.create_resource(
        {"$id": "https://example.com/word.json", "$ref": "https://example.com/gone.json"}
    )
    registry: Registry[Any] = Registry().with_resource("https://example.com/word.json", word)
    with pytest.raises(SchemaDefinitionError, match=r"gone\.json"):
        json_schema({"$ref": "https://example.com/word.json"}, registry=registry)


def test_property_named_ref_is_not_a_reference() -> None:
    """A property called `$ref` is a name, not a reference, so compiling succeeds."""
    schema = json_schema({"properties": {"$ref": {"type": "string"}}})
    assert schema.validate({"$ref": "x"}) == {"$ref": "x"}


def test_unresolvable_ref_fails_at_definition_without_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown remote reference fails at definition time and opens no connection."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(SchemaDefinitionError) as caught:
        json_schema({"$ref": "https://example.com/missing.json"})
    assert str(caught.value) == (
        "JSON Schema has an unresolvable $ref 'https://example.com/missing.json': "
        "no document with that URI is registered "
        "(references are never retrieved: add the document to the registry)"
    )
    assert caught.value.code == "TUBELESS_SCHEMA_INVALID"
    assert attempts == []


def test_user_registry_retrieve_is_never_called() -> None:
    """A registry's own retrieve function is not used: only its stored documents count."""
    calls: list[str] = []

    def retrieve(uri: str) -> Any:
        calls.append(uri)
        return DRAFT202012.create_resource({"type": "string"})

    registry: Registry[Any] = Registry(retrieve=retrieve)  # type: ignore[call-arg]
    with pytest.raises(SchemaDefinitionError, match="unresolvable"):
        json_schema({"$ref": "https://example.com/lazy.json"}, registry=registry)
    assert calls == []


def test_missing_local_pointer_fails_at_definition() -> None:
    """A `#/$defs/...` pointer to nothing fails when compiling, naming the reference."""
    with pytest.raises(SchemaDefinitionError) as caught:
        json_schema({"items": {"$ref": "#/$defs/nothing"}})
    assert str(caught.value) == (
        "JSON Schema has an unresolvable $ref '#/$defs/nothing': "
        "the JSON pointer leads nowhere in the referenced document"
    )


def test_missing_anchor_fails_at_definition() -> None:
    """A reference to an anchor that no subschema declares fails when compiling."""
    with pytest.raises(SchemaDefinitionError, match="the anchor 'word' does not exist"):
        json_schema({"$ref": "#word"})


def test_anchor_and_embedded_id_resolve() -> None:
    """`$anchor` targets and subschemas with their own `$id` resolve like the validator does."""
    schema = json_schema(
        {
            "$id": "https://example.com/root.json",
            "properties": {"a": {"$ref": "#small"}, "b": {"$ref": "other.json"}},
            "$defs": {
                "small": {"$anchor": "small", "maximum": 3},
                "other": {"$id": "other.json", "type": "null"},
            },
        }
    )
    assert issues_of(schema, {"a": 4, "b": 0}) == (
        Issue(message="Expected at most 3", path=("a",)),
        Issue(message="Expected null, got integer", path=("b",)),
    )


def test_ref_to_the_metaschema_resolves() -> None:
    """The official 2020-12 metaschema can be referenced without registering it."""
    schema = json_schema({"$ref": "https://json-schema.org/draft/2020-12/schema"})
    assert schema.validate({"type": "string"}) == {"type": "string"}
    assert issues_of(schema, {"type": 3})[0].path == ("type",)


def test_invalid_schema_fails_check_schema() -> None:
    """A schema breaking the 2020-12 metaschema fails at definition time, naming where."""
    with pytest.raises(SchemaDefinitionError) as caught:
        json_schema({"properties": {"a": {"type": "strin"}}})
    assert str(caught.value) == (
        "JSON Schema is invalid at #/properties/a/type: "
        "'strin' is not valid under any of the given schemas"
    )


def test_other_draft_is_rejected() -> None:
    """A `$schema` naming another draft is rejected rather than validated with other rules."""
    with pytest.raises(SchemaDefinitionError, match="must use draft 2020-12"):
        json_schema({"$schema": "http://json-schema.org/draft-07/schema#"})


def test_explicit_2020_12_dialect_is_accepted() -> None:
    """`$schema` naming draft 2020-12 (with or without `#`) is accepted."""
    for dialect in (
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    ):
        assert json_schema({"$schema": dialect}).validate(1) == 1


def test_non_dict_is_rejected() -> None:
    """Something other than a mapping is not a JSON Schema."""
    with pytest.raises(SchemaDefinitionError, match="must be a JSON Schema dict"):
        json_schema(["type", "string"])  # type: ignore[arg-type]


def test_non_registry_is_rejected() -> None:
    """A registry that is not a `referencing.Registry` fails at definition time."""
    with pytest.raises(SchemaDefinitionError, match=r"referencing\.Registry"):
        json_schema({}, registry={"https://example.com/a": {}})  # type: ignore[arg-type]


def test_later_mutation_of_the_callers_dict_has_no_effect() -> None:
    """The schema is copied at definition time, so changing the caller's dict changes nothing."""
    source: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    schema = json_schema(source)
    source["properties"]["n"]["type"] = "string"
    source["required"] = ["n"]
    assert schema.validate({}) == {}
    assert issues_of(schema, {"n": "x"}) == (
        Issue(message="Expected integer, got string", path=("n",)),
    )
    assert schema.json_schema() == {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_json_schema_returns_a_fresh_copy_each_call() -> None:
    """`json_schema()` returns an equal, independent copy every time."""
    schema = json_schema(PERSON)
    first = schema.json_schema()
    assert first is not None
    first["properties"]["name"]["type"] = "integer"
    second = schema.json_schema()
    assert second == PERSON
    assert second is not first


def test_one_schema_validates_from_many_threads() -> None:
    """One compiled schema gives the same answers when threads validate at the same time."""
    schema = json_schema(PERSON)
    workers = 8
    barrier = threading.Barrier(workers)
    results: list[list[object]] = [[] for _ in range(workers)]

    def work(index: int) -> None:
        barrier.wait()
        for round_ in range(200):
            good = {"name": f"n{index}-{round_}", "age": round_}
            results[index].append(schema.validate(good) is good)
            try:
                schema.validate({"name": index, "age": -round_ - 1})
            except SchemaIssues as error:
                results[index].append([issue.path for issue in error.issues])

    threads = [threading.Thread(target=work, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [True, [("age",), ("name",)]] * 200
    assert results == [expected] * workers

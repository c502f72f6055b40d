"""Schemas compiled to closures agree with `jsonschema`; first errors never quote values."""

from __future__ import annotations

import math

import pytest

from tubeless.errors import SchemaDefinitionError, SchemaIssues
from tubeless.schema import json_schema
from tubeless.schema._compiled import compile_acceptor, compile_checker, is_json_number


def test_json_numbers_are_finite_non_bool_numbers() -> None:
    """`True`, NaN and infinities are not JSON numbers; ints and finite floats are."""
    assert is_json_number(0) and is_json_number(-2.5)
    assert not is_json_number(True)
    assert not any(is_json_number(value) for value in (math.nan, math.inf, "1", None))


def test_integers_accept_integral_floats_only() -> None:
    """`integer` accepts `3` and `3.0` but not `3.5`, `True` or infinity."""
    checker = compile_checker({"type": "integer", "minimum": 1})
    assert checker.is_valid(3) and checker.is_valid(3.0)
    assert not any(checker.is_valid(value) for value in (3.5, True, math.inf, 0))


def test_enum_tells_booleans_from_numbers() -> None:
    """An enum of numbers rejects booleans equal to them, and the reverse."""
    assert not compile_checker({"enum": [1, 2]}).is_valid(True)
    assert not compile_checker({"const": False}).is_valid(0)
    assert compile_checker({"enum": [1, "a", None]}).is_valid(1.0)


def test_type_lists_and_untyped_keywords() -> None:
    """A type list accepts any member; keywords for another type are ignored."""
    checker = compile_checker({"type": ["null", "string"], "minLength": 2, "maximum": 1})
    assert checker.is_valid(None) and checker.is_valid("ab")
    assert not checker.is_valid("a") and not checker.is_valid(5)
    untyped = compile_checker({"minLength": 2, "required": ["a"], "maxItems": 0})
    assert untyped.is_valid(7) and untyped.is_valid({"a": 1}) and untyped.is_valid([])
    assert not untyped.is_valid("a") and not untyped.is_valid({}) and not untyped.is_valid([1])


def test_recursive_references_are_followed() -> None:
    """A schema that refers to itself validates nested values to any depth."""
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/node"}, "n": {"type": "integer"}},
            }
        },
        "$ref": "#/$defs/node",
    }
    checker = compile_checker(tree)
    assert checker.is_valid({"child": {"child": {"n": 1}}})
    assert not checker.is_valid({"child": {"child": {"n": "x"}}})
    error = checker.first_error({"child": {"child": {"n": "x"}}})
    assert error is not None and error.path == "$.child.child.n"


def test_combinators_and_conditionals() -> None:
    """`anyOf`, `oneOf`, `not` and `if`/`then`/`else` behave as the specification says."""
    assert compile_checker({"anyOf": [{"type": "string"}, {"minimum": 5}]}).is_valid(6)
    one_of = compile_checker({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    assert one_of.is_valid(1.5) and not one_of.is_valid(1)
    assert not compile_checker({"not": {"type": "string"}}).is_valid("a")
    conditional = compile_checker(
        {"if": {"minimum": 10}, "then": {"maximum": 20}, "else": {"maximum": 3}}
    )
    assert conditional.is_valid(15) and conditional.is_valid(2)
    assert not conditional.is_valid(25) and not conditional.is_valid(4)


def test_unsupported_keywords_fall_back_to_jsonschema() -> None:
    """A keyword the closures lack is still enforced, by `jsonschema`."""
    checker = compile_checker({"type": "object", "patternProperties": {"^x": {"type": "string"}}})
    assert checker.is_valid({"xa": "s"})
    assert not checker.is_valid({"xa": 1})


def test_references_outside_the_document_are_refused() -> None:
    """A `$ref` to another document, a dangling pointer or a bad pattern fails at compile time."""
    with pytest.raises(SchemaDefinitionError):
        compile_checker({"$ref": "https://example.com/schema.json"})
    with pytest.raises(SchemaDefinitionError):
        compile_checker({"$defs": {}}, "/$defs/missing")
    with pytest.raises(SchemaDefinitionError, match="pattern"):
        compile_checker({"type": "string", "pattern": "("})


def test_first_error_names_path_and_problem() -> None:
    """`first_error` gives a JSON path and a message naming the limit; `None` when valid."""
    checker = compile_checker(
        {"type": "object", "properties": {"items": {"type": "array", "maxItems": 1}}}
    )
    assert checker.first_error({"items": [1]}) is None
    error = checker.first_error({"items": [1, 2]})
    assert error is not None
    assert error.path == "$.items"
    assert error.message == "Expected at most 1 item"


_ACCEPTOR_SCHEMAS = (
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    {"type": "array", "items": {"type": "number", "exclusiveMaximum": 3}, "maxItems": 2},
    {"anyOf": [{"type": "string", "pattern": "^a"}, {"enum": [1, [1, 2], None]}]},
    {"type": ["null", "object"], "additionalProperties": {"type": "string", "maxLength": 1}},
    {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
    {"const": {"a": [True]}},
)
_ACCEPTOR_VALUES = (
    {"x": 1},
    {"x": 1.0},
    {"x": True},
    {"x": "1"},
    {},
    [1, 2.5],
    (1, 2),
    [math.nan],
    [1, 2, 3],
    "ab",
    "ba",
    1,
    [1, 2],
    None,
    {"a": "b"},
    {"a": "bc"},
    {"n": 2},
    {"a": [True]},
    {"a": [1]},
    {"a": (True,)},
)


@pytest.mark.parametrize("schema", _ACCEPTOR_SCHEMAS)
def test_acceptor_never_accepts_what_jsonschema_refuses(schema: dict[str, object]) -> None:
    """Whatever the compiled acceptor passes, the `jsonschema` validator passes too."""
    accept = compile_acceptor(schema)
    assert accept is not None
    validator = json_schema(schema).validator  # type: ignore[attr-defined]
    for value in _ACCEPTOR_VALUES:
        if accept(value):
            assert validator.is_valid(value), (schema, value)
    assert any(accept(value) for value in _ACCEPTOR_VALUES)


@pytest.mark.parametrize(
    "schema",
    [
        {"not": {"type": "array"}},
        {"properties": {"a": {"oneOf": [{"type": "integer"}, {"type": "array"}]}}},
        {"items": {"if": {"type": "array"}, "then": False}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"$ref": "https://example.com/schema.json"},
    ],
)
def test_acceptor_declines_negations_and_what_it_cannot_compile(
    schema: dict[str, object],
) -> None:
    """Negating keywords could turn a stricter closure into a laxer one: no acceptor."""
    assert compile_acceptor(schema) is None


def test_json_schema_results_are_jsonschemas_whatever_the_acceptor_says() -> None:
    """Values the closures refuse but `jsonschema` accepts (a tuple, NaN) still pass."""
    schema = json_schema({"type": "array", "items": {"type": "number"}})
    assert schema.validate((1, 2)) == (1, 2)
    nan = schema.validate([math.nan])
    assert math.isnan(nan[0])
    negated = json_schema({"not": {"type": "array"}})
    with pytest.raises(SchemaIssues):
        negated.validate((1,))

"""Value-free wording of JSON Schema errors (`tubeless/schema/_messages.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tubeless.errors import SchemaIssues
from tubeless.schema import json_schema
from tubeless.schema._compiled import compile_checker
from tubeless.schema._messages import error_messages

SECRET = "s3cret-7f3a9c-do-not-log"
SECRET_NUMBER = 918273645
"""Not a multiple of 7, and far from every bound used below."""

# One case per keyword (and keyword variant) that can reject a value.
SECRET_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "integer"}, SECRET),
    ({"type": ["integer", "null"]}, [SECRET]),
    ({"type": "object", "required": ["question"]}, {"answer": SECRET}),
    ({"additionalProperties": False}, {"extra": SECRET}),
    ({"patternProperties": {"^x": {}}, "additionalProperties": False}, {"y": SECRET}),
    ({"additionalProperties": {"type": "integer"}}, {"extra": SECRET}),
    ({"enum": ["a", "b"]}, SECRET),
    ({"enum": [{"k": 1}, [1, 2], None]}, {"k": SECRET}),
    ({"const": "a"}, SECRET),
    ({"const": {"k": "a"}}, {"k": SECRET}),
    ({"minimum": 10**12}, SECRET_NUMBER),
    ({"maximum": 3}, SECRET_NUMBER),
    ({"exclusiveMinimum": 10**12}, SECRET_NUMBER),
    ({"exclusiveMaximum": 3}, SECRET_NUMBER),
    ({"multipleOf": 7}, SECRET_NUMBER),
    ({"minLength": 100}, SECRET),
    ({"maxLength": 3}, SECRET),
    ({"pattern": "^x"}, SECRET),
    ({"format": "email"}, SECRET),
    ({"minItems": 5}, [SECRET]),
    ({"maxItems": 0}, [SECRET]),
    ({"prefixItems": [{"type": "string"}], "items": False}, [SECRET, SECRET]),
    ({"uniqueItems": True}, [SECRET, SECRET]),
    ({"minProperties": 3}, {"a": SECRET}),
    ({"maxProperties": 0}, {"a": SECRET}),
    ({"contains": {"const": "x"}}, [SECRET]),
    ({"contains": {"type": "string"}, "minContains": 2}, [SECRET]),
    ({"contains": {"type": "string"}, "maxContains": 1}, [SECRET, SECRET]),
    ({"dependentRequired": {"a": ["b"]}}, {"a": SECRET}),
    ({"propertyNames": {"maxLength": 3}}, {SECRET: 1}),
    ({"propertyNames": {"pattern": "^x"}}, {SECRET: 1}),
    ({"not": {"type": "string"}}, SECRET),
    ({"oneOf": [{"type": "string"}, {"minLength": 1}]}, SECRET),
    ({"oneOf": [{"type": "integer"}, {"type": "null"}]}, SECRET),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, SECRET),
    ({"allOf": [{"type": "integer"}]}, SECRET),
    ({"properties": {"a": False}}, {"a": SECRET}),
    (
        {"prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
        [SECRET_NUMBER, SECRET],
    ),
    ({"unevaluatedProperties": False}, {"x": SECRET}),
    ({"unevaluatedProperties": {"type": "integer"}}, {"x": SECRET}),
    ({"if": {"type": "string"}, "then": {"maxLength": 1}}, SECRET),
    ({"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}, [SECRET]),
]


def _all_errors(errors: Iterator[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        yield error
        yield from _all_errors(iter(error.context))


def _leaks(message: str) -> bool:
    return SECRET in message or str(SECRET_NUMBER) in message


@pytest.mark.parametrize(("schema", "value"), SECRET_CASES)
def test_no_message_quotes_the_rejected_value(schema: dict[str, Any], value: Any) -> None:
    """Issues, raw errors (sub-errors and formats too) and first errors never hold the value."""
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    raw = [m for e in _all_errors(validator.iter_errors(value)) for m in error_messages(e)]
    assert raw, "the case must be rejected"
    assert not [message for message in raw if _leaks(message)]
    violation = compile_checker(schema).first_error(value)
    assert violation is None or not _leaks(violation.message)
    if "format" in schema:
        return  # formats are annotations at tubeless boundaries
    with pytest.raises(SchemaIssues) as caught:
        json_schema(schema).validate(value)
    assert caught.value.issues
    assert not [issue.message for issue in caught.value.issues if _leaks(issue.message)]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "string"}, 3, ["Expected string, got integer"]),
        ({"type": ["integer", "null"]}, "x", ["Expected integer or null, got string"]),
        (
            {"type": ["integer", "null", "array"]},
            "x",
            ["Expected integer, null or array, got string"],
        ),
        (
            {"required": ["question", "topic", "id"]},
            {"id": 1},
            ["'question' is a required property", "'topic' is a required property"],
        ),
        ({"additionalProperties": False}, {"extra": 1}, ["Unexpected property 'extra'"]),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "b": 2, "c": 3},
            ["Unexpected properties 'b', 'c'"],
        ),
        ({"enum": ["a", "b"]}, "c", ["Expected one of: 'a', 'b'"]),
        ({"enum": list(range(11))}, 99, ["Expected one of: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, …"]),
        ({"const": "a"}, "b", ["Expected the constant value"]),
        ({"minimum": 3}, 1, ["Expected at least 3"]),
        ({"maximum": 2.5}, 3, ["Expected at most 2.5"]),
        ({"exclusiveMinimum": 3}, 3, ["Expected more than 3"]),
        ({"exclusiveMaximum": 3}, 3, ["Expected less than 3"]),
        ({"multipleOf": 4}, 3, ["Expected a multiple of 4"]),
        ({"minLength": 1}, "", ["Expected at least 1 character"]),
        ({"maxLength": 2}, "abc", ["Expected at most 2 characters"]),
        ({"pattern": "^x"}, "abc", ["Expected to match pattern '^x'"]),
        ({"minItems": 2}, [1], ["Expected at least 2 items"]),
        ({"maxItems": 1}, [1, 2], ["Expected at most 1 item"]),
        ({"prefixItems": [{}], "items": False}, [1, 2], ["Expected at most 1 item"]),
        ({"uniqueItems": True}, [1, 1], ["Expected unique items"]),
        ({"minProperties": 2}, {"a": 1}, ["Expected at least 2 properties"]),
        ({"maxProperties": 1}, {"a": 1, "b": 2}, ["Expected at most 1 property"]),
        (
            {"contains": {"type": "string"}},
            [1],
            ["Expected at least one item matching the 'contains' schema"],
        ),
        (
            {"contains": {"type": "string"}, "minContains": 2},
            ["a"],
            ["Expected at least 2 items matching the 'contains' schema"],
        ),
        (
            {"dependentRequired": {"card": ["address", "name"]}},
            {"card": 1, "name": "x"},
            ["'address' is required when 'card' is present"],
        ),
        (
            {"propertyNames": {"pattern": "^x"}},
            {"xa": 1, "b": 2},
            ["Invalid property name: expected to match pattern '^x'"],
        ),
        ({"not": {"type": "string"}}, "a", ["Must not match the given schema"]),
        (
            {"oneOf": [{"type": "string"}, {"minLength": 1}]},
            "a",
            ["Must match exactly one of the given schemas"],
        ),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}]},
            1,
            ["Must match at least one of the given schemas"],
        ),
        (False, 1, ["No value is allowed here"]),
        ({"unevaluatedProperties": False}, {"a": 1}, ["Unevaluated properties are not allowed"]),
        ({"unevaluatedItems": False}, [1], ["Unevaluated items are not allowed"]),
    ],
)
def test_each_keyword_has_its_wording(schema: Any, value: Any, expected: list[str]) -> None:
    """Each keyword's message names the schema's requirement in a fixed sentence."""
    validator = Draft202012Validator(schema)
    messages = {m for error in validator.iter_errors(value) for m in error_messages(error)}
    assert sorted(messages) == sorted(expected)


def test_format_names_the_format() -> None:
    """A `format` error names the expected format."""
    validator = Draft202012Validator(
        {"format": "email"}, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    (error,) = validator.iter_errors("not an address")
    assert error_messages(error) == ("Expected format 'email'",)


def test_an_unknown_keyword_is_named() -> None:
    """A keyword without a wording is named, and the error's own message is never used."""
    error = ValidationError(
        f"{SECRET!r} is not shiny", validator="shiny", validator_value=True, instance=SECRET
    )
    assert error_messages(error) == ("Does not satisfy 'shiny'",)


def test_required_issues_are_not_repeated() -> None:
    """Several missing properties give one issue each at a boundary, in order."""
    schema = json_schema({"type": "object", "required": ["b", "a"]})
    with pytest.raises(SchemaIssues) as caught:
        schema.validate({})
    assert [issue.message for issue in caught.value.issues] == [
        "'a' is a required property",
        "'b' is a required property",
    ]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (SECRET, "string"),
        (SECRET_NUMBER, "integer"),
        (1.5, "number"),
        (True, "boolean"),
        (None, "null"),
        ({SECRET: SECRET}, "object"),
        ([SECRET], "array"),
    ],
)
def test_a_wrong_type_names_what_it_got_by_json_type_only(value: Any, got: str) -> None:
    """`Expected X, got Y` names the JSON type that came, never the value itself."""
    schema = {"type": "boolean"} if got != "boolean" else {"type": "string"}
    [error] = Draft202012Validator(schema).iter_errors(value)
    [message] = error_messages(error)
    assert message.endswith(f", got {got}")
    assert SECRET not in message and str(SECRET_NUMBER) not in message


def test_a_value_of_no_json_type_shows_a_bounded_escaped_type_name() -> None:
    """An object that is no JSON value shows only its type's name, cut and escaped."""
    odd = type("Odd\n" + "x" * 500, (), {})()
    [error] = Draft202012Validator({"type": "string"}).iter_errors(odd)
    [message] = error_messages(error)
    assert message.startswith("Expected string, got Odd\\n")
    assert len(message) < 100 and "\n" not in message

"""Tests for `Schema` and `validate_boundary` (`tubeless/schema/_base.py`)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tubeless.errors import Issue, SchemaIssues, SchemaValidationError
from tubeless.schema import Schema, as_schema, json_schema, validate_boundary, validator


def test_success_returns_the_transformed_value() -> None:
    """A value that passes comes back as the schema returned it."""
    schema = validator(lambda value: {"answer": value})
    assert validate_boundary(schema, "hi", "Agent finish result") == {"answer": "hi"}


def test_issues_become_a_validation_error_with_rendered_message() -> None:
    """Issues are rendered `path: message`, joined with `; `, and kept on the error."""
    schema = json_schema(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["word"]}
    )
    with pytest.raises(SchemaValidationError) as caught:
        validate_boundary(schema, {"n": "1"}, "Agent tool count input")
    error = caught.value
    assert str(error) == (
        "Agent tool count input validation failed: "
        "'word' is a required property; n: Expected integer, got string"
    )
    assert error.boundary == "Agent tool count input"
    assert error.issues == (
        Issue(message="'word' is a required property"),
        Issue(message="Expected integer, got string", path=("n",)),
    )
    assert error.__cause__ is None


def test_pydantic_issues_reach_the_boundary_error() -> None:
    """A pydantic model's issues are rendered with dotted paths at the boundary."""

    class Pair(pydantic.BaseModel):
        items: list[int]

    with pytest.raises(SchemaValidationError) as caught:
        validate_boundary(as_schema(Pair, label="x"), {"items": [1, "b"]}, "Step output")
    assert str(caught.value) == (
        "Step output validation failed: items.1: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


def test_validator_that_raises_threw_while_validating() -> None:
    """A validator raising anything but issues gives the "threw" message and keeps the cause."""
    failure = ZeroDivisionError("division by zero")

    def broken(value: Any) -> Any:
        raise failure

    schema = validator(broken, vendor="arith")
    with pytest.raises(SchemaValidationError) as caught:
        validate_boundary(schema, 1, "Agent finish result")
    error = caught.value
    assert str(error) == "Agent finish result schema (arith) threw while validating"
    assert error.issues == ()
    assert error.boundary == "Agent finish result"
    assert error.__cause__ is failure


def test_nested_validation_error_counts_as_threw() -> None:
    """A `SchemaValidationError` raised inside a validator is a failure, not issues."""
    inner = SchemaValidationError("inner failed", boundary="inner")

    def nested(value: Any) -> Any:
        raise inner

    with pytest.raises(SchemaValidationError) as caught:
        validate_boundary(validator(nested), 1, "Options")
    assert str(caught.value) == "Options schema (custom) threw while validating"
    assert caught.value.__cause__ is inner


def test_protocol_object_vendor_appears_when_it_throws() -> None:
    """The vendor named in the "threw" message is the protocol object's own."""

    class Strict:
        vendor = "strict-lib"

        def validate(self, value: Any) -> Any:
            raise KeyError(value)

    with pytest.raises(SchemaValidationError, match=r"^Options schema \(strict-lib\) threw"):
        validate_boundary(as_schema(Strict(), label="Options"), 1, "Options")


def test_schema_subclass_is_a_schema() -> None:
    """A user subclass of `Schema` works at a boundary and passes through `as_schema`."""

    class Even(Schema):
        vendor = "even"

        def validate(self, value: Any) -> Any:
            if value % 2:
                raise SchemaIssues([{"message": "odd", "path": ["n"]}])
            return value

        def json_schema(self) -> dict[str, Any] | None:
            return None

    even = Even()
    assert as_schema(even, label="x") is even
    assert validate_boundary(even, 2, "Options") == 2
    with pytest.raises(SchemaValidationError, match=r"^Options validation failed: n: odd$"):
        validate_boundary(even, 3, "Options")


def test_schema_cannot_be_instantiated_without_methods() -> None:
    """`Schema` is abstract: a subclass must implement `validate` and `json_schema`."""

    class Half(Schema):
        def validate(self, value: Any) -> Any:
            return value

    with pytest.raises(TypeError):
        Half()  # type: ignore[abstract]

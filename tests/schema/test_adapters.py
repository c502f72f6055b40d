"""Tests for `as_schema` and `validator` (`tubeless/schema/_adapters.py`)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tubeless.errors import Issue, SchemaDefinitionError, SchemaIssues
from tubeless.schema import Schema, as_schema, json_schema, validator

REJECTION = (
    "Tool input requires a schema: a JSON Schema dict, a pydantic model or TypeAdapter, "
    "or an object with validate()"
)


class Point(pydantic.BaseModel):
    x: int
    y: int = 0
    labels: list[str] = []


class Answer:
    """A protocol object: strings become `{"answer": text}`."""

    vendor = "scripted"

    def validate(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise SchemaIssues(["Expected text"])
        return {"answer": value}

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string"}


def issues_of(schema: Schema, value: Any) -> tuple[Issue, ...]:
    with pytest.raises(SchemaIssues) as caught:
        schema.validate(value)
    return caught.value.issues


def test_schema_instance_is_returned_unchanged() -> None:
    """A compiled `Schema` passes through `as_schema` as the same object."""
    schema = json_schema({"type": "string"})
    assert as_schema(schema, label="Tool input") is schema


def test_dict_becomes_a_json_schema() -> None:
    """A dict is compiled as JSON Schema."""
    schema = as_schema({"type": "string"}, label="Tool input")
    assert schema.vendor == "jsonschema"
    assert issues_of(schema, 1) == (Issue(message="Expected string, got integer"),)


def test_invalid_dict_message_names_the_label() -> None:
    """An invalid JSON Schema dict fails with the label in the message."""
    with pytest.raises(SchemaDefinitionError) as caught:
        as_schema({"type": 5}, label="Agent result")
    assert str(caught.value) == (
        "Agent result JSON Schema is invalid at #/type: "
        "5 is not valid under any of the given schemas"
    )


def test_pydantic_model_transforms_to_a_model_instance() -> None:
    """A model class validates by returning a model instance, coercing as pydantic does."""
    schema = as_schema(Point, label="Tool input")
    point = schema.validate({"x": "3"})
    assert point == Point(x=3)
    assert schema.vendor == "pydantic"


def test_pydantic_model_issues_carry_paths() -> None:
    """A pydantic validation error becomes issues with `loc` as path and `msg` as message."""
    schema = as_schema(Point, label="Tool input")
    assert issues_of(schema, {"x": "a", "labels": ["ok", 7]}) == (
        Issue(
            message="Input should be a valid integer, unable to parse string as an integer",
            path=("x",),
        ),
        Issue(message="Input should be a valid string", path=("labels", 1)),
    )


def test_pydantic_model_json_schema_is_the_validation_schema() -> None:
    """A model's JSON Schema is pydantic's validation-mode schema, copied per call."""
    schema = as_schema(Point, label="Tool input")
    described = schema.json_schema()
    assert described == Point.model_json_schema(mode="validation")
    assert described is not None
    described["title"] = "changed"
    assert schema.json_schema() == Point.model_json_schema(mode="validation")


def test_pydantic_model_other_exceptions_propagate() -> None:
    """An exception that is not a pydantic ValidationError escapes `validate` as is."""

    class Exploding(pydantic.BaseModel):
        @pydantic.model_validator(mode="before")
        @classmethod
        def explode(cls, data: Any) -> Any:
            raise LookupError("broken validator")

    with pytest.raises(LookupError, match="broken validator"):
        as_schema(Exploding, label="Tool input").validate({})


def test_pydantic_model_without_json_schema_still_validates() -> None:
    """A model whose fields have no JSON Schema still validates and describes itself as None."""

    class Opaque:
        pass

    class Holder(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        thing: Opaque

    schema = as_schema(Holder, label="Step output")
    assert schema.json_schema() is None
    thing = Opaque()
    assert schema.validate({"thing": thing}).thing is thing


def test_pydantic_model_instance_is_rejected() -> None:
    """Passing a model instance instead of the class fails with a hint."""
    with pytest.raises(SchemaDefinitionError, match="pass the pydantic model class"):
        as_schema(Point(x=1), label="Tool input")


def test_type_adapter_validates_and_describes() -> None:
    """A TypeAdapter validates with `validate_python` and describes its input."""
    schema = as_schema(pydantic.TypeAdapter(list[int]), label="Tool input")
    assert schema.validate(["1", 2]) == [1, 2]
    assert issues_of(schema, [1, "x"]) == (
        Issue(
            message="Input should be a valid integer, unable to parse string as an integer",
            path=(1,),
        ),
    )
    assert schema.json_schema() == {"type": "array", "items": {"type": "integer"}}


def test_protocol_object_transforms_and_reports_issues() -> None:
    """An object with `validate` returns its transformed value and raises its own issues."""
    schema = as_schema(Answer(), label="Agent result")
    assert schema.validate("hi") == {"answer": "hi"}
    assert issues_of(schema, 3) == (Issue(message="Expected text"),)
    assert schema.vendor == "scripted"
    assert schema.json_schema() == {"type": "string"}


def test_protocol_object_json_schema_is_called_once() -> None:
    """`json_schema()` of a protocol object runs once, at definition time."""
    calls: list[int] = []

    class Counting:
        def validate(self, value: Any) -> Any:
            return value

        def json_schema(self) -> dict[str, Any]:
            calls.append(1)
            return {"type": "object"}

    schema = as_schema(Counting(), label="Tool input")
    schema.json_schema()
    schema.json_schema()
    assert calls == [1]
    assert schema.vendor == "custom"


def test_protocol_object_without_json_schema_describes_none() -> None:
    """An object with only `validate` has no JSON Schema."""

    class Bare:
        def validate(self, value: Any) -> Any:
            return value

    assert as_schema(Bare(), label="Tool input").json_schema() is None


def test_protocol_json_schema_must_return_a_dict() -> None:
    """A `json_schema()` returning something other than a dict fails at definition time."""

    class Wrong:
        def validate(self, value: Any) -> Any:
            return value

        def json_schema(self) -> Any:
            return "string"

    with pytest.raises(SchemaDefinitionError) as caught:
        as_schema(Wrong(), label="Tool input")
    assert str(caught.value) == "Tool input json_schema() must return a JSON Schema dict"


def test_protocol_json_schema_is_checked() -> None:
    """A `json_schema()` returning an invalid JSON Schema fails at definition time."""

    class Invalid:
        def validate(self, value: Any) -> Any:
            return value

        def json_schema(self) -> dict[str, Any]:
            return {"minimum": "zero"}

    with pytest.raises(SchemaDefinitionError) as caught:
        as_schema(Invalid(), label="Tool input")
    assert str(caught.value) == (
        "Tool input json_schema() is invalid at #/minimum: 'zero' is not of type 'number'"
    )


def test_protocol_json_schema_that_raises_fails_the_definition() -> None:
    """A `json_schema()` that raises fails at definition time with the error as cause."""

    class Raising:
        def validate(self, value: Any) -> Any:
            return value

        def json_schema(self) -> dict[str, Any]:
            raise RuntimeError("no schema today")

    with pytest.raises(SchemaDefinitionError, match="no schema today") as caught:
        as_schema(Raising(), label="Tool input")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_protocol_json_schema_attribute_must_be_callable() -> None:
    """A `json_schema` attribute that is not a method is rejected rather than ignored."""

    class Attribute:
        json_schema = {"type": "string"}  # noqa: RUF012

        def validate(self, value: Any) -> Any:
            return value

    with pytest.raises(SchemaDefinitionError, match="json_schema must be a method"):
        as_schema(Attribute(), label="Tool input")


@pytest.mark.parametrize("value", [3, None, len, lambda value: value, "string", True])
def test_non_schemas_are_rejected_with_the_label(value: object) -> None:
    """Ints, None, functions, strings and bools are not schemas; the message names the label."""
    with pytest.raises(SchemaDefinitionError) as caught:
        as_schema(value, label="Tool input")
    assert str(caught.value) == REJECTION


def test_validator_helper_transforms() -> None:
    """`validator()` wraps a function whose return value is the transformed value."""

    def answer(value: Any) -> Any:
        if not isinstance(value, str):
            raise SchemaIssues([Issue(message="Expected text")])
        return {"answer": value}

    schema = validator(answer, json_schema={"type": "string"})
    assert schema.validate("done") == {"answer": "done"}
    assert issues_of(schema, None) == (Issue(message="Expected text"),)
    assert schema.vendor == "custom"
    assert schema.json_schema() == {"type": "string"}


def test_validator_helper_copies_its_json_schema_once() -> None:
    """The JSON Schema given to `validator()` is copied, so later changes have no effect."""
    source: dict[str, Any] = {"type": "string"}
    schema = validator(lambda value: value, json_schema=source, vendor="mine")
    source["type"] = "integer"
    described = schema.json_schema()
    assert described == {"type": "string"}
    assert described is not schema.json_schema()
    assert schema.vendor == "mine"


def test_validator_helper_checks_its_arguments() -> None:
    """`validator()` rejects a non-callable, a blank vendor and an invalid JSON Schema."""
    with pytest.raises(SchemaDefinitionError, match="callable"):
        validator("nope")  # type: ignore[arg-type]
    with pytest.raises(SchemaDefinitionError, match="vendor"):
        validator(lambda value: value, vendor=" ")
    with pytest.raises(SchemaDefinitionError, match="invalid at #/type"):
        validator(lambda value: value, json_schema={"type": "text"})


def test_validator_helper_without_json_schema_describes_none() -> None:
    """A `validator()` without a JSON Schema describes itself as None."""
    assert validator(lambda value: value).json_schema() is None


def test_compiled_schemas_are_immutable() -> None:
    """Compiled schemas refuse attribute assignment."""
    for schema in (
        as_schema({"type": "string"}, label="x"),
        as_schema(Point, label="x"),
        validator(lambda value: value),
    ):
        with pytest.raises(AttributeError):
            schema.vendor = "other"  # type: ignore[misc]

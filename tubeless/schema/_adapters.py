"""Turning what users give as a schema (dict, pydantic, protocol object) into a `Schema`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, cast

from tubeless.errors import Issue, SchemaDefinitionError, SchemaIssues
from tubeless.schema._base import Schema
from tubeless.schema._jsonschema import checked_json_schema, compile_json_schema
from tubeless.schema._plain import copy_json


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _CallableSchema(Schema):
    """A schema made of a validate callable and an optional, already checked JSON Schema."""

    function: Callable[[Any], Any]
    document: dict[str, Any] | None = dataclasses.field(repr=False)
    vendor: str = "custom"

    def validate(self, value: Any) -> Any:
        return self.function(value)

    def json_schema(self) -> dict[str, Any] | None:
        return None if self.document is None else cast("dict[str, Any]", copy_json(self.document))


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _PydanticSchema(Schema):
    """A pydantic model or TypeAdapter; its `ValidationError` becomes `SchemaIssues`."""

    function: Callable[[Any], Any]
    document: dict[str, Any] | None = dataclasses.field(repr=False)
    vendor: str = dataclasses.field(default="pydantic", init=False)

    def validate(self, value: Any) -> Any:
        try:
            return self.function(value)
        except Exception as error:
            if not _is_pydantic_validation_error(error):
                raise
            raise SchemaIssues(_pydantic_issues(error)) from error

    def json_schema(self) -> dict[str, Any] | None:
        return None if self.document is None else cast("dict[str, Any]", copy_json(self.document))


def _is_pydantic_validation_error(error: Exception) -> bool:
    kind = type(error)
    return (
        kind.__name__ == "ValidationError"
        and kind.__module__.startswith("pydantic")
        and callable(getattr(error, "errors", None))
    )


def _pydantic_issues(error: Any) -> list[Issue]:
    issues = []
    for detail in error.errors():
        location = detail.get("loc", ())
        path = tuple(
            part if isinstance(part, int) and not isinstance(part, bool) else str(part)
            for part in location
        )
        issues.append(Issue(message=str(detail.get("msg", "Invalid value")), path=path))
    return issues


def validator(
    validate: Callable[[Any], Any],
    *,
    json_schema: Mapping[str, Any] | None = None,
    vendor: str = "custom",
) -> Schema:
    """Make a `Schema` from a hand-written validate function, which may transform values.

    Args:
        validate: returns the (possibly transformed) value or raises `SchemaIssues`.
        json_schema: the draft 2020-12 JSON Schema of the input side, if there is one;
            checked and copied now.
        vendor: the name messages give the validator.

    Raises:
        SchemaDefinitionError: when `validate` is not callable, `vendor` is blank or
            `json_schema` is not a valid JSON Schema.
    """
    if not callable(validate):
        raise SchemaDefinitionError("validator() requires a callable validate")
    if not isinstance(vendor, str) or not vendor.strip():
        raise SchemaDefinitionError("validator() vendor must be a non-blank string")
    document = None
    if json_schema is not None:
        document = checked_json_schema(json_schema, "validator() json_schema")
    return _CallableSchema(function=validate, document=document, vendor=vendor)


def as_schema(value: object, *, label: str) -> Schema:
    """Return `value` as a compiled `Schema`, accepting every form a schema may take.

    In order: a `Schema` (returned as is); a JSON Schema dict; a pydantic v2 model class;
    a pydantic `TypeAdapter`; any object with a `validate(value)` method and optionally a
    `json_schema()` method and a `vendor` string.

    Args:
        value: what the user gave as a schema.
        label: what the schema is for (`Tool input`, `Agent result`, ...), used in messages.

    Raises:
        SchemaDefinitionError: when `value` is none of those, or its JSON Schema is invalid.
    """
    if isinstance(value, Schema):
        return value
    if isinstance(value, Mapping):
        return compile_json_schema(value, registry=None, subject=f"{label} JSON Schema")
    model_validate = _method(value, "model_validate")
    model_json_schema = _method(value, "model_json_schema")
    if model_validate is not None and model_json_schema is not None:
        if not isinstance(value, type):
            raise SchemaDefinitionError(
                f"{label} requires a schema: got an instance of {type(value).__name__}; "
                "pass the pydantic model class"
            )
        return _pydantic_schema(model_validate, model_json_schema, label)
    validate_python = _method(value, "validate_python")
    adapter_json_schema = _method(value, "json_schema")
    if validate_python is not None and adapter_json_schema is not None:
        return _pydantic_schema(validate_python, adapter_json_schema, label)
    validate = _method(value, "validate")
    if validate is not None:
        return _protocol_schema(value, validate, label)
    raise SchemaDefinitionError(
        f"{label} requires a schema: a JSON Schema dict, a pydantic model or TypeAdapter, "
        "or an object with validate()"
    )


def _attribute(value: object, name: str) -> Any:
    try:
        return getattr(value, name, None)
    except Exception:  # a property that raises counts as missing
        return None


def _method(value: object, name: str) -> Callable[..., Any] | None:
    found = _attribute(value, name)
    return found if callable(found) else None


def _pydantic_schema(
    validate: Callable[[Any], Any], describe: Callable[..., Any], label: str
) -> Schema:
    try:
        described = describe(mode="validation")
    except Exception:
        # Some valid models (arbitrary types) have no JSON Schema; they still validate.
        document = None
    else:
        document = checked_json_schema(described, f"{label} pydantic JSON Schema")
    return _PydanticSchema(function=validate, document=document)


def _protocol_schema(value: object, validate: Callable[[Any], Any], label: str) -> Schema:
    vendor = _attribute(value, "vendor")
    if not isinstance(vendor, str) or not vendor.strip():
        vendor = "custom"
    return _CallableSchema(
        function=validate, document=_protocol_json_schema(value, label), vendor=vendor
    )


def _protocol_json_schema(value: object, label: str) -> dict[str, Any] | None:
    """Call a protocol object's `json_schema()` once and keep a checked copy of the result."""
    describe = _attribute(value, "json_schema")
    if describe is None:
        return None
    if not callable(describe):
        raise SchemaDefinitionError(f"{label} json_schema must be a method returning a dict")
    try:
        described = describe()
    except Exception as error:
        raise SchemaDefinitionError(
            f"{label} json_schema() raised {type(error).__name__}: {error}"
        ) from error
    if described is None:
        return None
    if not isinstance(described, Mapping):
        raise SchemaDefinitionError(f"{label} json_schema() must return a JSON Schema dict")
    return checked_json_schema(described, f"{label} json_schema()")

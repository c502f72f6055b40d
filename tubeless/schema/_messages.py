"""Issue messages for JSON Schema errors that never quote the rejected value.

`jsonschema` words its errors around the instance (`'s3cret' is too long`). Values at
tubeless boundaries may carry user data, and issue messages end up in run reports and
trace records, so the messages here are built from the failing keyword and the schema's
value for it. Only property names (schema names, or keys of the rejected object) and,
for a wrong type, the JSON type of the value (`Expected string, got integer`) appear.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError

from tubeless._quote import quote, type_name

__all__ = ["error_messages"]

_LISTED = 10
"""At most this many schema values or property names are listed in one message."""

# Schema-path keywords followed by a property name or an index, rather than a keyword.
_NAMED = frozenset(
    {"properties", "patternProperties", "dependentSchemas", "allOf", "anyOf", "oneOf"}
    | {"prefixItems", "$defs"}
)

Wording = Callable[[Any, Any], str]
"""Word an error from the schema's value for the keyword and the enclosing schema."""


def error_messages(error: ValidationError) -> tuple[str, ...]:
    """Return the value-free messages for one `jsonschema` error (usually exactly one).

    `required`, `dependentRequired` and `additionalProperties` name the missing or
    unexpected properties; several `required` errors of one object each name all of
    them, so callers drop repeated messages.
    """
    messages = _property_messages(error)
    if messages is None:
        messages = (_keyword_message(error),)
    if _under_property_names(error.absolute_schema_path):
        return tuple(
            f"Invalid property name: {message[0].lower()}{message[1:]}" for message in messages
        )
    return messages


def _keyword_message(error: ValidationError) -> str:
    keyword: object = error.validator
    if not isinstance(keyword, str):  # `None` for a `false` schema
        return "No value is allowed here"
    wording = _WORDINGS.get(keyword)
    if wording is None:
        return f"Does not satisfy {keyword!r}"
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    message = wording(error.validator_value, schema)
    if keyword == "type":
        # What it got, by JSON type only: the value itself may be a secret.
        message += f", got {json_type(error.instance)}"
    return message


def _property_messages(error: ValidationError) -> tuple[str, ...] | None:
    instance: object = error.instance
    value: Any = error.validator_value
    if not isinstance(instance, Mapping):
        return None
    if error.validator == "required":
        missing = [name for name in value if name not in instance]
        return tuple(f"{name!r} is a required property" for name in missing) or None
    if error.validator == "dependentRequired":
        return (
            tuple(
                f"{needed!r} is required when {name!r} is present"
                for name, needs in value.items()
                if name in instance
                for needed in needs
                if needed not in instance
            )
            or None
        )
    if error.validator == "additionalProperties" and value is False:
        extra = _unexpected_keys(instance, error.schema)
        if extra:
            noun = "property" if len(extra) == 1 else "properties"
            return (f"Unexpected {noun} {_listing(extra)}",)
    return None


def _unexpected_keys(instance: Mapping[Any, Any], schema: Any) -> list[str]:
    known = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    patterns = schema.get("patternProperties", {}) if isinstance(schema, Mapping) else {}
    return [
        str(key)
        for key in instance
        if key not in known and not any(re.search(pattern, str(key)) for pattern in patterns)
    ]


def _under_property_names(schema_path: Iterable[object]) -> bool:
    """Return whether the failing keyword sits inside a `propertyNames` subschema."""
    parts = list(schema_path)
    index = 0
    while index < len(parts):
        if parts[index] == "propertyNames":
            return True
        index += 2 if parts[index] in _NAMED else 1
    return False


def _listing(values: Iterable[object]) -> str:
    shown = [quote(value) for value in values]
    if len(shown) > _LISTED:
        return ", ".join(shown[:_LISTED]) + ", …"
    return ", ".join(shown)


def json_type(value: object) -> str:
    """The JSON type name of `value` (`integer`, `string`, ...), or its bounded type name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type_name(value)


def _type_names(kind: Any, _schema: Any) -> str:
    names = [kind] if isinstance(kind, str) else [str(name) for name in kind]
    if len(names) == 1:
        return f"Expected {names[0]}"
    return f"Expected {', '.join(names[:-1])} or {names[-1]}"


def _count(noun: str, bound: str) -> Wording:
    def word(value: Any, _schema: Any) -> str:
        plural = noun if value == 1 else _PLURALS.get(noun, noun + "s")
        return f"Expected {bound} {value} {plural}"

    return word


def _number(bound: str) -> Wording:
    return lambda value, _schema: f"Expected {bound} {value!r}"


def _fixed(message: str) -> Wording:
    return lambda _value, _schema: message


def _extra_items(_value: Any, schema: Any) -> str:
    prefix = schema.get("prefixItems", ())
    return _count("item", "at most")(len(prefix), schema)


def _contains_count(bound: str) -> Wording:
    def word(value: Any, _schema: Any) -> str:
        noun = "item" if value == 1 else "items"
        return f"Expected {bound} {value} {noun} matching the 'contains' schema"

    return word


def _unevaluated(kind: str) -> Wording:
    def word(value: Any, _schema: Any) -> str:
        if value is False:
            return f"Unevaluated {kind} are not allowed"
        return f"Unevaluated {kind} must match the 'unevaluated{kind.title()}' schema"

    return word


_PLURALS = {"property": "properties"}

_WORDINGS: Mapping[str, Wording] = {
    "type": _type_names,
    "enum": lambda value, _schema: f"Expected one of: {_listing(value)}",
    "const": _fixed("Expected the constant value"),
    "minimum": _number("at least"),
    "maximum": _number("at most"),
    "exclusiveMinimum": _number("more than"),
    "exclusiveMaximum": _number("less than"),
    "multipleOf": _number("a multiple of"),
    "minLength": _count("character", "at least"),
    "maxLength": _count("character", "at most"),
    "pattern": lambda value, _schema: f"Expected to match pattern {value!r}",
    "format": lambda value, _schema: f"Expected format {value!r}",
    "minItems": _count("item", "at least"),
    "maxItems": _count("item", "at most"),
    "items": _extra_items,
    "uniqueItems": _fixed("Expected unique items"),
    "contains": _fixed("Expected at least one item matching the 'contains' schema"),
    "minContains": _contains_count("at least"),
    "maxContains": _contains_count("at most"),
    "minProperties": _count("property", "at least"),
    "maxProperties": _count("property", "at most"),
    "required": _fixed("A required property is missing"),
    "dependentRequired": _fixed("A property required by another property is missing"),
    "additionalProperties": _fixed("Unexpected properties are not allowed"),
    "unevaluatedProperties": _unevaluated("properties"),
    "unevaluatedItems": _unevaluated("items"),
    "not": _fixed("Must not match the given schema"),
    "anyOf": _fixed("Must match at least one of the given schemas"),
    "oneOf": _fixed("Must match exactly one of the given schemas"),
    "allOf": _fixed("Must match all of the given schemas"),
}

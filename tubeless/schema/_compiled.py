"""Draft 2020-12 JSON Schemas compiled to plain Python closures, for hot-path checks.

`jsonschema` walks a schema keyword by keyword on every call, which costs hundreds of
microseconds for a trace record. `compile_checker` turns the keywords a wire schema
uses into nested closures once, so `is_valid` costs a few microseconds; on failure
`first_error` asks `jsonschema` for the most relevant error, worded without the value.
A schema that uses a keyword the closures do not implement is checked by `jsonschema`
alone (correct, only slower).

Values are strict JSON: `dict` objects with `str` keys, `list` arrays, and finite `int` or
`float` numbers (`bool` is not a number; NaN and infinities are not JSON numbers).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import unquote

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tubeless.errors import SchemaDefinitionError
from tubeless.schema._messages import error_messages

__all__ = [
    "SchemaChecker",
    "SchemaViolation",
    "compile_acceptor",
    "compile_checker",
    "is_json_number",
]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
    | {"deprecated", "readOnly", "writeOnly", "format"}
)
_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "propertyNames")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_ARRAY_KEYWORDS = ("items", "minItems", "maxItems")
_APPLICATORS = ("type", "enum", "const", "$ref", "anyOf", "allOf", "oneOf", "not", "if")
_SUPPORTED = frozenset(
    _OBJECT_KEYWORDS + _STRING_KEYWORDS + _NUMBER_KEYWORDS + _ARRAY_KEYWORDS + _APPLICATORS
) | {"then", "else"}


def is_json_number(value: object) -> bool:
    """Return whether `value` is a JSON number: a non-`bool` `int` or a finite `float`."""
    if type(value) is int:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _is_json_integer(value: object) -> bool:
    if type(value) is int:  # the usual integer, without the three `isinstance` calls
        return True
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


_TYPES: Mapping[str, Check] = {
    "null": lambda value: value is None,
    "boolean": lambda value: isinstance(value, bool),
    "integer": _is_json_integer,
    "number": is_json_number,
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def _type_definition(check: Check) -> Callable[[object, Any], bool]:
    return lambda _checker, value: check(value)


_StrictValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {name: _type_definition(check) for name, check in _TYPES.items()}
    ),
)


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaViolation:
    """The first place where a value breaks a schema."""

    path: str
    """Where, as a JSON path from the value's root (`$.payload.items[0]`)."""
    message: str
    """What is wrong, in words that never quote the rejected value."""


class _UnsupportedKeywordError(Exception):
    """A keyword the closures do not implement: fall back to `jsonschema`."""


@dataclasses.dataclass(eq=False)
class SchemaChecker:
    """A compiled schema: a fast `is_valid` and a precise `first_error`."""

    is_valid: Check
    """Return whether a value matches the schema."""
    _document: Mapping[str, Any] = dataclasses.field(repr=False)
    _pointer: str = dataclasses.field(repr=False)
    _validator: Validator | None = dataclasses.field(default=None, repr=False)

    def first_error(self, value: object) -> SchemaViolation | None:
        """Return the most relevant violation in `value`, or `None` when it matches."""
        if self._validator is None:
            self._validator = _jsonschema_validator(self._document, self._pointer)
        error = best_match(self._validator.iter_errors(cast(Any, value)))
        if error is None:
            return None
        return SchemaViolation(path=error.json_path, message=error_messages(error)[0])


def compile_checker(document: Mapping[str, Any], pointer: str = "") -> SchemaChecker:
    """Compile the subschema at JSON pointer `pointer` of `document`.

    `$ref`s resolve inside `document` only (`#/...`, or its own `$id` followed by a
    fragment); nothing is retrieved.

    Raises:
        SchemaDefinitionError: when `pointer` or a `$ref` points nowhere, or a `pattern`
            is not a regular expression.
    """
    compiler = _Compiler(document)
    try:
        is_valid = compiler.compile_pointer(pointer)
    except re.error as error:
        raise SchemaDefinitionError(f"Invalid pattern in schema: {error}") from error
    except _UnsupportedKeywordError:
        validator = _jsonschema_validator(document, pointer)
        return SchemaChecker(validator.is_valid, document, pointer, validator)
    return SchemaChecker(is_valid, document, pointer)


_NEGATIONS = frozenset({"not", "oneOf", "if"})


def compile_acceptor(document: Mapping[str, Any]) -> Check | None:
    """Compile `document` into a check whose `True` means `jsonschema` accepts too.

    The closures are as strict as `jsonschema` or stricter (only JSON values pass: a
    tuple is not an array, NaN is not a number), and stricter parts stay stricter only
    while nothing negates them, so a schema with `not`, `oneOf` or `if` anywhere gets
    `None`, as does one with a keyword the closures lack or a `$ref` out of `document`.
    A `False` from the check decides nothing: ask `jsonschema`.
    """
    if _mentions(document, _NEGATIONS):
        return None
    try:
        return _Compiler(document).compile_pointer("")
    except (_UnsupportedKeywordError, SchemaDefinitionError, re.error):
        return None


def _mentions(node: object, keys: frozenset[str]) -> bool:
    """Whether any object inside `node` has one of `keys` (values in enums included)."""
    if isinstance(node, Mapping):
        return not keys.isdisjoint(node) or any(_mentions(sub, keys) for sub in node.values())
    if isinstance(node, list):
        return any(_mentions(sub, keys) for sub in node)
    return False


def _jsonschema_validator(document: Mapping[str, Any], pointer: str) -> Validator:
    base = document.get("$id", "urn:tubeless:compiled-schema")
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(base, resource)
    return cast(Validator, _StrictValidator({"$ref": f"{base}#{pointer}"}, registry=registry))


def _resolve_pointer(document: Mapping[str, Any], pointer: str) -> Any:
    node: Any = document
    for raw in pointer.split("/")[1:] if pointer else ():
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaDefinitionError(f"JSON pointer {pointer!r} points nowhere")
    return node


def _json_equal(left: object, right: object) -> bool:
    """Compare as JSON does: `True` is not `1`, but `1` is `1.0`."""
    if isinstance(left, str) or isinstance(right, str):
        return left == right
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, Sequence) and isinstance(right, Sequence):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    return left == right


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    first, *rest = checks

    def check_all(value: Any) -> bool:
        return first(value) and all(other(value) for other in rest)

    return check_all


class _Compiler:
    """Turns schema nodes into closures; `$ref` targets are compiled once."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._document = document
        self._base = document.get("$id")
        self._compiled: dict[str, Check] = {}
        self._pending: dict[str, list[Check]] = {}

    def compile_pointer(self, pointer: str) -> Check:
        if pointer in self._compiled:
            return self._compiled[pointer]
        if pointer in self._pending:
            cell = self._pending[pointer]  # a cycle: look the closure up when called
            return lambda value: cell[0](value)
        cell = self._pending[pointer] = []
        check = self.compile(_resolve_pointer(self._document, pointer))
        cell.append(check)
        self._compiled[pointer] = check
        del self._pending[pointer]
        return check

    def compile(self, node: Any) -> Check:
        if node is True or node == {}:
            return lambda _value: True
        if node is False:
            return lambda _value: False
        if not isinstance(node, Mapping) or set(node) - _SUPPORTED - _ANNOTATIONS:
            raise _UnsupportedKeywordError
        if "$id" in node and node is not self._document:
            raise _UnsupportedKeywordError  # a nested base URI changes how its refs resolve
        checks = self._typed(node)
        checks += self._values(node)
        checks += self._combinators(node)
        return _all_of(checks)

    def _typed(self, node: Mapping[str, Any]) -> list[Check]:
        kind = node.get("type")
        groups = (
            (self._object_check, _OBJECT_KEYWORDS, "object"),
            (self._string_check, _STRING_KEYWORDS, "string"),
            (self._number_check, _NUMBER_KEYWORDS, "number"),
            (self._array_check, _ARRAY_KEYWORDS, "array"),
        )
        checks: list[Check] = []
        folded = False
        for build, keywords, family in groups:
            exact = kind == family or (family == "number" and kind == "integer")
            if exact or any(keyword in node for keyword in keywords):
                checks.append(build(node, exact))
                folded = folded or exact
        if kind is not None and not folded:
            checks.insert(0, _type_check(kind))
        return checks

    def _values(self, node: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = []
        if "enum" in node:
            checks.append(_enum_check(node["enum"]))
        if "const" in node:
            checks.append(_enum_check([node["const"]]))
        if "$ref" in node:
            checks.append(self.compile_pointer(self._local_pointer(node["$ref"])))
        return checks

    def _combinators(self, node: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = [self.compile(sub) for sub in node.get("allOf", ())]
        if "anyOf" in node:
            options = [self.compile(sub) for sub in node["anyOf"]]
            checks.append(lambda value: any(option(value) for option in options))
        if "oneOf" in node:
            choices = [self.compile(sub) for sub in node["oneOf"]]
            checks.append(lambda value: sum(1 for choice in choices if choice(value)) == 1)
        if "not" in node:
            negated = self.compile(node["not"])
            checks.append(lambda value: not negated(value))
        if "if" in node:
            condition = self.compile(node["if"])
            then = self.compile(node.get("then", True))
            otherwise = self.compile(node.get("else", True))
            checks.append(lambda value: then(value) if condition(value) else otherwise(value))
        return checks

    def _local_pointer(self, ref: str) -> str:
        target, _, fragment = ref.partition("#")
        if target and target != self._base:
            raise SchemaDefinitionError(f"$ref {ref!r} leaves the schema document")
        if fragment and not fragment.startswith("/"):
            raise _UnsupportedKeywordError  # an anchor
        return fragment

    def _object_check(self, node: Mapping[str, Any], typed: bool) -> Check:
        properties = {key: self.compile(sub) for key, sub in node.get("properties", {}).items()}
        required = frozenset(node.get("required", ()))
        extra = node.get("additionalProperties", True)
        if extra is False and "propertyNames" not in node:
            return _closed_object_check(properties, required, typed)
        extra_check = None if extra is False else self.compile(extra)
        # Without `propertyNames` (the usual object) no name is checked: no call per key.
        names = self.compile(node["propertyNames"]) if "propertyNames" in node else None

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return not typed
            if required and not value.keys() >= required:
                return False
            for key, item in value.items():
                if names is not None and not names(key):
                    return False
                sub = properties.get(key)
                if sub is None:
                    if extra_check is None or not extra_check(item):
                        return False
                elif not sub(item):
                    return False
            return True

        return check

    def _array_check(self, node: Mapping[str, Any], typed: bool) -> Check:
        items = self.compile(node.get("items", True))
        low = node.get("minItems", 0)
        high = node.get("maxItems", math.inf)

        def check(value: Any) -> bool:
            if not isinstance(value, list):
                return not typed
            return low <= len(value) <= high and all(map(items, value))

        return check

    @staticmethod
    def _string_check(node: Mapping[str, Any], typed: bool) -> Check:
        low = node.get("minLength", 0)
        high = node.get("maxLength", math.inf)
        search = re.compile(node["pattern"]).search if "pattern" in node else None
        if typed and search is None and high == math.inf:
            return lambda value: isinstance(value, str) and len(value) >= low

        def check(value: Any) -> bool:
            if not isinstance(value, str):
                return not typed
            if not low <= len(value) <= high:
                return False
            return search is None or search(value) is not None

        return check

    @staticmethod
    def _number_check(node: Mapping[str, Any], typed: bool) -> Check:
        kind = _TYPES["integer"] if node.get("type") == "integer" else is_json_number
        if typed and not any(keyword in node for keyword in _NUMBER_KEYWORDS):
            return kind
        low = node.get("minimum", -math.inf)
        high = node.get("maximum", math.inf)
        above = node.get("exclusiveMinimum", -math.inf)
        below = node.get("exclusiveMaximum", math.inf)

        def check(value: Any) -> bool:
            if not is_json_number(value):
                return not typed
            return kind(value) and low <= value <= high and above < value < below

        return check


def _closed_object_check(
    properties: Mapping[str, Check], required: frozenset[str], typed: bool
) -> Check:
    """The common object: known properties only, no `propertyNames`."""
    get = properties.get

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return not typed
        if required and not value.keys() >= required:
            return False
        for key, item in value.items():
            sub = get(key)
            if sub is None or not sub(item):
                return False
        return True

    return check


_CLASSES: Mapping[str, type] = {"string": str, "boolean": bool, "array": list, "object": dict}


def _type_check(kind: str | list[str]) -> Check:
    names = {kind} if isinstance(kind, str) else set(kind)
    classes = tuple(cls for name, cls in _CLASSES.items() if name in names)
    numeric = next((_TYPES[name] for name in ("number", "integer") if name in names), None)
    nullable = "null" in names

    def check(value: Any) -> bool:
        if isinstance(value, classes):
            return True
        if value is None:
            return nullable
        return numeric is not None and numeric(value)

    return check


def _enum_check(members: list[Any]) -> Check:
    if all(isinstance(member, str) for member in members):
        strings = frozenset(members)
        return lambda value: isinstance(value, str) and value in strings
    if all(is_json_number(member) for member in members):
        numbers = frozenset(members)
        return lambda value: is_json_number(value) and value in numbers
    return lambda value: any(_json_equal(member, value) for member in members)

"""Command-line flags inferred from an options JSON Schema (draft 2020-12, input side).

Only metadata is converted: flat objects of strings, numbers, booleans and repeatable
scalar arrays. Validation and transformation stay with the pipeline's options schema.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from tubeless.cli._commands._flags import CliParameter, flag_for

__all__ = ["OVERRIDE_FIELDS", "infer_parameters"]

OVERRIDE_FIELDS = frozenset({"description", "flag", "short", "env"})
"""What an override may change about an inferred flag."""

_COMBINATORS = ("anyOf", "oneOf", "allOf", "not", "if")
_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SHORT = re.compile(r"[A-Za-gi-zA-Z]")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unsupported(location: str, reason: str) -> NoReturn:
    """Raise the "Cannot infer CLI flags" error for `location`."""
    raise ValueError(
        f"Cannot infer CLI flags for {location}: {reason}. Supply explicit params with "
        "configure= and, if needed, map_options= in define_pipeline_command."
    )


def _mapping(value: object, location: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        unsupported(location, "expected an object schema")
    return value


def _follow_pointer(root: Mapping[str, Any], pointer: str, location: str) -> object:
    target: object = root
    for segment in pointer[2:].split("/"):
        key = segment.replace("~1", "/").replace("~0", "~")
        parent = _mapping(target, location)
        target = parent.get(key)
    return target


def _resolve(
    value: object, root: Mapping[str, Any], location: str, seen: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Follow local `$ref`s (siblings win over the target); refuse remote and recursive ones."""
    schema = _mapping(value, location)
    reference = schema.get("$ref")
    if reference is None:
        return dict(schema)
    if not isinstance(reference, str) or not reference.startswith("#/"):
        unsupported(location, "only local JSON Schema references are supported")
    if reference in seen:
        unsupported(location, "recursive schema")
    target = _resolve(
        _follow_pointer(root, reference, location), root, location, seen | {reference}
    )
    siblings = {key: item for key, item in schema.items() if key != "$ref"}
    return {**target, **siblings}


def _scalar(schema: Mapping[str, Any], location: str) -> CliParameter:
    if any(schema.get(word) is not None for word in _COMBINATORS):
        unsupported(location, "union and conditional schemas need an explicit mapping")
    choices = schema.get("enum")
    if choices is None and "const" in schema:
        choices = [schema["const"]]
    kind = schema.get("type")
    if kind is None and isinstance(choices, list) and choices:
        kind = _json_type(choices[0])
    blank = CliParameter(key="", flag="", type="string")
    if kind == "string":
        if choices is not None and (
            not isinstance(choices, list) or not all(isinstance(item, str) for item in choices)
        ):
            unsupported(location, "expected string choices")
        return dataclasses.replace(blank, choices=None if choices is None else tuple(choices))
    if kind in ("integer", "number"):
        return dataclasses.replace(
            blank,
            type="number",
            integer=kind == "integer",
            minimum=_bound(schema.get("minimum")),
            maximum=_bound(schema.get("maximum")),
        )
    if kind == "boolean":
        return dataclasses.replace(blank, type="boolean")
    unsupported(location, "expected a string, number, boolean, or repeatable scalar array")


def _json_type(value: object) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else None


def _bound(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _default_matches(parameter: CliParameter, value: object) -> bool:
    kind = _json_type(value)
    if kind != parameter.type:
        return False
    return not parameter.integer or float(value).is_integer()  # type: ignore[arg-type]


def _array(field: Mapping[str, Any], root: Mapping[str, Any], key: str) -> CliParameter:
    if (
        "default" in field
        or "prefixItems" in field
        or any(field.get(word) is not None for word in ("anyOf", "oneOf", "allOf"))
    ):
        unsupported(key, "array defaults, tuples and unions need an explicit mapping")
    item = _scalar(_resolve(field.get("items"), root, key), key)
    if item.type not in ("string", "number"):
        unsupported(key, "repeatable flags require string or number items")
    return dataclasses.replace(item, multiple=True)


def _property(
    key: str, value: object, root: Mapping[str, Any], required: frozenset[str]
) -> CliParameter:
    field = _resolve(value, root, key)
    if field.get("type") == "array":
        # A required array stays required: `[]` would hide the missing flag.
        parameter = dataclasses.replace(_array(field, root, key), optional=key not in required)
    else:
        parameter = _scalar(field, key)
        if "default" in field:
            default = field["default"]
            if not _default_matches(parameter, default):
                unsupported(key, "default does not match the flag type")
            if parameter.integer:
                default = int(default)
            parameter = dataclasses.replace(parameter, default=default)
        elif parameter.type != "boolean" and key not in required:
            parameter = dataclasses.replace(parameter, optional=True)
    description = field.get("description")
    return dataclasses.replace(
        parameter,
        key=key,
        flag=flag_for(key),
        description=description if isinstance(description, str) else None,
    )


def _apply_override(parameter: CliParameter, override: object) -> CliParameter:
    key = parameter.key
    if not isinstance(override, Mapping):
        raise ValueError(f"The override of {key!r} must be a mapping")
    unknown = sorted(str(name) for name in override if name not in OVERRIDE_FIELDS)
    if unknown:
        raise ValueError(
            f"The override of {key!r} may change only description, flag, short and env; "
            f"got {', '.join(unknown)}"
        )
    changes = {name: override[name] for name in OVERRIDE_FIELDS if name in override}
    for name, value in changes.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"The override of {key!r} must give {name} as a string")
    updated = dataclasses.replace(parameter, **changes)
    _check_names(updated)
    return updated


def _check_names(parameter: CliParameter) -> None:
    key = parameter.key
    if not _FLAG.fullmatch(parameter.flag):
        unsupported(key, f"--{parameter.flag} is not a usable flag name; override its flag")
    if parameter.short is not None and not _SHORT.fullmatch(parameter.short):
        raise ValueError(f"{key!r} has an invalid short alias; use one letter other than h")
    if parameter.env is not None:
        if not _ENV.fullmatch(parameter.env):
            raise ValueError(f"{key!r} has an invalid environment variable name")
        if parameter.multiple:
            raise ValueError(
                f"{key!r} is repeatable and cannot read an environment variable; "
                "pass repeated flags instead"
            )


def infer_parameters(
    schema: object, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[CliParameter, ...]:
    """Infer one flag per property of a flat object schema.

    Args:
        schema: the options' draft 2020-12 JSON Schema (only local `$ref`s).
        overrides: per property name, new `description`, `flag`, `short` or `env`.

    Raises:
        ValueError: "Cannot infer CLI flags for <location>: <reason>. Supply explicit
            params ..." for a schema the rules do not cover, or a bad override.
    """
    root = _mapping(schema, "pipeline options")
    resolved = _resolve(root, root, "pipeline options")
    if resolved.get("type") != "object" or any(
        resolved.get(word) is not None for word in ("anyOf", "oneOf", "allOf", "if")
    ):
        unsupported("pipeline options", "expected a flat object schema")
    properties = _mapping(resolved.get("properties", {}), "pipeline properties")
    listed = resolved.get("required")
    required = (
        frozenset(item for item in listed if isinstance(item, str)) if listed else frozenset()
    )
    given = dict(overrides or {})
    for key in given:
        if key not in properties:
            unsupported(str(key), "override does not name an option")
    parameters = []
    for key, value in properties.items():
        parameter = _property(str(key), value, root, required)
        if key in given:
            parameter = _apply_override(parameter, given[key])
        else:
            _check_names(parameter)
        parameters.append(parameter)
    return tuple(parameters)

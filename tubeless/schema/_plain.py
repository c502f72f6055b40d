"""JSON Schema documents as plain JSON data: checked copies, fast copies, JSON pointers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tubeless.errors import SchemaDefinitionError

_SCALARS = (str, int, float, bool, type(None))


def plain_json_copy(value: object, subject: str) -> Any:
    """Return `value` copied into fresh dicts, lists and scalars.

    Mappings become dicts and tuples become lists, so the copy is what `jsonschema` and
    `json.dumps` expect, and later changes to `value` do not reach it.

    Raises:
        SchemaDefinitionError: when `value` holds a non-string key, an object JSON has no
            form for, or a cycle; the message starts with `subject` and names the place.
    """
    return _copy(value, (), set(), subject)


def _copy(value: object, path: tuple[str | int, ...], active: set[int], subject: str) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if not isinstance(value, (Mapping, list, tuple)):
        raise SchemaDefinitionError(
            f"{subject} must be plain JSON data: found {type(value).__name__} "
            f"at {json_pointer(path)}"
        )
    if id(value) in active:
        raise SchemaDefinitionError(f"{subject} must not contain a cycle (at {json_pointer(path)})")
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return _copy_mapping(value, path, active, subject)
        return [_copy(item, (*path, index), active, subject) for index, item in enumerate(value)]
    finally:
        active.discard(id(value))


def _copy_mapping(
    value: Mapping[Any, Any], path: tuple[str | int, ...], active: set[int], subject: str
) -> dict[str, Any]:
    copied: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise SchemaDefinitionError(
                f"{subject} keys must be strings: found {key!r} at {json_pointer(path)}"
            )
        copied[key] = _copy(item, (*path, key), active, subject)
    return copied


def copy_json(value: Any) -> Any:
    """Return a deep copy of plain JSON data already made by `plain_json_copy`."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def json_pointer(path: Iterable[object]) -> str:
    """Return `path` as a JSON pointer fragment such as `#/properties/a~1b` (`#` for the root)."""
    return "#" + "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)

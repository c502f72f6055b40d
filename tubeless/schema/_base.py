"""The compiled-schema contract and the one place a boundary validates a value."""

from __future__ import annotations

import abc
from typing import Any

from tubeless.errors import SchemaIssues, SchemaValidationError

_RENDERED_ISSUES = 16
"""At most this many issues are worded in a boundary's message (all are kept in `issues`)."""


class Schema(abc.ABC):
    """A compiled schema: checks (and may transform) values, and may describe its input.

    Build one with `as_schema`, `json_schema` or `validator`, or subclass it. Instances
    are immutable, so one schema can validate values from many threads at once.
    """

    __slots__ = ()

    vendor: str
    """Who implements it: `jsonschema`, `pydantic`, `custom`, or a validator's own name."""

    @abc.abstractmethod
    def validate(self, value: Any) -> Any:
        """Return `value`, possibly transformed, when it matches.

        Raises:
            SchemaIssues: when the value does not match. Any other exception means the
                schema itself failed ("threw while validating").
        """

    @abc.abstractmethod
    def json_schema(self) -> dict[str, Any] | None:
        """Return a fresh copy of the draft 2020-12 JSON Schema of the input side, or `None`."""


def validate_boundary(schema: Schema, value: Any, boundary: str) -> Any:
    """Validate `value` at a boundary (options, step output, tool input, ...) and return it.

    Args:
        schema: the compiled schema of the boundary.
        value: the value crossing it.
        boundary: the boundary's name as messages show it, such as `Agent tool echo input`.

    Returns:
        The value the schema returned, possibly transformed.

    Raises:
        SchemaValidationError: carrying the issues when the value does not match, or with
            no issues and the schema's exception as `__cause__` when the schema raised.
    """
    try:
        return schema.validate(value)
    except SchemaIssues as error:
        issues = error.issues
        rendered = "; ".join(issue.render() for issue in issues[:_RENDERED_ISSUES])
        if len(issues) > _RENDERED_ISSUES:
            rendered += f"; and {len(issues) - _RENDERED_ISSUES} more issues"
        raise SchemaValidationError(
            f"{boundary} validation failed: {rendered}", boundary=boundary, issues=issues
        ) from None
    except Exception as error:
        vendor = getattr(schema, "vendor", "custom")
        raise SchemaValidationError(
            f"{boundary} schema ({vendor}) threw while validating", boundary=boundary
        ) from error

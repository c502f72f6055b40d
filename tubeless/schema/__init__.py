"""Schemas at tubeless boundaries: JSON Schema dicts, pydantic models and validate() objects."""

from tubeless._public import show_public_module as _show_public_module
from tubeless._types import SchemaLike, SchemaProtocol
from tubeless.schema._adapters import as_schema, validator
from tubeless.schema._base import Schema, validate_boundary
from tubeless.schema._jsonschema import json_schema

__all__ = [
    "Schema",
    "SchemaLike",
    "SchemaProtocol",
    "as_schema",
    "json_schema",
    "validate_boundary",
    "validator",
]

_show_public_module(__name__, __all__, globals())

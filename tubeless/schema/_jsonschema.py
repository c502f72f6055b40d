"""JSON Schema (draft 2020-12) schemas, checked and compiled once with `jsonschema`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

import jsonschema_specifications  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import (
    InvalidAnchor,
    NoSuchAnchor,
    PointerToNowhere,
    Unresolvable,
)
from referencing.jsonschema import DRAFT202012, UnknownDialect

from tubeless.errors import Issue, SchemaDefinitionError, SchemaIssues
from tubeless.schema._base import Schema
from tubeless.schema._compiled import compile_acceptor
from tubeless.schema._messages import error_messages
from tubeless.schema._plain import copy_json, json_pointer, plain_json_copy

_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_METASCHEMAS = cast("Registry[Any]", jsonschema_specifications.REGISTRY)


def _is_array(_checker: object, instance: object) -> bool:
    # Frozen agent state holds tuples, and tuples are plain data in tubeless.
    return isinstance(instance, (list, tuple))


_Draft202012 = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("array", _is_array),
)


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _JsonSchema(Schema):
    """A JSON Schema compiled once; `validate` returns matching values unchanged."""

    document: dict[str, Any] = dataclasses.field(repr=False)
    validator: Validator = dataclasses.field(repr=False)
    accept: Callable[[Any], bool] | None = dataclasses.field(repr=False)
    """Compiled closures whose `True` is `jsonschema`'s too (see `compile_acceptor`)."""
    vendor: str = dataclasses.field(default="jsonschema", init=False)

    def validate(self, value: Any) -> Any:
        try:
            if self.accept is not None and self.accept(value):
                return value
        except RecursionError:
            pass  # too deep for the closures: jsonschema decides
        if self.validator.is_valid(value):
            return value
        # dict.fromkeys drops repeats: several errors of one object may word the same issue.
        issues = list(dict.fromkeys(_issues(self.validator.iter_errors(value))))
        issues.sort(key=_issue_order)
        raise SchemaIssues(issues)

    def json_schema(self) -> dict[str, Any]:
        return cast("dict[str, Any]", copy_json(self.document))


def _issues(errors: Iterable[ValidationError]) -> Iterator[Issue]:
    """Turn errors into issues whose messages never quote the rejected value."""
    for error in errors:
        path = tuple(
            part if isinstance(part, int) and not isinstance(part, bool) else str(part)
            for part in error.absolute_path
        )
        for message in error_messages(error):
            yield Issue(message=message, path=path)


def _issue_order(issue: Issue) -> tuple[tuple[tuple[int, int, str], ...], str]:
    # Indexes sort as numbers, keys as text; a tag keeps the two kinds comparable.
    path = tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in issue.path)
    return path, issue.message


def json_schema(schema: Mapping[str, Any], *, registry: Registry[Any] | None = None) -> Schema:
    """Compile a draft 2020-12 JSON Schema into a `Schema`.

    The dict is copied, checked against the metaschema and every `$ref` in it is resolved
    now, so a broken schema fails here rather than at a boundary. References resolve
    against `registry` (its resources only: nothing is ever retrieved, so every referenced
    document must be in it) and the schema itself.

    Args:
        schema: the JSON Schema; later changes to it have no effect.
        registry: resources that `$ref` may point to, identified by their URIs.

    Returns:
        A schema whose `validate` returns matching values unchanged.

    Raises:
        SchemaDefinitionError: when the schema is invalid or a reference cannot be resolved.
    """
    return compile_json_schema(schema, registry=registry, subject="JSON Schema")


def compile_json_schema(
    schema: object, *, registry: Registry[Any] | None, subject: str
) -> _JsonSchema:
    """Do the work of `json_schema`; messages start with `subject`."""
    document = checked_json_schema(schema, subject)
    resources = _offline_registry(registry, subject)
    root = DRAFT202012.create_resource(document)
    _resolve_references(root, _METASCHEMAS.combine(resources), subject)
    validator = _Draft202012(document, registry=resources)
    return _JsonSchema(document=document, validator=validator, accept=compile_acceptor(document))


def checked_json_schema(schema: object, subject: str) -> dict[str, Any]:
    """Return a plain copy of `schema` after checking it is a valid draft 2020-12 schema.

    Raises:
        SchemaDefinitionError: when `schema` is not a dict, names another draft in
            `$schema`, or breaks the metaschema.
    """
    if not isinstance(schema, Mapping):
        raise SchemaDefinitionError(f"{subject} must be a JSON Schema dict")
    document = cast("dict[str, Any]", plain_json_copy(schema, subject))
    dialect = document.get("$schema", _DIALECT)
    if not isinstance(dialect, str) or dialect.rstrip("#") != _DIALECT:
        raise SchemaDefinitionError(f"{subject} must use draft 2020-12, not $schema {dialect!r}")
    try:
        Draft202012Validator.check_schema(document)
    except SchemaError as error:
        where = json_pointer(error.absolute_path)
        raise SchemaDefinitionError(f"{subject} is invalid at {where}: {error.message}") from error
    return document


def _offline_registry(registry: object, subject: str) -> Registry[Any]:
    # Rebuilt around the default retrieve, which refuses every URI, so a user registry's
    # own retrieve (which might fetch over the network) never runs, not even at validation.
    offline: Registry[Any] = Registry()
    if registry is None:
        return offline
    if not isinstance(registry, Registry):
        raise SchemaDefinitionError(f"{subject} registry must be a referencing.Registry")
    return offline.with_resources(registry.items()).crawl()


def _resolve_references(root: Resource[Any], registry: Registry[Any], subject: str) -> None:
    """Look up every `$ref` and `$dynamicRef` reachable from `root` once.

    Raises:
        SchemaDefinitionError: naming the first reference that does not resolve.
    """
    pending = [(root, registry.resolver_with_root(root))]
    seen: set[int] = set()
    while pending:
        resource, resolver = pending.pop()
        if id(resource.contents) in seen:
            continue
        seen.add(id(resource.contents))
        for ref in _references_in(resource.contents):
            try:
                resolved = resolver.lookup(ref)
                target = Resource.from_contents(resolved.contents, DRAFT202012)
            except (Unresolvable, UnknownDialect) as error:
                raise SchemaDefinitionError(
                    f"{subject} has an unresolvable $ref {ref!r}: {_unresolved_reason(error)}"
                ) from error
            pending.append((target, resolved.resolver))
        pending.extend((sub, resolver.in_subresource(sub)) for sub in resource.subresources())


def _references_in(contents: object) -> Iterator[str]:
    if not isinstance(contents, Mapping):
        return
    for keyword in ("$ref", "$dynamicRef"):
        ref = contents.get(keyword)
        if isinstance(ref, str):
            yield ref


def _unresolved_reason(error: Exception) -> str:
    if isinstance(error, PointerToNowhere):
        return "the JSON pointer leads nowhere in the referenced document"
    if isinstance(error, NoSuchAnchor):
        return f"the anchor {error.anchor!r} does not exist"
    if isinstance(error, InvalidAnchor):
        return "the fragment is neither an anchor nor a JSON pointer"
    if isinstance(error, UnknownDialect):
        return "the referenced document uses an unknown $schema"
    return (
        "no document with that URI is registered "
        "(references are never retrieved: add the document to the registry)"
    )

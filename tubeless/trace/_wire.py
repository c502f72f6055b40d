"""The trace v3 wire format: limits, the shipped JSON Schema, and `validate_record`.

`trace-v3.schema.json` (next to this module) is the single definition of every record
kind. The emitter checks each record with `validate_record` before it leaves a run, and
both readers (NDJSON and SQLite) check each record they load with `decode_record`, which
also recomputes a definition snapshot's fingerprints.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any, Protocol, runtime_checkable

from tubeless._fingerprint import MISMATCH_WORDS, identity_mismatch, recomputed_identity
from tubeless._quote import quote
from tubeless.errors import TraceRecordError
from tubeless.schema.lowlevel import SchemaChecker, compile_checker
from tubeless.trace._encoding import TRACE_RECORD_NAMES, TRACE_VERSION, TraceRecord
from tubeless.trace._rules import (
    TRACE_DETAIL_BYTE_LIMIT,
    record_problem,
    record_size_problem,
    relation_problem,
)

__all__ = [
    "SHARED_FIELDS",
    "TRACE_DETAIL_BYTE_LIMIT",
    "TRACE_LIST_LIMIT",
    "TRACE_READ_VERSIONS",
    "TRACE_RECORD_NAMES",
    "TRACE_STRING_LIMIT",
    "TRACE_VERSION",
    "TraceRecord",
    "TraceSink",
    "check_own_fields",
    "check_record",
    "decode_record",
    "load_trace_schema",
    "shared_fields_valid",
    "validate_record",
]

TRACE_READ_VERSIONS = (2, 3)
"""The versions readers accept (version 2 records carry no `iteration`)."""
TRACE_LIST_LIMIT = 128
"""At most this many items in a record's lists (ids, issues, detail rows, target ids)."""
TRACE_STRING_LIMIT = 4096
"""At most this many characters in bounded strings (detail text, remote engine/target)."""

_SCHEMA_FILE = "trace-v3.schema.json"


@runtime_checkable
class TraceSink(Protocol):
    """Anything that takes trace records: `export(record)`; `flush()`/`close()` optional.

    This is the whole contract between a run and its observers' destinations: the run
    hands each wire-form record to `export`, serialised and in emission order.
    """

    def export(self, record: dict[str, Any]) -> None:
        """Take one wire-form trace record."""


_MESSAGE_LIMIT = 400


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("tubeless.trace").joinpath(_SCHEMA_FILE).read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def load_trace_schema() -> dict[str, Any]:
    """Return the trace v3 JSON Schema (draft 2020-12) as a fresh `dict`.

    Record kinds live under `$defs/records/<name>`; the root schema picks one by `name`.
    """
    return copy.deepcopy(_schema())


SHARED_FIELDS = ("pipelineId", "runId", "correlationId", "parentRunId", "itemKey", "iteration")
"""The fields every record of one run repeats, with the same values (`RunObserver` base)."""
_UNCHECKED_FIELDS = frozenset({"version", "name", *SHARED_FIELDS})

_checkers: dict[tuple[str, bool, bool], SchemaChecker] = {}


@functools.cache
def _variant_schema(payload_checked: bool, own_fields: bool) -> dict[str, Any]:
    """The schema with some parts of every kind reduced.

    `payload_checked` makes the payload "an object" (for a payload checked already);
    `own_fields` drops `version`, `name` and `SHARED_FIELDS` (checked once per run).
    """
    if not (payload_checked or own_fields):
        return _schema()
    document = copy.deepcopy(_schema())
    for record in document["$defs"]["records"].values():
        if payload_checked:
            record["properties"]["payload"] = {"type": "object"}
        if own_fields:
            for field in _UNCHECKED_FIELDS:
                record["properties"].pop(field, None)
            record["required"] = [f for f in record["required"] if f not in _UNCHECKED_FIELDS]
    return document


def _checker_for(
    name: object, payload_checked: bool = False, own_fields: bool = False
) -> SchemaChecker:
    key = (name, payload_checked, own_fields)
    checker = _checkers.get(key) if isinstance(name, str) else None  # type: ignore[arg-type]
    if checker is not None:
        return checker
    if not isinstance(name, str) or name not in TRACE_RECORD_NAMES:
        raise TraceRecordError(
            f"Invalid trace record at $.name: {quote(name)} is not a trace record name"
        )
    document = _variant_schema(payload_checked, own_fields)
    # Compiling twice under a race is harmless; setdefault keeps one.
    checker = compile_checker(document, f"/$defs/records/{name}")
    return _checkers.setdefault((name, payload_checked, own_fields), checker)


@functools.cache
def _shared_checker() -> SchemaChecker:
    properties = _schema()["$defs"]["records"]["pipeline.completed"]["properties"]
    document = {
        "$defs": _schema()["$defs"],
        "type": "object",
        "properties": {field: properties[field] for field in ("version", *SHARED_FIELDS)},
        "required": ["version", "pipelineId", "runId"],
        "additionalProperties": False,
    }
    return compile_checker(document)


def shared_fields_valid(shared: Mapping[str, Any]) -> bool:
    """Whether `shared` (`version` and `SHARED_FIELDS` only) is valid in any kind of record.

    Every kind declares these fields alike, and requires `version`, `pipelineId`, `runId`;
    the rule relating them (`iteration.runId == parentRunId`) holds in every kind too.
    """
    return _shared_checker().is_valid(shared) and relation_problem(shared) is None


def _shorten(message: str) -> str:
    # jsonschema quotes the offending value, which may be a whole list of rows.
    if len(message) <= _MESSAGE_LIMIT:
        return message
    return message[: _MESSAGE_LIMIT - 120] + " ... " + message[-100:]


def _first_error(checker: SchemaChecker, record: Mapping[str, Any]) -> Any:
    try:
        return checker.first_error(record)
    except ValueError:  # jsonschema's wording reprs the value: an int too long to print
        return None


def validate_record(record: Mapping[str, Any]) -> None:
    """Check that `record` is a trace record in wire form (version 2 or 3).

    The record's `name` picks its kind's schema; the checks JSON Schema cannot express
    (`iteration.runId == parentRunId`, version 2 without `iteration`, byte limits, counts,
    cause depths, snapshot identity) follow, and last the size of the whole record: at
    most 1 MiB of UTF-8 JSON, so a valid record is always one line `read_ndjson` accepts.
    A `TraceRecord` from a run was checked when it was built and passes at once (the
    NDJSON writer still measures its line).

    Raises:
        TraceRecordError: naming the record kind and the JSON path of the first problem.
    """
    if type(record) is TraceRecord:
        return
    check_record(record)
    problem = record_size_problem(record)
    if problem is not None:
        name, (path, message) = record["name"], problem
        raise TraceRecordError(f"Invalid {name} trace record at {path}: {message}")


def check_own_fields(
    record: Mapping[str, Any], own: Mapping[str, Any], *, payload_checked: bool = False
) -> None:
    """Check `record`, whose `version`, `name` and shared fields are known to be valid.

    `own` holds the record's other fields (the same values): only they are checked
    against the schema, then the rules on the whole record. This is `check_record` for
    a run's records, whose shared fields `shared_fields_valid` passed once for the run.

    Raises:
        TraceRecordError: as `check_record` does.
    """
    try:
        checker = _checker_for(record["name"], payload_checked, True)
        if (
            checker.is_valid(own)
            and record_problem(record, payload_checked=payload_checked) is None
        ):
            return
    except RecursionError:
        pass
    check_record(record, payload_checked=payload_checked)  # finds and words the problem


def check_record(record: Mapping[str, Any], *, payload_checked: bool = False) -> None:
    """Check `record` in full, whatever its type (see `validate_record`).

    With `payload_checked` the payload's own schema is skipped: for a payload already
    found valid (a cached one, or one built by a function that checks the same rules).
    """
    if not isinstance(record, dict):
        raise TraceRecordError(
            f"Invalid trace record at $: a record must be a dict, not {type(record).__name__}"
        )
    name = record.get("name")
    checker = _checker_for(name, payload_checked)
    try:
        if not checker.is_valid(record):
            violation = _first_error(checker, record)
            path, message = (
                ("$", "does not match the trace schema")
                if violation is None
                else (violation.path, _shorten(violation.message))
            )
            raise TraceRecordError(f"Invalid {name} trace record at {path}: {message}")
        problem = record_problem(record)
    except RecursionError:
        raise TraceRecordError(
            f"Invalid {name} trace record at $: values are nested too deeply"
        ) from None
    if problem is not None:
        raise TraceRecordError(f"Invalid {name} trace record at {problem[0]}: {problem[1]}")


def decode_record(record: Any) -> None:
    """Check a record read back from a store: `validate_record`, then its snapshot's hashes.

    A `pipeline.started` snapshot must hash to the identity it records, so an edited
    snapshot (say, agent limits changed after the run) is refused rather than trusted.
    Hashes are this library's (`sha256` over key-sorted JSON).

    Raises:
        TraceRecordError: as `validate_record` does, or naming the fingerprint that no
            longer matches the snapshot's content.
    """
    if type(record) is TraceRecord:  # a run's record was checked as it was built
        return
    validate_record(record)
    if record["name"] != "pipeline.started":
        return
    snapshot = record["payload"].get("definitionSnapshot")
    if snapshot is None:
        return
    try:
        computed = recomputed_identity(snapshot)
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as error:
        raise TraceRecordError(
            f"Invalid pipeline.started trace record at $.payload.definitionSnapshot: "
            f"cannot compute its fingerprints ({type(error).__name__})"
        ) from None
    field = identity_mismatch(snapshot, computed)
    if field is not None:
        recorded = snapshot["identity"].get(field)
        raise TraceRecordError(
            "Invalid pipeline.started trace record at $.payload.definitionSnapshot: "
            f"the snapshot does not match its {MISMATCH_WORDS[field]} (it records "
            f"{field} {recorded}, its content gives {computed[field]}): it was edited"
        )

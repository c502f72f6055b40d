"""The trace v3 wire format: limits, the shipped JSON Schema, and `validate_record`.

`trace-v3.schema.json` (next to this module) is the single definition of every record
kind. The emitter checks each record with `validate_record` before it leaves a run, and
both readers (NDJSON and SQLite) check each record they load with `decode_record`, which
also recomputes a definition snapshot's fingerprints.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from json.encoder import encode_basestring
from typing import Any, Protocol, runtime_checkable

from tubeless._fingerprint import MISMATCH_WORDS, identity_mismatch, recomputed_identity
from tubeless._quote import quote
from tubeless.errors import TraceRecordError
from tubeless.schema.lowlevel import SchemaChecker, compile_checker
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
    "RecordHead",
    "TraceRecord",
    "TraceSink",
    "check_own_fields",
    "check_record",
    "decode_record",
    "load_trace_schema",
    "payload_json",
    "record_line",
    "shared_field_json",
    "shared_fields_valid",
    "validate_record",
]

TRACE_VERSION = 3
"""The version every record is written with."""
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

TRACE_RECORD_NAMES = (
    "pipeline.started",
    "step.planned",
    "step.running",
    "step.attempted",
    "step.artifact",
    "pipeline.log",
    "step.complete",
    "step.skipped",
    "step.failed",
    "step.cancelled",
    "pipeline.finalize.started",
    "pipeline.finalize.completed",
    "pipeline.finalize.failed",
    "pipeline.completed",
)
"""Every record kind, in the order a run emits them."""


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


class TraceRecord(dict[str, Any]):
    """A record a run built and already checked, so sinks need not check it again.

    Records are shared by every sink and hook of a run: treat them as read-only.
    """

    __slots__ = ("_head", "_line", "_payload")
    _head: RecordHead
    _line: str
    _payload: str


_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_encode = _encoder.encode


def _reused_encoder() -> Callable[[Any], str]:
    """`_encode` without building an encoder per call: the C encoder `encode` builds, kept.

    It skips the circular-reference check, so a value it cannot encode (a cycle ends in
    `RecursionError`) goes through `_encode` again, which words the failure as before.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _encode
    try:
        # markers, default, encoder, indent, separators, sort_keys, skipkeys, allow_nan
        encoder = make(
            None, _encoder.default, encode_basestring, None, ":", ",", False, False, True
        )
    except TypeError:  # a Python whose C encoder takes other arguments
        return _encode
    join = "".join

    def encode(value: Any) -> str:
        try:
            return join(encoder(value, 0))
        except Exception:
            return _encode(value)

    return encode


_fast_encode = _reused_encoder()

_TEXT_LIMIT = 4096
_KEY_TEXTS: dict[str, str] = {}
"""`,"key":` for every field name after the head that a run's record has carried."""
_NAME_TEXTS = {name: f'"name":{_encode(name)},' for name in TRACE_RECORD_NAMES}
_MEMO_KINDS = frozenset({"step.planned", "pipeline.started"})
"""Kinds whose payload object the library builds once per plan and sends with every run."""
_memo_texts: dict[int, tuple[Any, str]] = {}
"""The JSON of payload objects of `_MEMO_KINDS`, by identity (the object is kept alive)."""


def _key_text(key: str) -> str:
    text = _KEY_TEXTS.get(key)
    if text is None:
        text = f",{encode_basestring(key)}:"
        if len(_KEY_TEXTS) < _TEXT_LIMIT:
            _KEY_TEXTS[key] = text
    return text


def _payload_text(name: str, payload: Any) -> str:
    """The JSON of a run's record payload; a plan's shared payload object is encoded once."""
    if not payload and type(payload) is dict:
        return "{}"
    if name not in _MEMO_KINDS:
        return _fast_encode(payload)
    known = _memo_texts.get(id(payload))
    if known is not None and known[0] is payload:
        return known[1]
    text = _fast_encode(payload)
    if type(payload) is dict and "definitionSnapshot" not in payload:
        if len(_memo_texts) >= _TEXT_LIMIT:
            _memo_texts.clear()
        _memo_texts[id(payload)] = (payload, text)
    return text


class RecordHead:
    """The fields every record of one run starts with, their JSON encoded once (lazily).

    `record(name)` starts a record: `version`, `name`, then the run's shared fields.
    A record's line is put together from JSON text encoded once where it can be: the
    head, the field names, and the payload object of a `step.planned` or
    `pipeline.started` record, which the library builds once per plan and sends with
    every run of it (so such an object must not change once sent). Other values are
    encoded per record; the line is the same text `json.dumps` gives the whole record.
    """

    __slots__ = ("_count", "_field_texts", "_fields", "_json", "row_columns")

    def __init__(self, shared: Mapping[str, Any]) -> None:
        self._fields = {"version": TRACE_VERSION, "name": None, **shared}
        self._count = len(self._fields)
        self._json: str | None = None
        self._field_texts: dict[str, str] = {}
        self.row_columns: Any = None
        """The SQLite store's columns for these fields, worked out once (`_sqlite_rows`)."""

    def field_json(self, key: str) -> str:
        """The compact JSON of the shared field `key`, encoded once for the run."""
        text = self._field_texts.get(key)
        if text is None:
            text = self._field_texts[key] = _fast_encode(self._fields[key])
        return text

    @property
    def fields(self) -> dict[str, Any]:
        """The head fields, `name` a placeholder: `record(name)` is a `TraceRecord` of these
        with `name` set and `_head` this head (read-only; emitters may inline that)."""
        return self._fields

    def record(self, name: str) -> TraceRecord:
        """A new record named `name` holding the head fields (its own fields follow)."""
        record = TraceRecord(self._fields)
        record["name"] = name
        record._head = self
        return record

    def line(self, record: TraceRecord) -> str:
        """`record`'s NDJSON line, from the head's JSON and each own field's."""
        shared = self._json
        if shared is None:
            fields = dict(itertools.islice(self._fields.items(), 2, None))
            shared = self._json = _fast_encode(fields)[1:-1]
        version, name = record["version"], record["name"]
        own = itertools.islice(record.items(), self._count, None)
        if type(version) is not int or name not in _NAME_TEXTS:
            text = _encode(dict(own))[1:]
            return f'{{"version":{version},"name":{_encode(name)},{shared},{text}\n'
        parts = ['{"version":', int.__repr__(version), ",", _NAME_TEXTS[name], shared]
        append, keys = parts.append, _KEY_TEXTS
        for key, value in own:
            append(keys.get(key) or _key_text(key))
            kind = type(value)
            if kind is str:
                append(encode_basestring(value))
            elif kind is int:
                append(int.__repr__(value))
            elif key == "payload":
                text = record._payload = _payload_text(name, value)
                append(text)
            else:
                append(_fast_encode(value))
        append("}\n")
        return "".join(parts)


def record_line(record: Mapping[str, Any]) -> str:
    """Return `record` as one compact NDJSON line, newline included.

    A run's record is encoded once, however many sinks write it.
    """
    if type(record) is not TraceRecord:
        return _encode(record) + "\n"
    line: str | None = getattr(record, "_line", None)
    if line is None:
        head: RecordHead | None = getattr(record, "_head", None)
        line = _encode(record) + "\n" if head is None else head.line(record)
        record._line = line
    return line


def shared_field_json(record: Mapping[str, Any], key: str) -> str:
    """Return the compact JSON of `record[key]`; a run's shared field is encoded once."""
    head: RecordHead | None = getattr(record, "_head", None)
    if type(record) is TraceRecord and head is not None and key in SHARED_FIELDS:
        return head.field_json(key)
    return _encode(record[key])


def payload_json(record: Mapping[str, Any]) -> str:
    """Return the compact JSON of `record["payload"]`; a run's record encodes it once.

    After its line was encoded, a run's record gives the payload text that line holds.
    """
    payload = record["payload"]
    if type(record) is not TraceRecord:
        return "{}" if not payload and type(payload) is dict else _encode(payload)
    text: str | None = getattr(record, "_payload", None)
    if text is None:
        text = record._payload = _payload_text(record["name"], payload)
    return text


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
    validate_record(record)
    if type(record) is TraceRecord or record["name"] != "pipeline.started":
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

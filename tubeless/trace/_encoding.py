"""A run's trace records and their JSON text: the one place a record is encoded.

A run builds each record once, as a `TraceRecord` started from its run's `RecordHead`,
and hands that one object to its sink and hooks. A sink that writes text asks
`encode(record)` for the record's `EncodedRecord` (its NDJSON line and its payload's
JSON), which a run's record makes once however many sinks write it; any other record
is encoded whole each time. The text is always what `json.dumps` gives with compact
separators and `ensure_ascii=False`, made with the standard library's public `json` API.

Nothing outside this module reads what a `TraceRecord` keeps besides its items: sinks
use `encode`, `payload_json`, `shared_field_json` and `kept_record`.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = [
    "TRACE_RECORD_NAMES",
    "TRACE_VERSION",
    "EncodedRecord",
    "RecordHead",
    "SharedPayload",
    "TraceRecord",
    "encode",
    "json_text",
    "kept_record",
    "payload_json",
    "shared_field_json",
]

TRACE_VERSION = 3
"""The version every record is written with."""

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

_checked = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_unchecked = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, check_circular=False
).encode
"""The stdlib's compact JSON without tracking every container: twice as fast on a
progress payload's rows. A cycle then ends in `RecursionError`, which `_encode` words."""


def _encode(value: Any) -> str:
    """The stdlib's compact JSON of `value` (it builds a C encoder per call, but a string's).

    Raises:
        TypeError, ValueError, RecursionError: as `json.dumps` does.
    """
    try:
        return _unchecked(value)
    except RecursionError:
        return _checked(value)  # "Circular reference detected", as `json.dumps` says


_TEXT_LIMIT = 4096
_KEY_TEXTS: dict[str, str] = {}
"""`,"key":` for the field names encoded so far: a record's own and a flat payload's."""
_RUN_STRING_LIMIT = 256
"""At most this many string values' JSON kept per run."""
_STARTS = {
    name: f'{{"version":{TRACE_VERSION},"name":{_encode(name)},' for name in TRACE_RECORD_NAMES
}
"""Each record kind's line start, up to its shared fields (a record of another version or
name is encoded whole)."""


class EncodedRecord(NamedTuple):
    """A record's compact JSON text, made once: what the sinks that write text store."""

    line: str
    """The whole record as one NDJSON line, newline included."""
    payload: str
    """The JSON of the record's `payload` (the same text the line holds)."""


def _encoded(line: str, payload: str) -> EncodedRecord:
    """`EncodedRecord(line, payload)` without the Python-level `__new__` a named tuple has."""
    return tuple.__new__(EncodedRecord, (line, payload))


class SharedPayload(dict[str, Any]):
    """A JSON object sent unchanged with many records: its JSON is made once.

    A plan's `step.planned` and `pipeline.started` payloads go out with every run of the
    plan; the library builds each once per plan as a `SharedPayload`, which must not
    change once built. A subclass may be an item of a list inside a payload (a settled
    progress row, in every later snapshot of its step): the list's text reuses its JSON.
    """

    __slots__ = ("_json",)
    _json: str


class TraceRecord(dict[str, Any]):
    """A record a run built and already checked, so sinks need not check it again.

    A run hands one such record to its sink and every hook: treat it as read-only (its
    JSON text is made once, when the first sink asks for it).
    """

    __slots__ = ("_encoded", "_head")
    _encoded: EncodedRecord | None
    _head: RecordHead


class RecordHead:
    """The fields every record of one run starts with, their JSON encoded once (lazily).

    `record(name)` starts a record: `version`, `name`, then the run's shared fields; the
    record's own fields follow. Its line is put together from the head's JSON, each own
    field name's and each own value's, and is the text `json.dumps` gives the record.
    """

    __slots__ = ("_count", "_field_texts", "_fields", "_json", "_string_texts")

    def __init__(self, shared: Mapping[str, Any]) -> None:
        self._fields = {"version": TRACE_VERSION, "name": None, **shared}
        self._count = len(self._fields)
        self._json: str | None = None
        """The shared fields' JSON members, `"pipelineId":...,"runId":...`."""
        # Made when first used: a run traced into memory alone never needs them.
        self._field_texts: dict[str, str] | None = None
        self._string_texts: dict[str, str] | None = None
        """The JSON of string values the run's records repeat (step and attempt ids)."""

    @property
    def fields(self) -> dict[str, Any]:
        """The head fields, `name` a placeholder (read-only)."""
        return self._fields

    def field_json(self, key: str) -> str:
        """The compact JSON of the shared field `key`, encoded once for the run."""
        texts = self._field_texts
        if texts is None:
            texts = self._field_texts = {}
        text = texts.get(key)
        if text is None:
            text = texts[key] = json_text(self._fields[key])
        return text

    def record(self, name: str) -> TraceRecord:
        """A new record named `name` holding the head fields (its own fields follow)."""
        record = TraceRecord(self._fields)
        record["name"] = name
        record._head = self
        record._encoded = None  # set: reading an unset slot raises inside `getattr`
        return record

    def _shared_json(self) -> str:
        """The shared fields' JSON members, put together from each one's (no encoder to set
        up: every child run, a tool call's included, has a head of its own)."""
        shared = itertools.islice(self._fields.items(), 2, None)
        parts = []
        for key, value in shared:
            if type(key) is not str:
                return _encode(dict(itertools.islice(self._fields.items(), 2, None)))[1:-1]
            parts.append(_KEY_TEXTS.get(key) or _key_text(key))
            parts.append("null" if value is None else json_text(value))
        return "".join(parts)[1:]

    def encode(self, record: TraceRecord) -> EncodedRecord:
        """`record`'s text, from the head's JSON and each own field's."""
        shared = self._json
        if shared is None:
            shared = self._json = self._shared_json()
        payload_text = _payload_text(record["payload"])
        version, start = record["version"], _STARTS.get(record["name"])
        if start is None or type(version) is not int or version != TRACE_VERSION or not shared:
            return _encoded(_encode(record) + "\n", payload_text)
        parts = [start, shared]
        append, keys, strings = parts.append, _KEY_TEXTS, self._string_texts
        if strings is None:
            strings = self._string_texts = {}
        for key, value in itertools.islice(record.items(), self._count, None):
            append(keys.get(key) or _key_text(key))
            kind = type(value)
            if key == "payload":
                append(payload_text)
            elif kind is str:
                text = strings.get(value)
                if text is None:
                    text = _unchecked(value)
                    if len(strings) < _RUN_STRING_LIMIT:
                        strings[value] = text
                append(text)
            elif kind is int:
                append(int.__repr__(value))
            else:
                append(json_text(value))
        append("}\n")
        return _encoded("".join(parts), payload_text)


def _key_text(key: str) -> str:
    text = _KEY_TEXTS.get(key)
    if text is None:
        text = f",{_encode(key)}:"
        if len(_KEY_TEXTS) < _TEXT_LIMIT:
            _KEY_TEXTS[key] = text
    return text


def encode(record: Mapping[str, Any]) -> EncodedRecord:
    """Return `record`'s compact JSON text; a run's record is encoded once.

    Raises:
        TypeError, ValueError, RecursionError: as `json.dumps` does for a value that is
            not JSON.
    """
    if type(record) is not TraceRecord:
        return _encoded(_encode(record) + "\n", _payload_text(record["payload"]))
    try:
        encoded = record._encoded
        head: RecordHead | None = record._head
    except AttributeError:  # made as a `TraceRecord`, not by `RecordHead.record`
        encoded = getattr(record, "_encoded", None)
        head = getattr(record, "_head", None)
    if encoded is None:
        if head is None:
            encoded = _encoded(_encode(record) + "\n", _payload_text(record["payload"]))
        else:
            encoded = head.encode(record)
        record._encoded = encoded
    return encoded


def _payload_text(payload: Any) -> str:
    if type(payload) is SharedPayload:
        return _shared_text(payload)
    return json_text(payload)


def _shared_text(shared: SharedPayload) -> str:
    try:
        return shared._json
    except AttributeError:  # not encoded yet
        text = shared._json = _encode(shared)
        return text


def _other_text(value: Any) -> str:
    """`_encode(value)`; a list's and a `SharedPayload`'s reuse the JSON of those they hold."""
    if type(value) is list:
        return _list_text(value)
    if isinstance(value, SharedPayload):
        return _shared_text(value)
    return _encode(value)


def _list_text(value: list[Any]) -> str:
    """`_encode(value)`, each `SharedPayload` item's JSON reused, each run of others
    encoded at once (the stdlib's encoder costs about one small dict's text to set up)."""
    texts: list[str] = []
    start = 0
    for index, item in enumerate(value):
        if isinstance(item, SharedPayload):
            if start < index:
                texts.append(_items_text(value[start:index]))
            texts.append(_shared_text(item))
            start = index + 1
    if not start:
        return "[" + json_text(value[0]) + "]" if len(value) == 1 else _encode(value)
    if start < len(value):
        texts.append(_items_text(value[start:]))
    return "[" + ",".join(texts) + "]"


def _items_text(items: list[Any]) -> str:
    """The JSON of `items` without its brackets."""
    if len(items) == 1:
        return json_text(items[0])
    return _encode(items)[1:-1]


def json_text(value: Any) -> str:
    """Return `value` as compact JSON: `json.dumps(value, separators=(",", ":"),
    ensure_ascii=False)`, byte for byte.

    A string, an integer and a dict (most payloads) are put together here, a dict's
    strings, integers, booleans, `None` and dicts alike: for each other value (a list, a
    float) the stdlib builds an encoder, which costs more than a small object's text.

    Raises:
        TypeError, ValueError, RecursionError: as `json.dumps` does.
    """
    kind = type(value)
    if kind is str:
        return _unchecked(value)
    if kind is int:
        return int.__repr__(value)
    if kind is not dict:
        return _encode(value)
    try:
        return _dict_text(value)
    except RecursionError:
        return _encode(value)  # words a cycle as `json.dumps` does


def _dict_text(value: dict[Any, Any]) -> str:
    """`_encode(value)` of a dict, put together here (see `json_text`)."""
    if not value:
        return "{}"
    parts: list[str] = []
    append, keys = parts.append, _KEY_TEXTS
    for key, item in value.items():
        key_text = keys.get(key) if type(key) is str else None
        if key_text is None:
            if type(key) is not str:
                return _encode(value)
            key_text = _key_text(key)
        kind = type(item)
        if kind is str:
            append(key_text + _unchecked(item))
        elif kind is int:
            append(key_text + int.__repr__(item))
        elif kind is dict:
            append(key_text + _dict_text(item))
        elif item is None:
            append(key_text + "null")
        elif kind is bool:
            append(key_text + ("true" if item else "false"))
        else:
            append(key_text + _other_text(item))
    parts[0] = "{" + parts[0][1:]
    append("}")
    return "".join(parts)


def payload_json(record: Mapping[str, Any]) -> str:
    """Return the compact JSON of `record["payload"]`, without encoding the whole record.

    A run's record that `encode` encoded already gives the text its line holds.
    """
    if type(record) is TraceRecord:
        encoded: EncodedRecord | None = getattr(record, "_encoded", None)
        if encoded is not None:
            return encoded.payload
    return _payload_text(record["payload"])


def shared_field_json(record: Mapping[str, Any], key: str) -> str:
    """Return the compact JSON of `record[key]`; a run's shared field is encoded once a run."""
    if type(record) is TraceRecord:
        head: RecordHead | None = getattr(record, "_head", None)
        if head is not None and key in head.fields and key != "name":
            return head.field_json(key)
    return json_text(record[key])


def kept_record(record: dict[str, Any]) -> dict[str, Any]:
    """Return `record` as a sink may keep it: a run's own record as it is (it never
    changes once built), any other record deep-copied, so the caller's later changes to
    it do not show."""
    return record if type(record) is TraceRecord else copy.deepcopy(record)

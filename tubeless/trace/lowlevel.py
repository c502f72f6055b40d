"""The trace package's internal API for the code that writes records (the seam).

Who may use it: `tubeless.pipeline`, whose run observer builds every record. Other
packages use the public `tubeless.trace`; applications should not import this module:
it is not part of the public API and may change in any release.

What it promises, for as long as a name is listed here:

- `check_record(record, payload_checked=...)` raises `TraceRecordError` for a record the
  trace schema or its extra rules reject (`payload_checked=True` skips the payload's
  schema, for payloads built to it and checked once per plan).
- `check_own_fields(record, own, payload_checked=...)` checks the same but trusts the
  shared fields, which `shared_fields_valid(shared)` checked once per run.
- `json_bytes(value)` is the size the trace limits count: compact UTF-8 JSON.
"""

from tubeless.trace._rules import json_bytes
from tubeless.trace._wire import check_own_fields, check_record, shared_fields_valid

__all__ = [
    "check_own_fields",
    "check_record",
    "json_bytes",
    "shared_fields_valid",
]

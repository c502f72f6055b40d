"""The trace package's internal API for the code that writes records (the seam).

Who may use it: `tubeless.pipeline`, whose run observer builds every record, and
`tubeless.testing`. Other
packages use the public `tubeless.trace`; applications should not import this module:
it is not part of the public API and may change in any release.

What it promises, for as long as a name is listed here:

- `check_record(record, payload_checked=...)` raises `TraceRecordError` for a record the
  trace schema or its extra rules reject (`payload_checked=True` skips the payload's
  schema, for payloads built to it and checked once per plan).
- `check_own_fields(record, own, payload_checked=...)` checks the same but trusts the
  shared fields, which `shared_fields_valid(shared)` checked once per run; there
  `payload_checked=True` also skips the payload's extra rules, for payloads whose builder
  enforces them (`progress_payload`, `attempt_payload`) or that passed once per plan.
- `json_bytes(value)` is the size the trace limits count: compact UTF-8 JSON;
  `record_size_problem(record)` says why a record would not encode to a line a reader
  takes (for records whose clock readings are not plain integers).
- `bounded_text(text, limit)` cuts outside text to `limit` characters and escapes lone
  surrogates; `bounded_error(error)` cuts an error's wire form to the trace limits and
  `TRACE_ERROR_BYTE_BUDGET`, so a record built with it never breaks a size rule.
- `RecordHead(shared)` starts each record of a run (`head.record(name)`) from its shared
  fields, whose JSON it encodes once for every line written of the run's records.
- `SharedPayload(payload)` is a payload sent unchanged with many records (a plan's
  `step.planned` and `pipeline.started` payloads), whose JSON is then encoded once.
- `kept_record(record)` is `record` as a sink may keep it: a run's own record as it is,
  anything else deep-copied (`tubeless.testing`'s memory sink).
- `error_code(error)` is the most specific code of a wire error (the deepest that is
  not a wrapper such as `TUBELESS_STEP_FAILED`).
- `TRACE_ATTRIBUTE_LIMIT` is the most attributes a `step.attempted` record may carry.
"""

from tubeless.trace._bounds import TRACE_ERROR_BYTE_BUDGET, bounded_error, bounded_text
from tubeless.trace._encoding import RecordHead, SharedPayload, kept_record
from tubeless.trace._events import error_code
from tubeless.trace._rules import TRACE_ATTRIBUTE_LIMIT, json_bytes, record_size_problem
from tubeless.trace._wire import check_own_fields, check_record, shared_fields_valid

__all__ = [
    "TRACE_ATTRIBUTE_LIMIT",
    "TRACE_ERROR_BYTE_BUDGET",
    "RecordHead",
    "SharedPayload",
    "bounded_error",
    "bounded_text",
    "check_own_fields",
    "check_record",
    "error_code",
    "json_bytes",
    "kept_record",
    "record_size_problem",
    "shared_fields_valid",
]

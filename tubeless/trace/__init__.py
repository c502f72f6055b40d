"""Trace records (wire format v3), their sinks and readers, and the fold behind run views."""

from tubeless.trace._compose import ComposedTraceSink, compose_sinks
from tubeless.trace._ndjson import NdjsonTraceSink, read_ndjson
from tubeless.trace._projection import (
    RunFold,
    StepFold,
    StoredAttempt,
    StoredLog,
    StoredRun,
    StoredStep,
    format_run_detail,
    format_run_list,
    project_runs,
)
from tubeless.trace._sqlite import SqliteTraceStore
from tubeless.trace._wire import (
    TRACE_DETAIL_BYTE_LIMIT,
    TRACE_LIST_LIMIT,
    TRACE_READ_VERSIONS,
    TRACE_RECORD_NAMES,
    TRACE_STRING_LIMIT,
    TRACE_VERSION,
    TraceRecord,
    TraceSink,
    load_trace_schema,
    validate_record,
)

__all__ = [
    "TRACE_DETAIL_BYTE_LIMIT",
    "TRACE_LIST_LIMIT",
    "TRACE_READ_VERSIONS",
    "TRACE_RECORD_NAMES",
    "TRACE_STRING_LIMIT",
    "TRACE_VERSION",
    "ComposedTraceSink",
    "NdjsonTraceSink",
    "RunFold",
    "SqliteTraceStore",
    "StepFold",
    "StoredAttempt",
    "StoredLog",
    "StoredRun",
    "StoredStep",
    "TraceRecord",
    "TraceSink",
    "compose_sinks",
    "format_run_detail",
    "format_run_list",
    "load_trace_schema",
    "project_runs",
    "read_ndjson",
    "validate_record",
]

"""Trace records (wire format v3), their sinks and readers, and the fold behind run views."""

import importlib as _importlib
import typing as _typing

from tubeless._public import show_public_module as _show_public_module
from tubeless.trace._agent_history import (
    AgentCallView,
    AgentHistory,
    AgentTurnView,
    AgentView,
    agent_history,
    failed_call_counts,
    format_agent_history,
)
from tubeless.trace._compose import ComposedTraceSink, compose_sinks
from tubeless.trace._encoding import TraceRecord
from tubeless.trace._events import EventKind, EventProjection, RunEvent
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
from tubeless.trace._rules import TRACE_MESSAGE_LIMIT, TRACE_RECORD_BYTE_LIMIT
from tubeless.trace._wire import (
    TRACE_DETAIL_BYTE_LIMIT,
    TRACE_LIST_LIMIT,
    TRACE_READ_VERSIONS,
    TRACE_RECORD_NAMES,
    TRACE_STRING_LIMIT,
    TRACE_VERSION,
    TraceSink,
    load_trace_schema,
    validate_record,
)

if _typing.TYPE_CHECKING:
    from tubeless.trace._postgres_trace import PostgresTraceStore
    from tubeless.trace._sqlite import SqliteTraceStore

__all__ = [
    "TRACE_DETAIL_BYTE_LIMIT",
    "TRACE_LIST_LIMIT",
    "TRACE_MESSAGE_LIMIT",
    "TRACE_READ_VERSIONS",
    "TRACE_RECORD_BYTE_LIMIT",
    "TRACE_RECORD_NAMES",
    "TRACE_STRING_LIMIT",
    "TRACE_VERSION",
    "AgentCallView",
    "AgentHistory",
    "AgentTurnView",
    "AgentView",
    "ComposedTraceSink",
    "EventKind",
    "EventProjection",
    "NdjsonTraceSink",
    "PostgresTraceStore",
    "RunEvent",
    "RunFold",
    "SqliteTraceStore",
    "StepFold",
    "StoredAttempt",
    "StoredLog",
    "StoredRun",
    "StoredStep",
    "TraceRecord",
    "TraceSink",
    "agent_history",
    "compose_sinks",
    "failed_call_counts",
    "format_agent_history",
    "format_run_detail",
    "format_run_list",
    "load_trace_schema",
    "project_runs",
    "read_ndjson",
    "validate_record",
]

_show_public_module(__name__, __all__, globals())


# The stores load when first used (PEP 562): sqlite3, and psycopg when connecting.
_LAZY = {
    "PostgresTraceStore": "tubeless.trace._postgres_trace",
    "SqliteTraceStore": "tubeless.trace._sqlite",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_LAZY[name]), name)
    _show_public_module(__name__, [name], {name: value})
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

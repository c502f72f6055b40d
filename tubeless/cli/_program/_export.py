"""`tubeless export otel`: replay stored runs to an OTLP/HTTP endpoint (read-only on the store)."""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tubeless.cli._exit import ExitCode
from tubeless.cli._program._stores import open_trace_reader
from tubeless.errors import (
    CliLoadError,
    CliUsageError,
    MissingExtraError,
    TraceSinkError,
    TraceStoreError,
)
from tubeless.progress import sanitize_terminal_text

__all__ = ["handle_export", "run_tree"]

_QUOTE_LIMIT = 200


def _quoted(text: str) -> str:
    return f'"{sanitize_terminal_text(text[:_QUOTE_LIMIT])}"'


def _read(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    from tubeless.trace import read_ndjson

    if arguments.trace is not None:
        path = Path.cwd() / arguments.trace
        if not path.exists():
            raise CliLoadError(f"Trace file not found at {path}")
        return read_ndjson(path)
    with open_trace_reader(arguments.store) as store:
        records: list[dict[str, Any]] = store.events()
        return records


def run_tree(records: Sequence[Mapping[str, Any]], run_id: str) -> list[Mapping[str, Any]]:
    """The records of the whole run tree holding `run_id` (its root and every descendant).

    Raises:
        CliUsageError: when no record has `run_id`.
    """
    parents: dict[str, str | None] = {}
    for record in records:
        parents.setdefault(record["runId"], record.get("parentRunId"))
    if run_id not in parents:
        raise CliUsageError([f"Unknown run {_quoted(run_id)}."])

    def root(run: str) -> str:
        seen = {run}
        parent = parents.get(run)
        while parent is not None and parent in parents and parent not in seen:
            run, parent = parent, parents.get(parent)
            seen.add(run)
        return run

    wanted = root(run_id)
    roots: dict[str, str] = {}
    return [r for r in records if roots.setdefault(r["runId"], root(r["runId"])) == wanted]


def _endpoint(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        quoted = _quoted(value)
        raise CliUsageError([f"--endpoint must be an http:// or https:// URL, not {quoted}."])
    return value


def handle_export(arguments: argparse.Namespace) -> int:
    """Send the spans of the stored runs (or of RUN_ID's run tree) to the OTLP endpoint.

    Raises:
        CliLoadError: when the store or trace is missing or unreadable, or the `otel`
            extra is not installed.
        CliUsageError: for an unknown run id or a malformed endpoint.
        TraceExportError: when the endpoint refuses the spans or never answers.
    """
    endpoint = _endpoint(arguments.endpoint)
    try:
        from tubeless.trace.otel import export_records
    except MissingExtraError as error:
        raise CliLoadError(str(error)) from error
    try:
        records: Sequence[Mapping[str, Any]] = _read(arguments)
    except (TraceStoreError, TraceSinkError) as error:
        raise CliLoadError(str(error)) from error
    if arguments.run_id is not None:
        records = run_tree(records, arguments.run_id)
    try:
        count = export_records(records, endpoint=endpoint)
    except MissingExtraError as error:
        raise CliLoadError(str(error)) from error
    runs = len({record["runId"] for record in records})
    sys.stdout.write(f"Exported {count} spans of {runs} runs.\n")
    sys.stdout.flush()
    return ExitCode.SUCCESS

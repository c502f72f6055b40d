"""`tubeless history`: recorded runs from a SQLite store or an NDJSON trace (read-only)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from tubeless._quote import quote
from tubeless.cli._exit import ExitCode
from tubeless.cli._program._parser import DEFAULT_STORE
from tubeless.cli._program._stores import open_trace_reader
from tubeless.errors import (
    CliLoadError,
    CliUsageError,
    TornTraceWarning,
    TraceSinkError,
    TraceStoreError,
)

__all__ = ["handle_history"]


def _read_events(arguments: argparse.Namespace) -> list[tuple[int, dict[str, Any]]]:
    from tubeless.trace import read_ndjson

    cwd = Path.cwd()
    if arguments.trace is not None:
        path = cwd / arguments.trace
        if not path.exists():
            raise CliLoadError(f"Trace file not found at {path}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TornTraceWarning)
            rows = list(enumerate(read_ndjson(path, tolerate_torn_tail=True)))
        for warning in caught:
            sys.stderr.write(f"warning: {warning.message}\n")
        if arguments.run_id is not None:
            rows = [
                (row_id, record) for row_id, record in rows if record["runId"] == arguments.run_id
            ]
        return rows
    with open_trace_reader(arguments.store or DEFAULT_STORE) as store:
        stored: list[tuple[int, dict[str, Any]]] = store.event_rows(run_id=arguments.run_id)
        return stored


def _all_records(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    """Every record of the store or trace: a run's agent tree spans many runs."""
    return [
        record
        for _, record in _read_events(argparse.Namespace(**{**vars(arguments), "run_id": None}))
    ]


def _newest_first(runs: list[Any], limit: int | None) -> list[Any]:
    """Run trees newest first, each root followed by its child runs in recorded order.

    A tree's place is its root run's start time (a tie: the tree recorded later first);
    `limit` counts trees, so `--limit 1` is the last run with its turns and tool calls.
    """
    by_id = {run.run_id: run for run in runs}

    def root_of(run: Any) -> str:
        seen = {run.run_id}
        while run.parent_run_id in by_id and run.parent_run_id not in seen:
            run = by_id[run.parent_run_id]
            seen.add(run.run_id)
        return str(run.run_id)

    trees: dict[str, list[Any]] = {}
    for run in runs:
        trees.setdefault(root_of(run), []).append(run)
    # Sorting is stable: reversing first puts the tree recorded later first in a tie.
    later_first = list(trees)[::-1]
    roots = sorted(later_first, key=lambda key: by_id[key].started_at_ms, reverse=True)
    if limit is not None:
        roots = roots[:limit]
    return [run for root in roots for run in trees[root]]


def _summary(run: Any, failed_calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runId": run.run_id,
        "pipelineId": run.pipeline_id,
        "startedAtMs": run.started_at_ms,
        "status": run.status,
    }
    if run.duration_ms is not None:
        out["durationMs"] = run.duration_ms
    if failed_calls:
        out["failedCalls"] = failed_calls
    return out


def _full_run_id(arguments: argparse.Namespace) -> argparse.Namespace:
    """`arguments` with a bare run UUID (no `PIPELINE:` prefix) made the full run id.

    A run id is `<pipeline id>:<uuid>`; the UUID alone names one run too. An id that
    matches no run's UUID is kept as it is (and reported unknown).

    Raises:
        CliUsageError: when the UUID ends several recorded run ids.
    """
    bare = arguments.run_id
    if bare is None or ":" in bare:
        return arguments
    found = sorted({record["runId"] for record in _all_records(arguments)})
    matches = [run_id for run_id in found if run_id.rpartition(":")[2] == bare]
    if len(matches) > 1:
        shown = ", ".join(quote(match) for match in matches[:8])
        raise CliUsageError([f"Run id {quote(bare)} is ambiguous: {shown}."])
    if not matches:
        return arguments
    return argparse.Namespace(**{**vars(arguments), "run_id": matches[0]})


def _source_name(arguments: argparse.Namespace) -> str:
    if arguments.trace is not None:
        return str(arguments.trace)
    return str(arguments.store or DEFAULT_STORE)


def _unknown_run(run_id: str) -> CliUsageError:
    return CliUsageError([f'Unknown run "{run_id}".'])


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _write_list(arguments: argparse.Namespace, runs: list[Any], counts: Any) -> None:
    """The run list: JSON, one line per run, or a line saying the source holds none."""
    from tubeless.trace import format_run_list

    listed = _newest_first(runs, arguments.limit)
    if arguments.json:
        summaries = [_summary(run, counts.get(run.run_id, 0)) for run in listed]
        _write(json.dumps({"runs": summaries}, indent=2, ensure_ascii=False) + "\n")
    elif not listed:
        _write(f"No runs recorded in {_source_name(arguments)}.\n")
    else:
        _write(format_run_list(listed, counts))


def handle_history(arguments: argparse.Namespace) -> int:
    """List recorded runs, show one, or print raw events; never creates or changes a store.

    The list is newest first (each run followed by its child runs), cut to `--limit`
    runs; an agent run shows how many of its tool calls failed. `--limit` does not apply
    to `--events` or to one run's detail.

    Raises:
        CliLoadError: when the store or trace is missing or unreadable.
        CliUsageError: for an unknown run id.
    """
    from tubeless.trace import (
        agent_history,
        failed_call_counts,
        format_agent_history,
        format_run_detail,
        project_runs,
    )

    try:
        arguments = _full_run_id(arguments)
        rows = _read_events(arguments)
    except (TraceStoreError, TraceSinkError) as error:
        raise CliLoadError(str(error)) from error
    run_id = arguments.run_id
    if arguments.events:
        if run_id is not None and not rows:
            raise _unknown_run(run_id)
        encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        _write("".join(encode({"id": row_id, **record}) + "\n" for row_id, record in rows))
        return ExitCode.SUCCESS
    runs = project_runs([record for _, record in rows], [row_id for row_id, _ in rows])
    if run_id is None:
        _write_list(arguments, runs, failed_call_counts(record for _, record in rows))
        return ExitCode.SUCCESS
    found = next((run for run in runs if run.run_id == run_id), None)
    if found is None:
        raise _unknown_run(run_id)
    tree = agent_history(_all_records(arguments), run_id)
    if arguments.json:
        shown = found.to_dict()
        if tree is not None:
            shown["agentHistory"] = tree.to_dict()
        _write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
    else:
        _write(format_run_detail(found))
        if tree is not None:
            _write("\nAgent tree:\n" + format_agent_history(tree))
    return ExitCode.SUCCESS

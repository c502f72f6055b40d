"""A run killed with SIGKILL leaves the same records in its SQLite store as in its NDJSON trace."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tubeless.trace import SqliteTraceStore, read_ndjson

SLOW_AGENT = """
import pathlib
import time

from tubeless import define_agent, define_pipeline_command, define_tool

NOTHING = {"type": "object"}


def slow(value, context):
    if value["last"]:
        pathlib.Path("marker").write_text("started")
        time.sleep(600)
    time.sleep(0.2)
    return {"done": True}


def decide(state, context):
    call = {"id": f"c{context.turn}", "tool": "slow", "input": {"last": context.turn == 4}}
    return {"kind": "continue", "calls": [call]}


agent = define_agent(
    id="slow",
    input_schema=NOTHING,
    result_schema={},
    tools={
        "slow": define_tool(description="Slow.", input_schema=NOTHING, output_schema={}, run=slow)
    },
    initial_state=lambda options: {},
    decide=decide,
    reduce=lambda state, outcomes: state,
)
command = define_pipeline_command(agent, reporter=False)
"""


def _stored(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as connection:
        try:
            row = connection.execute("SELECT count(*) FROM pipeline_run_events").fetchone()
        except sqlite3.OperationalError:  # the table is not created yet
            return 0
    return int(row[0])


def _traced(path: Path) -> int:
    if not path.exists():
        return 0
    return path.read_bytes().count(b"\n")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_killed_slow_run_leaves_the_same_records_in_both_sinks(cli: Any) -> None:
    """Records of slow tool calls reach the store as they happen; a SIGKILL loses none of them."""
    cli.write("agent.py", SLOW_AGENT)
    process = cli.spawn("run", "--trace", "run.ndjson", "--store", "runs.db", "agent.py")
    trace, store = cli.directory / "run.ndjson", cli.directory / "runs.db"
    try:
        deadline = time.monotonic() + 60
        while not (cli.directory / "marker").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the last call never started"
            time.sleep(0.05)
        # The last call sleeps: nothing more is emitted, so both sinks settle. Before the
        # time-bounded flush, the store stayed empty here until 64 records had come.
        while _stored(store) == 0 or _stored(store) != _traced(trace):
            assert time.monotonic() < deadline, (_stored(store), _traced(trace))
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
    ndjson = read_ndjson(trace, tolerate_torn_tail=True)
    with SqliteTraceStore(store, read_only=True) as reader:
        stored = reader.events()
    assert len(ndjson) > 20  # four finished turns of records, and the fifth begun
    assert stored == ndjson
    listed = cli("history", "--store", "runs.db")
    assert listed.code == 0
    assert any(line.startswith("slow:") for line in listed.stdout.splitlines())

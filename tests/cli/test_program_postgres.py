"""Every `--store` of the CLI takes a `postgresql://` URL: `run`, `history`, `approvals`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tubeless.trace import PostgresTraceStore

pytestmark = pytest.mark.slow


def test_runs_recorded_at_a_url_are_listed_and_shown_by_history(
    cli: Any, postgres_url: str
) -> None:
    """`run --store URL` appends to the database; `history --store URL` lists and shows it."""
    cli.write_fixture("greet")
    for name in ("Ada", "Bob"):
        result = cli("run", "--store", postgres_url, "greet.py", "--", "--name", name)
        assert result.code == 0, result.stderr
    assert not list(cli.directory.glob("postgresql*"))  # no file was made of the URL
    listed = cli("history", "--store", postgres_url, "--json")
    assert listed.code == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert [run["status"] for run in runs] == ["completed", "completed"]
    shown = cli("history", "--store", postgres_url, runs[0]["runId"])
    assert shown.code == 0 and runs[0]["runId"] in shown.stdout
    with PostgresTraceStore(postgres_url, read_only=True) as store:
        assert {record["runId"] for record in store.events()} == {run["runId"] for run in runs}


def test_history_of_a_database_without_a_store_fails_to_load(cli: Any, postgres_url: str) -> None:
    """Reading a database that holds no trace store exits 2 and creates nothing."""
    result = cli("history", "--store", postgres_url)
    assert result.code == 2
    assert "no trace store" in result.stderr
    assert cli("history", "--store", postgres_url).code == 2  # still nothing there


def test_approvals_lists_waiting_calls_from_a_postgres_checkpoint_store(
    cli: Any, postgres_url: str, tmp_path: Path
) -> None:
    """`approvals --store URL` lists the calls that wait in the shared checkpoint store."""
    from tubeless import Durability, PostgresCheckpointStore, define_agent, define_tool
    from tubeless.testing import scripted_decide

    empty = cli("approvals", "--store", postgres_url)
    assert (empty.code, empty.stdout) == (0, "No tool calls wait for approval.\n")
    agent = define_agent(
        id="asks",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {},
        decide=scripted_decide(
            [{"kind": "continue", "calls": [{"id": "c1", "tool": "send", "input": {"to": "x"}}]}]
        ),
        tools={
            "send": define_tool(
                description="Send",
                input_schema={"type": "object"},
                output_schema={"type": "null"},
                run=lambda value, context: None,
                needs_approval=True,
            )
        },
        implementation_version="1",
        durability=Durability(store=PostgresCheckpointStore(postgres_url), key="job-1"),
    )
    assert agent.run({}).status == "failed"
    result = cli("approvals", "--store", postgres_url, "--json")
    assert result.code == 0, result.stderr
    (waiting,) = json.loads(result.stdout)["pendingApprovals"]
    assert (waiting["key"], waiting["tool"]) == ("job-1", "send")

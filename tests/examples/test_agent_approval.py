"""The approval example through the real CLI, in child processes: exit 8, decide, exit 0.

The checkpoint store is a real SQLite file; the outbox file shows what was really sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_approval.py"


class Cli:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store = directory / "checkpoints.db"
        self.outbox = directory / "outbox.txt"

    def __call__(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        environment = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AGENT_APPROVAL_STORE": str(self.store),
            "NO_COLOR": "1",
        }
        return subprocess.run(
            [sys.executable, "-m", "tubeless", *arguments],
            cwd=self.directory,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def run(self, *decisions: str) -> subprocess.CompletedProcess[str]:
        return self("run", str(EXAMPLE), *decisions, "--", "--outbox", str(self.outbox))

    def sent(self) -> list[str]:
        if not self.outbox.exists():
            return []
        return [line.split(" ", 1)[0] for line in self.outbox.read_text("utf-8").splitlines()]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_the_round_trip_waits_with_exit_8_then_completes_with_exit_0(cli: Cli) -> None:
    first = cli.run()
    assert first.returncode == 8, first.stderr
    assert "Waiting for approval: 1 call(s)" in first.stderr
    assert "mail-boss  send  turn 1  approval-mail" in first.stderr
    # Waiting is not a failure: no failed step or call in the progress lines.
    assert "fail agent" not in first.stderr and "failed calls" not in first.stderr
    assert cli.sent() == []  # not even the calls that need no approval started

    listed = cli("approvals", "--store", str(cli.store), "--json")
    assert listed.returncode == 0, listed.stderr
    (pending,) = json.loads(listed.stdout)["pendingApprovals"]
    assert pending["callId"] == "mail-boss"
    assert pending["key"] == f"mail:{cli.outbox}"
    assert pending["input"]["to"] == "boss@elsewhere.org"
    assert (pending["tool"], pending["turn"], pending["agent"]) == ("send", 1, "approval-mail")
    text = cli("approvals", "--store", str(cli.store), f"mail:{cli.outbox}")
    assert text.returncode == 0
    assert text.stdout.startswith(f"mail:{cli.outbox}  mail-boss  send  turn 1  approval-mail  ")

    again = cli.run()
    assert again.returncode == 8
    assert cli.sent() == []

    done = cli.run("--approve", "mail-boss")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sent 2 (mail-team, mail-boss), rejected none"
    assert sorted(cli.sent()) == ["boss@elsewhere.org", "team@example.com"]
    after = cli("approvals", "--store", str(cli.store))
    assert after.stdout == "No tool calls wait for approval.\n"

    rerun = cli.run("--approve", "mail-boss")
    assert rerun.returncode == 0
    assert len(cli.sent()) == 2  # nothing that ran runs again


def test_a_rejection_reaches_the_agent_as_an_outcome(cli: Cli) -> None:
    assert cli.run().returncode == 8
    done = cli.run("--reject", "mail-boss=not today")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sent 1 (mail-team), rejected mail-boss"
    assert cli.sent() == ["team@example.com"]


def test_decisions_that_do_not_fit_exit_with_errors_and_send_nothing(cli: Cli) -> None:
    assert cli.run().returncode == 8
    unknown = cli.run("--approve", "nope")
    assert unknown.returncode == 6
    assert "TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL" in unknown.stderr
    not_needed = cli.run("--approve", "mail-boss", "--approve", "mail-team")
    assert not_needed.returncode == 6
    assert "TUBELESS_AGENT_APPROVAL_NOT_NEEDED" in not_needed.stderr
    for bad in (["--reject", "mail-boss"], ["--approve", "mail-boss", "--reject", "mail-boss=x"]):
        usage = cli.run(*bad)
        assert usage.returncode == 1, usage.stderr
    assert cli.sent() == []
    assert cli.run("--approve", "mail-boss").returncode == 0


def test_approvals_reads_only_an_existing_checkpoint_store(cli: Cli) -> None:
    missing = cli("approvals", "--store", "nope.db")
    assert missing.returncode == 2
    assert "Checkpoint store not found" in missing.stderr
    assert not (cli.directory / "nope.db").exists()
    usage = cli("approvals")
    assert usage.returncode == 1
    assert cli("run", "--store", "runs.sqlite", str(EXAMPLE), "--", "--outbox", "o").returncode == 8
    trace_store = cli("approvals", "--store", "runs.sqlite")
    assert trace_store.returncode == 2
    assert "runs.sqlite is a trace store (what run --store writes), not a checkpoint store" in (
        trace_store.stderr
    )
    assert "version" not in trace_store.stderr


def test_decisions_for_unknown_or_finished_calls_say_what_waits(cli: Cli) -> None:
    """An unknown call id lists the waiting calls; decisions for a finished run are reported."""
    assert cli.run().returncode == 8
    unknown = cli.run("--approve", "mail-bos")
    assert unknown.returncode != 0
    assert "No call 'mail-bos' waits for approval" in unknown.stderr
    assert "waiting: 'mail-boss' ('send')" in unknown.stderr
    assert cli.run("--approve", "mail-boss").returncode == 0
    again = cli.run("--approve", "mail-boss")
    assert again.returncode == 0  # the saved result, as before
    assert "already finished: no call waits for approval, so the decisions for 'mail-boss' " in (
        again.stderr
    )
    assert len(cli.sent()) == 2


def test_a_waiting_run_reads_waiting_in_progress_and_history(cli: Cli) -> None:
    """The summary line says `status=waiting` and `history` lists the run as `waiting`."""
    first = cli.run("--store", "runs.db")
    assert first.returncode == 8, first.stderr
    assert "(status=waiting, " in first.stderr
    assert "status=failed" not in first.stderr
    listed = cli("history", "--store", "runs.db")
    (root,) = [line for line in listed.stdout.splitlines() if line.startswith("approval-mail:")]
    assert root.split("  ")[2] == "waiting"
    detail = cli("history", "--store", "runs.db", root.split("  ")[0])
    assert "Status waiting\n" in detail.stdout
    as_json = json.loads(cli("history", "--store", "runs.db", "--json").stdout)
    assert {run["status"] for run in as_json["runs"]} == {"failed"}  # the wire form stays

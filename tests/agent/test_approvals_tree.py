"""Approval decisions checked across the whole checkpoint tree, and decisions sent again.

Every journal is a real SQLite checkpoint file; the command-line tests run the real CLI
(`python -m tubeless run FILE --approve ...`) in child processes, one of them killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import tubeless
from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool, pipeline_tool
from tubeless._frozen import thaw
from tubeless.pipeline import Pipeline, PipelineRun

ROOT = Path(__file__).resolve().parents[2]
KEY = "job-1"
X_INPUT = {
    "type": "object",
    "properties": {"x": {"type": "integer", "minimum": 0}},
    "required": ["x"],
    "additionalProperties": False,
}


class Ran:
    """The (call id, x) of every handler that ran, across runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, int]] = []

    def handler(self, value: Any, context: Any) -> int:
        with self.lock:
            self.calls.append((context.execution.call, value["x"]))
        return int(value["x"])

    def send(self, needs_approval: Any = True) -> Any:
        return define_tool(
            description="Send x",
            input_schema=X_INPUT,
            output_schema={"type": "integer"},
            run=self.handler,
            needs_approval=needs_approval,
        )


def codes(run: PipelineRun) -> list[str]:
    """Every code in the first error's chain."""
    found: list[str] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        found += [link[key] for key in ("code", "sourceCode") if isinstance(link.get(key), str)]
        link = link.get("cause")
    return found


def messages(run: PipelineRun) -> str:
    """Every message in the first error's chain, joined."""
    found: list[str] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        found.append(str(link.get("message", "")))
        link = link.get("cause")
    return " | ".join(found)


def _seen(state: Any, outcomes: Any) -> dict[str, Any]:
    return {
        "seen": [*state["seen"], *(o["value"] if o["ok"] else o["error"]["code"] for o in outcomes)]
    }


def _one_call_then_finish(state: Any, context: Any) -> dict[str, Any]:
    """A subagent: one call named by its options, then its result."""
    if not state["seen"]:
        options = context.options
        call = {"id": options["call"], "tool": "send", "input": {"x": options["x"]}}
        return {"kind": "continue", "calls": [call]}
    return {"kind": "finish", "result": {"seen": list(state["seen"])}}


def two_subagents(store: SqliteCheckpointStore, ran: Ran) -> Pipeline:
    """Subagents `r1` and `r2` run side by side; each admits one call (`s1`, `s2`) that
    waits, and neither waits before both have decided (so both calls wait)."""
    both_decided = threading.Barrier(2)

    def needs_approval(value: Any, context: Any) -> bool:
        both_decided.wait(timeout=60)
        return True

    child = define_agent(
        id="child",
        input_schema={
            "type": "object",
            "properties": {"call": {"type": "string"}, "x": {"type": "integer"}},
            "required": ["call", "x"],
        },
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": []},
        decide=_one_call_then_finish,
        reduce=_seen,
        tools={"send": ran.send(needs_approval)},
        implementation_version="1",
        durability=Durability(store=store, key="unused"),
    )

    def decide(state: Any, context: Any) -> dict[str, Any]:
        if not state["seen"]:
            calls = [
                {"id": "r1", "tool": "research", "input": {"call": "s1", "x": 1}},
                {"id": "r2", "tool": "research", "input": {"call": "s2", "x": 2}},
            ]
            return {"kind": "continue", "calls": calls}
        return {"kind": "finish", "result": {"seen": list(state["seen"])}}

    return define_agent(
        id="root",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": []},
        decide=decide,
        reduce=_seen,
        tools={"research": pipeline_tool(child, description="Research")},
        limits={"max_concurrency": 2},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


@pytest.mark.parametrize("bad", ["s1", "s2"])
def test_a_bad_edit_in_any_subagent_dispatches_nothing_anywhere(tmp_path: Path, bad: str) -> None:
    """With two subagents each waiting on one call, a bad edit of either call fails before
    the other (approved) call runs."""
    store = SqliteCheckpointStore(tmp_path / "checkpoints.db")
    ran = Ran()
    root = two_subagents(store, ran)
    first = root.run({})
    assert sorted(p.call_id for p in first.pending_approvals) == ["s1", "s2"]
    good = "s2" if bad == "s1" else "s1"
    decisions = {good: tubeless.approve(), bad: tubeless.edit({"x": "not a number"})}
    refused = root.run({}, context={"approvals": decisions})
    assert refused.status == "failed"
    assert "TUBELESS_AGENT_APPROVAL_INVALID_EDIT" in codes(refused)
    assert ran.calls == []
    assert sorted(p.call_id for p in store.pending_approvals(KEY)) == ["s1", "s2"]
    decisions[bad] = tubeless.edit({"x": 5})
    done = root.run({}, context={"approvals": decisions})
    assert done.status == "completed", done.errors
    assert sorted(ran.calls) == sorted([(good, 1 if good == "s1" else 2), (bad, 5)])
    assert len(thaw(done.value)["seen"]) == 2


def two_rounds(store: SqliteCheckpointStore, ran: Ran) -> Pipeline:
    """Call `a` waits in turn 1, call `b` in turn 2."""

    def decide(state: Any, context: Any) -> dict[str, Any]:
        turn = len(state["seen"])
        if turn < 2:
            call = {"id": "ab"[turn], "tool": "send", "input": {"x": turn + 1}}
            return {"kind": "continue", "calls": [call]}
        return {"kind": "finish", "result": {"seen": list(state["seen"])}}

    return define_agent(
        id="rounds",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": []},
        decide=decide,
        reduce=_seen,
        tools={"send": ran.send()},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


def test_a_decision_sent_again_after_its_turn_moved_on_is_ignored(tmp_path: Path) -> None:
    """Sending an applied decision again is harmless (the run waits for the next call);
    a different decision for it is refused as already decided, saying how."""
    store = SqliteCheckpointStore(tmp_path / "checkpoints.db")
    ran = Ran()
    agent = two_rounds(store, ran)
    assert [p.call_id for p in agent.run({}).pending_approvals] == ["a"]
    approve_a = {"a": tubeless.approve()}
    partial = agent.run({}, context={"approvals": approve_a})
    assert [p.call_id for p in partial.pending_approvals] == ["b"]
    again = agent.run({}, context={"approvals": approve_a})
    assert "TUBELESS_AGENT_APPROVAL_REQUIRED" in codes(again)
    assert [p.call_id for p in again.pending_approvals] == ["b"]
    for different in (tubeless.reject("no"), tubeless.edit({"x": 7})):
        refused = agent.run({}, context={"approvals": {"a": different}})
        assert "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED" in codes(refused)
        assert "already decided: approved" in messages(refused)
    assert ran.calls == [("a", 1)]
    done = agent.run({}, context={"approvals": {**approve_a, "b": tubeless.edit({"x": 9})}})
    assert done.status == "completed", done.errors
    assert thaw(done.value) == {"seen": [1, 9]}
    assert ran.calls == [("a", 1), ("b", 9)]


def test_an_edit_or_rejection_sent_again_is_recognised_by_its_content(tmp_path: Path) -> None:
    """A re-sent edit with the same input, or rejection with the same message, is ignored;
    another input or message is refused, quoting the decision on record."""
    store = SqliteCheckpointStore(tmp_path / "checkpoints.db")
    ran = Ran()
    agent = two_rounds(store, ran)
    agent.run({})
    assert agent.run({}, context={"approvals": {"a": tubeless.edit({"x": 4})}}).pending_approvals
    same = agent.run({}, context={"approvals": {"a": tubeless.edit({"x": 4})}})
    assert "TUBELESS_AGENT_APPROVAL_REQUIRED" in codes(same)
    other = agent.run({}, context={"approvals": {"a": tubeless.edit({"x": 5})}})
    assert "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED" in codes(other)
    assert """already decided: edited to input '{"x": 4}'""" in messages(other)
    rejected = {"a": tubeless.edit({"x": 4}), "b": tubeless.reject("not now")}
    assert agent.run({}, context={"approvals": rejected}).status == "completed"
    assert ran.calls == [("a", 4)]
    with_other_message = {"b": tubeless.reject("later")}
    # A finished execution returns its result and checks no decision.
    assert agent.run({}, context={"approvals": with_other_message}).status == "completed"


# -- the same command line again, through the real CLI ---------------------------------

APP = textwrap.dedent(
    """
    import json, os, sys, time
    from tubeless import (
        Durability, SqliteCheckpointStore, define_agent, define_pipeline_command, define_tool,
    )

    def send(value, context):
        call = context.execution.call
        with open(os.environ["APP_OUTBOX"], "a", encoding="utf-8") as outbox:
            outbox.write(call + "\\n")
        if os.environ.get("APP_HANG") == call:
            print("hanging in", call, file=sys.stderr, flush=True)
            time.sleep(300)
        return value["x"]

    def decide(state, context):
        turn = len(state["seen"])
        if turn < 2:
            call = {"id": "ab"[turn], "tool": "send", "input": {"x": turn + 1}}
            return {"kind": "continue", "calls": [call]}
        return {"kind": "finish", "result": {"seen": state["seen"]}}

    def reduce(state, outcomes):
        seen = [o["value"] if o["ok"] else o["error"]["code"] for o in outcomes]
        return {"seen": [*state["seen"], *seen]}

    agent = define_agent(
        id="rounds",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": []},
        decide=decide,
        reduce=reduce,
        tools={
            "send": define_tool(
                description="Send x",
                input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
                output_schema={"type": "integer"},
                run=send,
                needs_approval=True,
            )
        },
        implementation_version="1",
        durability=Durability(store=SqliteCheckpointStore(os.environ["APP_STORE"]), key="k"),
    )
    command = define_pipeline_command(
        agent, summarize=lambda value, values: [json.dumps(value["seen"])]
    )
    """
)


class Cli:
    def __init__(self, directory: Path) -> None:
        self.app = directory / "rounds.py"
        self.app.write_text(APP, encoding="utf-8")
        self.outbox = directory / "outbox.txt"
        self.environment = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "APP_STORE": str(directory / "checkpoints.db"),
            "APP_OUTBOX": str(self.outbox),
            "NO_COLOR": "1",
        }

    def command(self, *decisions: str) -> list[str]:
        return [sys.executable, "-m", "tubeless", "run", str(self.app), *decisions]

    def run(self, *decisions: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*decisions),
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.app.parent,
        )

    def sent(self) -> list[str]:
        return self.outbox.read_text("utf-8").split() if self.outbox.exists() else []


@pytest.mark.slow
def test_the_same_approve_set_again_after_a_partial_resume_is_harmless(tmp_path: Path) -> None:
    """`--approve a` run again once `a` ran and `b` waits exits 8 (waiting), not 6; a
    different decision for `a` exits 6 with `..._ALREADY_DECIDED`."""
    cli = Cli(tmp_path)
    assert cli.run().returncode == 8
    partial = cli.run("--approve", "a")
    assert partial.returncode == 8, partial.stderr
    again = cli.run("--approve", "a")
    assert again.returncode == 8, again.stderr
    assert "TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL" not in again.stderr
    changed = cli.run("--reject", "a=no")
    assert changed.returncode == 6
    assert "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED" in changed.stderr
    assert cli.sent() == ["a"]
    done = cli.run("--approve", "a", "--approve", "b")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 2]"
    assert cli.run("--approve", "a", "--approve", "b").returncode == 0
    assert cli.sent() == ["a", "b"]


@pytest.mark.slow
def test_the_same_approve_set_again_after_a_kill_runs_nothing_twice(tmp_path: Path) -> None:
    """A process killed inside the approved call `b` is resumed by the same command line:
    `b` becomes `TUBELESS_AGENT_CALL_INTERRUPTED` (it may have run), nothing runs twice."""
    cli = Cli(tmp_path)
    assert cli.run().returncode == 8
    assert cli.run("--approve", "a").returncode == 8
    decisions = ("--approve", "a", "--approve", "b")
    process = subprocess.Popen(
        cli.command(*decisions),
        env={**cli.environment, "APP_HANG": "b"},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("hanging in b"):
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(60)
        if process.stderr is not None:
            process.stderr.close()
    assert cli.sent() == ["a", "b"]
    resumed = cli.run(*decisions)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == '[1, "TUBELESS_AGENT_CALL_INTERRUPTED"]'
    assert cli.sent() == ["a", "b"]


def test_a_checkpoint_saved_before_the_log_of_decisions_still_recognises_a_resend() -> None:
    """A call whose decision was recorded before checkpoints kept a log of decisions
    ignores the same kind of decision again and refuses another."""
    from tubeless.agent._approvals import check_against
    from tubeless.agent._journal_document import Checkpoint

    decided = {
        "id": "a",
        "tool": "send",
        "input": {"x": 1},
        "status": "running",
        "approval": {"agentRunId": "r", "decision": "approve"},
    }
    document = Checkpoint.from_dict(
        {
            "format": "tubeless.agent-checkpoint",
            "version": 1,
            "id": "e",
            "agent": {
                "agent": "root",
                "spent": {"calls": 1, "decisions": 1},
                "turn": {"index": 1, "phase": "decided", "calls": [decided]},
            },
        }
    )
    assert check_against(document, {"a": tubeless.approve()}) == {}
    with pytest.raises(tubeless.errors.AgentError) as raised:
        check_against(document, {"a": tubeless.reject("no")})
    assert raised.value.code == "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED"
    assert "already decided: approved" in str(raised.value)

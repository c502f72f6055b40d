"""Usage of durable agents is journaled: a resume, even after SIGKILL, keeps what was spent."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import pytest

from tubeless import Durability, Usage, define_agent, define_tool, pipeline_tool
from tubeless.testing import MemoryCheckpointStore

HERE = pathlib.Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import usage_durable_agent  # noqa: E402

ROOT = HERE.parents[1]


def _usage(turns: int, reserved_turns: int = 0) -> Usage:
    actual, reserved = usage_durable_agent.ACTUAL, usage_durable_agent.RESERVED
    return Usage(
        input_tokens=turns * actual["input_tokens"] + reserved_turns * reserved["input_tokens"],
        output_tokens=turns * actual["output_tokens"] + reserved_turns * reserved["output_tokens"],
        cost=turns * actual["cost"] + reserved_turns * reserved["cost"],
    )


@pytest.mark.slow
def test_sigkill_during_a_request_keeps_spent_and_reserved_usage(tmp_path: pathlib.Path) -> None:
    """Killed mid-request on turn 3, the resume keeps turns 1-2 and turn 3's reservation."""
    path = str(tmp_path / "checkpoints.db")
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "usage_durable_agent.py"), path],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])},
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "reserved"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()

    run = usage_durable_agent.build(path).run({})

    assert run.status == "completed", run.errors
    # Turns 1-2 settled, the killed turn 3 charged as reserved, then turns 3-4 again.
    assert run.usage == _usage(turns=4, reserved_turns=1)


def test_old_checkpoints_without_usage_resume_with_nothing_spent() -> None:
    """A checkpoint written before usage existed reads as zero usage and resumes."""
    store = MemoryCheckpointStore()
    agent = _memory_agent(store)
    store.fail_after = 2  # turn 1's reservation and its usage are saved, its decision is not
    assert agent.run({}).status == "failed"
    store.fail_after = None
    document = json.loads(store.checkpoint("k") or "")
    assert document["agent"]["spent"].pop("usage") == {
        "inputTokens": 5,
        "outputTokens": 5,
        "cost": 0,
    }
    store.put("k", json.dumps(document))

    run = agent.run({})

    assert run.status == "completed", run.errors
    assert run.usage == Usage(input_tokens=2, output_tokens=1)


def test_a_saved_result_reports_the_saved_usage() -> None:
    """Running a finished execution again decides nothing and reports what it spent."""
    store = MemoryCheckpointStore()
    agent = _memory_agent(store)
    first = agent.run({})
    again = agent.run({})
    assert first.usage == again.usage == Usage(input_tokens=2, output_tokens=1)


def test_a_durable_subagents_usage_survives_in_its_parents_journal() -> None:
    """The child's usage is charged to the parent's node and to the tree's report."""
    store = MemoryCheckpointStore()
    child = _memory_agent(store, agent_id="child")
    calls = {"kind": "continue", "calls": [{"id": "k", "tool": "child", "input": {}}]}

    def decide(state: Any, context: Any) -> Any:
        context.report_usage(input_tokens=10)
        return calls if context.turn == 1 else {"kind": "finish", "result": "done"}

    parent = define_agent(
        id="parent",
        input_schema={},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide,
        tools={"child": pipeline_tool(child, description="Delegate")},
        implementation_version="1",
        durability=Durability(store=store, key="p"),
    )

    run = parent.run({})

    assert run.status == "completed", run.errors
    assert run.usage == Usage(input_tokens=22, output_tokens=1)
    document = json.loads(store.checkpoint("p") or "")
    # The finished turn folded the child's node into the parent's own figures.
    assert document["agent"]["spent"]["usage"] == {
        "inputTokens": 22,
        "outputTokens": 1,
        "cost": 0,
    }


def _memory_agent(store: MemoryCheckpointStore, agent_id: str = "m") -> Any:
    """Two turns, each reserving 5 + 5 tokens: turn 1 uses 1 + 0, turn 2 uses 1 + 1."""

    def decide(state: Any, context: Any) -> Any:
        context.reserve_usage(input_tokens=5, output_tokens=5).settle(
            input_tokens=1, output_tokens=context.turn - 1
        )
        if context.turn == 1:
            return {"kind": "continue", "calls": [{"id": "e", "tool": "echo", "input": 1}]}
        return {"kind": "finish", "result": "done"}

    return define_agent(
        id=agent_id,
        input_schema={},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide,
        tools={
            "echo": define_tool(description="Echo", input_schema={}, output_schema={}, run=_echo)
        },
        implementation_version="1",
        durability=Durability(store=store, key="k"),
    )


def _echo(value: Any, context: Any) -> Any:
    return value

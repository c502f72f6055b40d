"""Helpers shared by the MCP tests (fixtures live in `conftest.py`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tubeless import AgentTool, define_agent
from tubeless.pipeline import Pipeline, PipelineRun

SERVER = Path(__file__).with_name("server.py")
PATIENCE = 30.0
"""Backstop for waiting on a server's log: a broken test fails instead of hanging."""


def mcp_threads() -> list[str]:
    """Names of the live MCP loop threads."""
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("tubeless")]


def log_lines(path: Path) -> list[str]:
    """What the server logged so far."""
    return path.read_text("utf-8").splitlines() if path.exists() else []


def wait_for_log(path: Path, line: str) -> None:
    """Wait until the server logged `line` (bounded by `PATIENCE`)."""
    deadline = time.monotonic() + PATIENCE
    while line not in log_lines(path):
        assert time.monotonic() < deadline, f"server never logged {line!r}"
        time.sleep(0.02)


def calls_agent(
    tools: Mapping[str, AgentTool], calls: Sequence[Mapping[str, Any]], **extra: Any
) -> Pipeline:
    """An agent that makes `calls` in one batch, then finishes with their outcomes."""

    def decide(state: Mapping[str, Any], context: Any) -> Mapping[str, Any]:
        if state["outcomes"] is None:
            return {"kind": "continue", "calls": [dict(call) for call in calls]}
        return {"kind": "finish", "result": state["outcomes"]}

    return define_agent(
        id="mcp-test",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {"outcomes": None},
        decide=decide,
        reduce=lambda state, outcomes: {"outcomes": outcomes},
        tools=tools,
        **extra,
    )


def batches_agent(
    tools: Mapping[str, AgentTool], batches: Sequence[Sequence[Mapping[str, Any]]]
) -> Pipeline:
    """An agent that makes one batch per turn, then finishes with every outcome in order."""

    def decide(state: Mapping[str, Any], context: Any) -> Mapping[str, Any]:
        done = len(state["batches"])
        if done < len(batches):
            return {"kind": "continue", "calls": [dict(call) for call in batches[done]]}
        return {"kind": "finish", "result": [o for batch in state["batches"] for o in batch]}

    return define_agent(
        id="mcp-test-turns",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {"batches": []},
        decide=decide,
        reduce=lambda state, outcomes: {"batches": [*state["batches"], list(outcomes)]},
        tools=tools,
    )


def outcomes(run: PipelineRun) -> list[dict[str, Any]]:
    """The run's outcomes as plain JSON data."""
    assert run.status == "completed", run.errors
    return json.loads(json.dumps(run.value))


def codes(run: PipelineRun) -> str:
    """The run's errors in wire form, cause chains included, as one JSON text."""
    return json.dumps([error.to_dict() for error in run.errors])


def process_gone(pid: int) -> bool:
    """Whether process `pid` has exited and been reaped."""
    return not os.path.exists(f"/proc/{pid}")

"""A durable agent that reserves and settles usage every turn (imported by the tests, and
run as a script: `python usage_durable_agent.py DB` runs it until turn 3 has reserved, says
`reserved`, and waits to be killed)."""

from __future__ import annotations

import sys
import threading
from typing import Any

from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool

KEY = "usage-job"
TURNS = 4
RESERVED = {"input_tokens": 100, "output_tokens": 40, "cost": 0.5}
"""What each turn reserves before its "request"."""
ACTUAL = {"input_tokens": 60, "output_tokens": 20, "cost": 0.25}
"""What each request turns out to use."""


def _echo(value: Any, context: Any) -> Any:
    return value


def build(path: str, *, stall_on: int | None = None) -> Any:
    """The agent; with `stall_on`, that turn reserves, prints `reserved` and never settles."""

    def decide(state: Any, context: Any) -> Any:
        reservation = context.reserve_usage(**RESERVED)
        if context.turn == stall_on:
            print("reserved", flush=True)
            threading.Event().wait()  # the request "hangs" until the process is killed
        reservation.settle(**ACTUAL)
        if context.turn == TURNS:
            return {"kind": "finish", "result": "done"}
        call = {"id": f"t{context.turn}", "tool": "echo", "input": context.turn}
        return {"kind": "continue", "calls": [call]}

    return define_agent(
        id="metered-durable",
        input_schema={},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=decide,
        tools={
            "echo": define_tool(description="Echo", input_schema={}, output_schema={}, run=_echo)
        },
        implementation_version="1",
        limits={"max_total_tokens": 10_000},
        durability=Durability(store=SqliteCheckpointStore(path), key=KEY),
    )


if __name__ == "__main__":
    build(sys.argv[1], stall_on=3).run({})

"""A durable agent whose state grows fast, for the SIGKILL tests of the journal's change log.

Each of `TURNS` turns makes two calls whose outputs (10 KB each) the reducer appends to
the state, so the change log is folded into a new snapshot every few turns. Each call
appends one line to the effects file before it returns (an unsafe tool: a resume never
runs it twice). Run as a script: `python journal_growth_agent.py STORE EFFECTS`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool
from tubeless.pipeline import Pipeline

TURNS = 30
CALLS = 2
SIZE = 10_000


def build(store: str, effects: str) -> Pipeline:
    def effect(value: Any, context: Any) -> str:
        ids = context.execution
        with open(effects, "a", encoding="utf-8") as file:
            file.write(f"{ids.turn}/{ids.call}\n")
        return f"{ids.turn}/{ids.call}:" + "x" * SIZE

    def decide(state: Any, context: Any) -> dict[str, Any]:
        if context.turn > TURNS:
            return {"kind": "finish", "result": len(state["seen"])}
        calls = [{"id": f"c{i}", "tool": "effect", "input": {}} for i in range(CALLS)]
        return {"kind": "continue", "calls": calls}

    return define_agent(
        id="growth",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {"seen": []},
        decide=decide,
        reduce=lambda state, outcomes: {"seen": [*state["seen"], *outcomes]},
        tools={
            "effect": define_tool(
                description="Append a line",
                input_schema={"type": "object"},
                output_schema={"type": "string"},
                run=effect,
            )
        },
        limits={
            "max_turns": TURNS + 1,
            "max_calls": TURNS * CALLS,
            "max_decisions": TURNS + 1,
            "max_concurrency": CALLS,
        },
        implementation_version="1",
        durability=Durability(store=SqliteCheckpointStore(Path(store)), key="growth"),
    )


if __name__ == "__main__":
    run = build(sys.argv[1], sys.argv[2]).run({})
    print(run.status, flush=True)

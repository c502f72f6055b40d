"""Crash-safe resume: a durable agent that appends effects to a file, killed and resumed.

From the repository root::

    python -m tubeless run examples/agent_durable.py -- --effects /tmp/effects.txt
    # ... `kill -9` it while it runs, then run the same line again to resume:
    python -m tubeless run examples/agent_durable.py -- --effects /tmp/effects.txt

prints `6 effects, each once (interrupted: none)` (or names the calls a kill interrupted).
The execution key is the effects file's path, so the same command resumes; the command
also takes `--execution-key KEY` to choose another key. Checkpoints go to the SQLite file
named by `AGENT_DURABLE_STORE` (default `agent_durable.db` in the working directory).
To kill it while a call runs, make one effect hang: `AGENT_DURABLE_SLOW_EFFECT=effect-2`
(then resume without it).

The agent appends effects `effect-1` .. `effect-N`, two per turn, through `append`, an
unsafe tool (`replay="unsafe"`: appending twice would duplicate the effect), and reads
the file back through `read`, a safe one. Every effect line names the call that wrote it
(`context.execution`, stable across resumes). When a kill lands while an `append` runs,
the resumed agent is told `TUBELESS_AGENT_CALL_INTERRUPTED` instead of the call running
again; the scripted `decide` then inspects the file (`read`) and appends the effect again
only if it is missing. So the file ends with every effect exactly once.

Every decision is scripted, so no model or credential is needed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tubeless import (
    DecisionContext,
    Durability,
    SqliteCheckpointStore,
    ToolContext,
    define_agent,
    define_pipeline_command,
    define_tool,
)

INTERRUPTED = "TUBELESS_AGENT_CALL_INTERRUPTED"
PER_TURN = 2
STORE = SqliteCheckpointStore(os.environ.get("AGENT_DURABLE_STORE", "agent_durable.db"))
"""Where the journal lives (opened on the first run, never at import)."""
WORK_SECONDS = float(os.environ.get("AGENT_DURABLE_WORK_SECONDS", "0.01"))
"""How long each `append` works before its effect lands (room for a kill to land)."""
SLOW_EFFECT = os.environ.get("AGENT_DURABLE_SLOW_EFFECT")
"""An effect whose `append` works for a minute: kill the run while it hangs."""

options_schema = {
    "type": "object",
    "properties": {
        "effects": {"type": "string", "description": "The file the effects are appended to."},
        "count": {"type": "integer", "minimum": 1, "maximum": 40, "default": 6},
    },
    "required": ["effects"],
    "additionalProperties": False,
}
result_schema = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "effects": {"type": "array", "items": {"type": "string"}},
        "interrupted": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["answer", "effects", "interrupted"],
}


def append(value: Mapping[str, str], context: ToolContext) -> str:
    """Append `<effect> <execution id>/<turn>/<call>` to the file, durably."""
    context.sleep(60.0 if value["effect"] == SLOW_EFFECT else WORK_SECONDS)
    ids = context.execution
    assert ids is not None
    line = f"{value['effect']} {ids.id}/{ids.turn}/{ids.call}\n"
    descriptor = os.open(value["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode("utf-8"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return value["effect"]


def read(value: Mapping[str, str], context: ToolContext) -> list[str]:
    """The effect names in the file, in file order (safe: reading twice changes nothing)."""
    path = Path(value["path"])
    if not path.exists():
        return []
    return [line.split(" ", 1)[0] for line in path.read_text("utf-8").splitlines() if line]


PATH_INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "effect": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
tools = {
    "append": define_tool(
        description="Append an effect line to the file (not safe to repeat).",
        input_schema=PATH_INPUT,
        output_schema={"type": "string"},
        run=append,
        replay="unsafe",
    ),
    "read": define_tool(
        description="Read the effects in the file back (safe to repeat).",
        input_schema=PATH_INPUT,
        output_schema={"type": "array", "items": {"type": "string"}},
        run=read,
        replay="safe",
    ),
}


def initial_state(options: Mapping[str, Any]) -> dict[str, Any]:
    """Nothing done yet; `attempts` numbers the calls of each effect."""
    names = [f"effect-{index}" for index in range(1, options["count"] + 1)]
    return {
        "path": options["effects"],
        "todo": names,
        "check": [],
        "attempts": {},
        "seen": [],
        "final": None,
    }


def decide(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Inspect interrupted effects first, then append the next ones, read back, finish."""
    path = state["path"]
    if state["check"] or (not state["todo"] and state["final"] is None):
        call = {"id": f"read-{context.turn}", "tool": "read", "input": {"path": path}}
        return {"kind": "continue", "calls": [call]}
    if state["todo"]:
        calls = [
            {
                "id": f"{effect}.{state['attempts'].get(effect, 0) + 1}",
                "tool": "append",
                "input": {"path": path, "effect": effect},
            }
            for effect in state["todo"][:PER_TURN]
        ]
        return {"kind": "continue", "calls": calls}
    effects = list(state["final"])
    once = len(effects) == len(set(effects))
    interrupted = list(state["seen"])
    answer = (
        f"{len(effects)} effects, {'each once' if once else 'DUPLICATED'} "
        f"(interrupted: {', '.join(interrupted) or 'none'})"
    )
    return {
        "kind": "finish",
        "result": {"answer": answer, "effects": effects, "interrupted": interrupted},
    }


def reduce(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mark appended effects done; queue interrupted ones for inspection; apply a check."""
    todo, check = list(state["todo"]), list(state["check"])
    attempts, seen = dict(state["attempts"]), list(state["seen"])
    for outcome in outcomes:
        if outcome["tool"] == "read":
            if not check:
                return {**state, "final": list(outcome["value"])}
            found = set(outcome["value"])
            todo = [effect for effect in todo if effect not in found or effect not in check]
            check = []
            continue
        effect = outcome["id"].rsplit(".", 1)[0]
        attempts[effect] = attempts.get(effect, 0) + 1
        if outcome["ok"]:
            todo.remove(effect)
        elif outcome["error"]["code"] == INTERRUPTED:
            seen.append(outcome["id"])
            check.append(effect)
    return {**state, "todo": todo, "check": check, "attempts": attempts, "seen": seen}


agent = define_agent(
    id="durable-effects",
    name="Durable effects",
    description="Append effects to a file through an unsafe tool; survive being killed.",
    input_schema=options_schema,
    result_schema=result_schema,
    tools=tools,
    limits={"max_turns": 100, "max_calls": 200, "max_decisions": 100, "max_concurrency": 2},
    initial_state=initial_state,
    decide=decide,
    reduce=reduce,
    implementation_version="1",
    durability=Durability(store=STORE, key=lambda options: f"effects:{options['effects']}"),
)
"""The durable agent; the execution key is the effects file's path."""

command = define_pipeline_command(
    agent, execution_key=True, summarize=lambda value, values: [value["answer"]]
)
"""The CLI command: `--effects`, `--count`, `--execution-key`; prints the answer."""

if __name__ == "__main__":
    raise SystemExit(command.main())

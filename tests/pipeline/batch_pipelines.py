"""Pipelines for the batch tests, importable by name in worker processes.

`doubler` records each call in the effects file its options name, then finishes with
twice its `n`; `durable_doubler` (its tool safe to run again) does the same with a journal
in the SQLite checkpoint store named by the environment variable `BATCH_TEST_STORE`
(read at import), so a rerun
or another worker resumes an input instead of repeating a finished call.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
from typing import Any

import tubeless
from tubeless.testing import scripted_decide


def _record(value: dict[str, Any], context: Any) -> int:
    with pathlib.Path(value["effects"]).open("a", encoding="utf-8") as stream:
        stream.write(f"{value['n']}\n")
    if value["wait"]:
        context.signal.wait(value["wait"])
    return int(value["n"]) * 2


def _initial(options: dict[str, Any]) -> dict[str, Any]:
    return {"n": options["n"], "effects": options["effects"], "wait": options.get("wait", 0)}


def _call(state: Any, context: Any) -> dict[str, Any]:
    call = {"n": state["n"], "effects": state["effects"], "wait": state["wait"]}
    return {"kind": "continue", "calls": [{"id": "record", "tool": "record", "input": call}]}


def _finish(state: Any, context: Any) -> dict[str, Any]:
    return {"kind": "finish", "result": state["doubled"]}


def _reduce(state: Any, outcomes: Any) -> dict[str, Any]:
    return {**state, "doubled": outcomes[0]["value"]}


def _agent(agent_id: str, replay: Any = "unsafe", **extra: Any) -> Any:
    return tubeless.define_agent(
        id=agent_id,
        input_schema={"type": "object", "required": ["n", "effects"]},
        result_schema={"type": "integer"},
        initial_state=_initial,
        decide=scripted_decide([_call, _finish]),
        reduce=_reduce,
        tools={
            "record": tubeless.define_tool(
                description="Record n in the effects file and return it doubled",
                input_schema={"type": "object"},
                output_schema={"type": "integer"},
                run=_record,
                replay=replay,
            )
        },
        **extra,
    )


doubler = _agent("doubler")
_STORE = os.environ.get("BATCH_TEST_STORE") or os.path.join(tempfile.gettempdir(), "batch.db")
durable_doubler = _agent(
    "durable-doubler",
    replay="safe",
    implementation_version="1",
    durability=tubeless.Durability(
        store=tubeless.SqliteCheckpointStore(_STORE), key=lambda options: f"n:{options['n']}"
    ),
)


def slow_effects(path: pathlib.Path, count: int, seconds: float) -> None:
    """Wait until `path` has `count` lines (a helper for tests that kill mid-batch)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {count} lines")

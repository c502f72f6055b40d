"""A worker process for the fleet tests: one durable agent on a Postgres checkpoint store.

`python postgres_worker.py URL KEY LOG TAG [LEASE_SECONDS] [HOLD_SECONDS]` runs an agent
whose two turns call the tool `work` once each (calls `a`, then `b`). Each dispatch appends
`TAG <call>` to LOG and prints `in <call>` before it holds for HOLD_SECONDS (call `a` only).
At the end the worker prints one JSON line: the run's status, value and error codes.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from tubeless import Durability, PostgresCheckpointStore, define_agent, define_tool
from tubeless.testing import scripted_decide


def codes(run: Any) -> list[str]:
    """Every code in the first error's chain."""
    found: list[str] = []
    link: Any = run.errors[0].to_dict() if run.errors else None
    while link is not None:
        found += [link[key] for key in ("code", "sourceCode") if isinstance(link.get(key), str)]
        link = link.get("cause")
    return found


def build(url: str, key: str, log: str, tag: str, lease: float, hold: float) -> Any:
    """The agent: call `a` (held for `hold` seconds), then call `b`, then finish."""

    def work(value: dict[str, str], context: object) -> str:
        with open(log, "a", encoding="utf-8") as file:
            file.write(f"{tag} {value['call']}\n")
        print(f"in {value['call']}", flush=True)
        if value["call"] == "a":
            time.sleep(hold)
        return value["call"]

    def call(name: str) -> dict[str, Any]:
        calls = [{"id": name, "tool": "work", "input": {"call": name}}]
        return {"kind": "continue", "calls": calls}

    return define_agent(
        id="fleet",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"done": []},
        decide=scripted_decide(
            [
                call("a"),
                call("b"),
                lambda state, context: {"kind": "finish", "result": dict(state)},
            ]
        ),
        reduce=lambda state, outcomes: {
            "done": [*state["done"], outcomes[0].get("value", outcomes[0].get("error"))]
        },
        tools={
            "work": define_tool(
                description="Work",
                input_schema={"type": "object"},
                output_schema={"type": "string"},
                run=work,
                replay="safe",
            )
        },
        implementation_version="1",
        durability=Durability(store=PostgresCheckpointStore(url, lease_seconds=lease), key=key),
    )


def main(argv: list[str]) -> None:
    url, key, log, tag = argv[:4]
    lease = float(argv[4]) if len(argv) > 4 else 30.0
    hold = float(argv[5]) if len(argv) > 5 else 0.0
    run = build(url, key, log, tag, lease, hold).run({})
    print(json.dumps({"status": run.status, "value": run.value, "codes": codes(run)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

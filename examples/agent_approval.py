"""Human approval: a durable agent that sends mail only after a person says yes.

From the repository root::

    python -m tubeless run examples/agent_approval.py -- --outbox /tmp/outbox.txt
    # exit code 8: "Waiting for approval: 1 call(s)", naming the call `mail-boss`
    python -m tubeless approvals --store agent_approval.db
    python -m tubeless run examples/agent_approval.py --approve mail-boss \\
        -- --outbox /tmp/outbox.txt
    # exit code 0: "sent 2 (mail-team, mail-boss), rejected none"

Use `--reject mail-boss="not today"` instead of `--approve` to refuse it: the agent sees
the outcome `TUBELESS_AGENT_CALL_REJECTED` with that message and sends nothing to it.

The agent's one decision is a batch of three calls: `count` (reads the outbox), a mail to
the team and a mail to an outside address. `send` needs approval for addresses outside
`example.com` (a `needs_approval` predicate on the validated input), so the batch stops
before anything of it starts: the first run dispatches nothing, not even the two calls
that need no approval. The rerun records the decision in the journal, then runs the
batch once; nothing that ran runs again. Checkpoints go to the SQLite file named by
`AGENT_APPROVAL_STORE` (default `agent_approval.db` in the working directory); the key is
the outbox's path (or `--execution-key KEY`).

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

REJECTED = "TUBELESS_AGENT_CALL_REJECTED"
STORE = SqliteCheckpointStore(os.environ.get("AGENT_APPROVAL_STORE", "agent_approval.db"))
"""Where the journal lives (opened on the first run, never at import)."""

options_schema = {
    "type": "object",
    "properties": {
        "outbox": {"type": "string", "description": "The file sent mail is appended to."},
        "to": {
            "type": "string",
            "default": "boss@elsewhere.org",
            "description": "The outside address to mail.",
        },
    },
    "required": ["outbox"],
    "additionalProperties": False,
}
result_schema = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "sent": {"type": "array", "items": {"type": "string"}},
        "rejected": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["answer", "sent", "rejected"],
}
MAIL_INPUT = {
    "type": "object",
    "properties": {
        "outbox": {"type": "string"},
        "to": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"},
        "body": {"type": "string", "maxLength": 2000},
    },
    "required": ["outbox", "to", "body"],
    "additionalProperties": False,
}


def send(value: Mapping[str, str], context: ToolContext) -> str:
    """Append the mail to the outbox, durably (the stand-in for a real mail server)."""
    ids = context.execution
    assert ids is not None
    line = f"{value['to']} {ids.id}/{ids.turn}/{ids.call} {value['body']!r}\n"
    descriptor = os.open(value["outbox"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode("utf-8"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return value["to"]


def count(value: Mapping[str, str], context: ToolContext) -> int:
    """How many mails the outbox holds."""
    path = Path(value["outbox"])
    return len(path.read_text("utf-8").splitlines()) if path.exists() else 0


def outside(value: Mapping[str, str], context: DecisionContext) -> bool:
    """Mail to an address outside example.com needs a person's approval."""
    return not value["to"].endswith("@example.com")


tools = {
    "send": define_tool(
        description="Send a mail (appends it to the outbox).",
        input_schema=MAIL_INPUT,
        output_schema={"type": "string"},
        run=send,
        needs_approval=outside,
    ),
    "count": define_tool(
        description="Count the mails in the outbox.",
        input_schema={
            "type": "object",
            "properties": {"outbox": {"type": "string"}},
            "required": ["outbox"],
        },
        output_schema={"type": "integer"},
        run=count,
        replay="safe",
    ),
}


def initial_state(options: Mapping[str, Any]) -> dict[str, Any]:
    """Nothing sent yet."""
    return {"outbox": options["outbox"], "to": options["to"], "done": False, "outcomes": []}


def decide(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """One batch of three calls, then a summary of what was sent and what was refused."""
    if not state["done"]:
        outbox = state["outbox"]
        calls = [
            {"id": "count", "tool": "count", "input": {"outbox": outbox}},
            {
                "id": "mail-team",
                "tool": "send",
                "input": {"outbox": outbox, "to": "team@example.com", "body": "Report sent."},
            },
            {
                "id": "mail-boss",
                "tool": "send",
                "input": {"outbox": outbox, "to": state["to"], "body": "Here is the report."},
            },
        ]
        return {"kind": "continue", "calls": calls}
    sent = [o["id"] for o in state["outcomes"] if o["ok"] and o["tool"] == "send"]
    rejected = [o["id"] for o in state["outcomes"] if not o["ok"]]
    answer = (
        f"sent {len(sent)} ({', '.join(sent) or 'none'}), rejected {', '.join(rejected) or 'none'}"
    )
    return {"kind": "finish", "result": {"answer": answer, "sent": sent, "rejected": rejected}}


def reduce(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keep the outcomes (a rejection arrives as a failed outcome with its message)."""
    kept = [
        {"id": o["id"], "tool": o["tool"], "ok": o["ok"]}
        for o in outcomes
        if o["ok"] or o["error"]["code"] == REJECTED
    ]
    return {**state, "done": True, "outcomes": kept}


agent = define_agent(
    id="approval-mail",
    name="Approved mail",
    description="Send mail; mail to outside addresses waits for a person's approval.",
    input_schema=options_schema,
    result_schema=result_schema,
    tools=tools,
    limits={"max_turns": 4, "max_calls": 10, "max_concurrency": 2},
    initial_state=initial_state,
    decide=decide,
    reduce=reduce,
    implementation_version="1",
    durability=Durability(store=STORE, key=lambda options: f"mail:{options['outbox']}"),
)
"""The durable agent; the execution key is the outbox's path."""

command = define_pipeline_command(
    agent, execution_key=True, summarize=lambda value, values: [value["answer"]]
)
"""The CLI command: `--outbox`, `--to`, `--execution-key`; prints the answer."""

if __name__ == "__main__":
    raise SystemExit(command.main())

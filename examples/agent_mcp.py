"""An agent whose tools live in an MCP server: pinned, validated, cancellable.

From the repository root (needs the `mcp` extra, no credentials)::

    python examples/agent_mcp.py --question "hello mcp world"
    # 3 words; HELLO MCP WORLD
    python -m tubeless plan examples/agent_mcp.py     # no server is started
    python -m tubeless mcp lock --stdio python examples/mcp_text_server.py \\
        > examples/agent_mcp.lock.json                 # after reviewing a change

The tools come from `mcp_text_server.py`, started as a child process. Their definitions
are pinned by `agent_mcp.lock.json`, so importing this module, planning and drawing the
agent need no server, and the lock's digests are part of the agent's identity. When the
run starts its first batch, the live definitions are compared with the pinned ones: a
server that changed a description or a schema since it was locked fails the run with
`TUBELESS_MCP_TOOL_DRIFT` before any call starts. Arguments are validated against each
tool's input schema before they are sent; each call waits at most 10 seconds.

The decisions are scripted (one batch calling both tools, then the answer), so no model
is needed; a real `decide` would offer `context.capabilities` to a model instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tubeless import define_agent
from tubeless.mcp import stdio_server

HERE = Path(__file__).resolve().parent
SERVER = stdio_server(sys.executable, [str(HERE / "mcp_text_server.py")])
"""The server: nothing starts until `with SERVER:`."""

TOOLS = SERVER.tools(pin=HERE / "agent_mcp.lock.json", timeout=10.0)


def initial_state(options: Mapping[str, Any]) -> dict[str, Any]:
    return {"question": options["question"], "outcomes": None}


def decide(state: Mapping[str, Any], context: Any) -> Mapping[str, Any]:
    if state["outcomes"] is None:
        text = {"text": state["question"]}
        return {
            "kind": "continue",
            "calls": [
                {"id": "count", "tool": "count_words", "input": text},
                {"id": "shout", "tool": "shout", "input": text},
            ],
        }
    count, shout = state["outcomes"]
    if not (count["ok"] and shout["ok"]):
        failed = count if not count["ok"] else shout
        return {"kind": "finish", "result": f"failed: {failed['error']['code']}"}
    words = count["value"]["result"]
    return {"kind": "finish", "result": f"{words} words; {shout['value']}"}


def reduce(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"question": state["question"], "outcomes": list(outcomes)}


agent = define_agent(
    id="mcp-agent",
    description="Counts and shouts a question's words with tools from an MCP server.",
    input_schema={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
    result_schema={"type": "string"},
    initial_state=initial_state,
    decide=decide,
    reduce=reduce,
    tools=TOOLS,
    limits={"max_turns": 3, "max_concurrency": 2},
)


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server, run the agent once, print its answer."""
    parser = argparse.ArgumentParser(description="Run the MCP example agent.")
    parser.add_argument("--question", default="hello mcp world")
    arguments = parser.parse_args(argv)
    with SERVER:
        answer = agent.run_or_raise({"question": arguments.question})
    print(answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

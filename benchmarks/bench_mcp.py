"""MCP tools over stdio against handler tools: the per-call cost, measured in the same run.

Workload: an agent of `turns` turns of 4 calls each (`max_concurrency=1`, so calls never
overlap) to a tool that capitalises a short text. Variants, interleaved (the order
rotates each repetition), each run once to warm up first:

- `handler`: a `define_tool` tool whose handler is `text.upper()`, in process;
- `mcp stdio`: the same tool in `examples/mcp_text_server.py` (`shout`), a child process
  reached through `tubeless.mcp` (validation, the loop-thread hand-off, JSON-RPC over
  pipes, the server's own dispatch);
- `bridge only`: the same `tools/call` sent straight through the server's session, with
  no agent around it (one hand-off to the loop thread per call);
- `sdk in loop`: the same calls awaited one after another inside the loop thread (one
  hand-off for all of them): what the SDK, the pipes and the server cost on their own.

Figures are microseconds per call (median run time / calls) and the ratio of each to the
handler tool's, measured in this run.

    python benchmarks/bench_mcp.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _measure import format_table, median, seconds

from tubeless.agent import AgentTool, define_agent, define_tool
from tubeless.mcp import McpServer, stdio_server

SERVER = Path(__file__).resolve().parents[1] / "examples" / "mcp_text_server.py"
CALLS_PER_TURN = 4
TEXT_INPUT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def _agent(tool: AgentTool, turns: int) -> Any:
    calls = [{"id": str(n), "tool": "shout", "input": {"text": "hello"}} for n in range(4)]

    def decide(state: Mapping[str, Any], context: Any) -> Mapping[str, Any]:
        if state["turn"] < turns:
            return {"kind": "continue", "calls": calls}
        return {"kind": "finish", "result": state["last"]}

    def reduce(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> Any:
        assert all(outcome["ok"] for outcome in outcomes), outcomes
        return {"turn": state["turn"] + 1, "last": outcomes[-1]["value"]}

    return define_agent(
        id="bench-mcp",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {"turn": 0, "last": None},
        decide=decide,
        reduce=reduce,
        tools={"shout": tool},
        limits={"max_turns": turns + 1, "max_calls": turns * 4, "max_concurrency": 1},
    )


def _handler_tool() -> AgentTool:
    return define_tool(
        description="Return the text in capital letters.",
        input_schema=TEXT_INPUT,
        output_schema={"type": "string"},
        run=lambda value, context: value["text"].upper(),
    )


def _bridge(server: McpServer, count: int) -> Callable[[], None]:
    session = server._open_session()  # the measured path without the agent around it
    signal = threading.Event()

    def call_all() -> None:
        for _ in range(count):
            session.run(
                lambda client: client.call_tool("shout", {"text": "hello"}),
                signal=signal,
                timeout=None,
            )

    return call_all


def _in_loop(server: McpServer, count: int) -> Callable[[], None]:
    session = server._open_session()

    async def calls(client: Any) -> None:
        for _ in range(count):
            await client.call_tool("shout", {"text": "hello"})

    return lambda: session.run(calls, signal=None, timeout=None)


def measure(turns: int, repetitions: int) -> dict[str, float]:
    """Median microseconds per call of each variant, interleaved, after a warm-up each."""
    calls = turns * CALLS_PER_TURN
    with stdio_server(sys.executable, [str(SERVER)]) as server:
        mcp_tool = server.tools(include=["shout"])["shout"]
        by_handler, by_mcp = _agent(_handler_tool(), turns), _agent(mcp_tool, turns)
        variants: dict[str, Callable[[], Any]] = {
            "handler": lambda: by_handler.run_or_raise({}),
            "mcp stdio": lambda: by_mcp.run_or_raise({}),
            "bridge only": _bridge(server, calls),
            "sdk in loop": _in_loop(server, calls),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for name in names:
            variants[name]()
        for repetition in range(repetitions):
            shift = repetition % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(seconds(variants[name]))
    return {name: median(times) / calls * 1e6 for name, times in samples.items()}


def format_mcp(figures: Mapping[str, float], turns: int) -> list[str]:
    """The report table: microseconds per call, and the ratio to the handler tool."""
    base = figures["handler"]
    rows = [(name, [f"{value:,.0f}", f"{value / base:.1f}x"]) for name, value in figures.items()]
    title = f"MCP over stdio vs a handler tool: {turns} turns x {CALLS_PER_TURN} calls"
    return format_table(title, "variant", ["us/call", "vs handler"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer turns and repetitions.")
    arguments = parser.parse_args(argv)
    turns, repetitions = (5, 3) if arguments.quick else (25, 7)
    figures = measure(turns, repetitions)
    print("\n".join(format_mcp(figures, turns)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

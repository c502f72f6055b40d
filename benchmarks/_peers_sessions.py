"""The sessions workload of `bench_sessions.py` on peer frameworks, one variant per process.

Run by `bench_sessions.py` with an interpreter that has the peers (a separate virtualenv;
tubeless never depends on them): `python _peers_sessions.py VARIANT S` prints one JSON
line, `{"wall": s, "cpu": s, "calls": n}`. The workload is the same: S sessions started
together, each 3 turns of 4 tool calls and a finishing turn, the model sleeping 50 ms and
each tool 20 ms, at most 4 calls at once. LangGraph (sync) runs one thread per session,
its `decide` node fanning out 4 `Send`s; pydantic-ai (a `FunctionModel`) and
openai-agents (a `Model` of its own) gather one coroutine per session; each runs a
turn's tool calls concurrently itself.
"""

from __future__ import annotations

import asyncio
import gc
import json
import operator
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

DECIDE_SECONDS = 0.05
TOOL_SECONDS = 0.02
TURNS = 3
CALLS = 4


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _State(TypedDict):
    turn: int
    done: Annotated[int, operator.add]


def langgraph(sessions: int) -> Callable[[], list[int]]:
    """One thread per session, each invoking a compiled graph."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    def decide(state: _State) -> dict[str, int]:
        time.sleep(DECIDE_SECONDS)
        return {"turn": state["turn"] + 1}

    def route(state: _State) -> Any:
        if state["turn"] > TURNS:
            return END
        return [Send("api", {"x": index}) for index in range(CALLS)]

    def api(argument: dict[str, int]) -> dict[str, int]:
        time.sleep(TOOL_SECONDS)
        return {"done": 1}

    graph = StateGraph(_State)
    graph.add_node("decide", decide)
    graph.add_node("api", api)
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route, ["api", END])
    graph.add_edge("api", "decide")
    compiled = graph.compile()
    counts = [0] * sessions
    barrier = threading.Barrier(sessions + 1)

    def body(index: int) -> None:
        barrier.wait()
        final = compiled.invoke(
            {"turn": 0, "done": 0}, {"max_concurrency": CALLS, "recursion_limit": 100}
        )
        counts[index] = final["done"]

    def go() -> list[int]:
        threads = [threading.Thread(target=body, args=(i,)) for i in range(sessions)]
        for thread in threads:
            thread.start()
        barrier.wait()
        for thread in threads:
            thread.join()
        return counts

    return go


def pydantic_ai(sessions: int) -> Callable[[], list[int]]:
    """One coroutine per session, `Agent.run` with a `FunctionModel`."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(DECIDE_SECONDS)
        turn = sum(1 for message in messages if isinstance(message, ModelResponse))
        if turn >= TURNS:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("api", {"x": index}, tool_call_id=f"t{turn}c{index}")
                for index in range(CALLS)
            ]
        )

    agent = Agent(FunctionModel(model))
    calls = [0] * sessions

    def make(index: int) -> Any:
        async def api(x: int) -> int:
            await asyncio.sleep(TOOL_SECONDS)
            calls[index] += 1
            return x

        return api

    toolsets = [_toolset(make(index)) for index in range(sessions)]

    async def everything() -> None:
        await asyncio.gather(*(agent.run("go", toolsets=[tools]) for tools in toolsets))

    def go() -> list[int]:
        asyncio.run(everything())
        return calls

    return go


def _toolset(function: Any) -> Any:
    from pydantic_ai.toolsets import FunctionToolset

    return FunctionToolset([function])


def openai_agents(sessions: int) -> Callable[[], list[int]]:
    """One coroutine per session, `Runner.run` with a scripted `Model`."""
    from agents import Agent, ModelResponse, Runner, function_tool, set_tracing_disabled
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            await asyncio.sleep(DECIDE_SECONDS)
            items = kwargs.get("input", args[1] if len(args) > 1 else [])
            turn = sum(
                1
                for item in items
                if isinstance(item, dict) and item.get("type") == "function_call_output"
            )
            if turn >= TURNS * CALLS:
                text = ResponseOutputText(text="done", type="output_text", annotations=[])
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="m",
                        content=[text],
                        role="assistant",
                        status="completed",
                        type="message",
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id=f"f{turn}{index}",
                        call_id=f"t{turn}c{index}",
                        name="api",
                        arguments=json.dumps({"x": index}),
                        type="function_call",
                        status="completed",
                    )
                    for index in range(CALLS)
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    calls = [0] * sessions

    def make(index: int) -> Any:
        @function_tool
        async def api(x: int) -> int:
            """A remote API."""
            await asyncio.sleep(TOOL_SECONDS)
            calls[index] += 1
            return x

        return Agent(name="session", model=Scripted(), tools=[api])

    agents = [make(index) for index in range(sessions)]

    async def everything() -> None:
        await asyncio.gather(*(Runner.run(each, "go", max_turns=TURNS + 2) for each in agents))

    def go() -> list[int]:
        asyncio.run(everything())
        return calls

    return go


VARIANTS = {"langgraph": langgraph, "pydantic-ai": pydantic_ai, "openai-agents": openai_agents}


def main() -> None:
    variant, sessions = sys.argv[1], int(sys.argv[2])
    go = VARIANTS[variant](sessions)
    gc.collect()  # as `bench_sessions.child` does: set-up's collection is not the sessions'
    cpu, started = _cpu(), time.perf_counter()
    counts = go()
    wall, cpu = time.perf_counter() - started, _cpu() - cpu
    if counts != [TURNS * CALLS] * sessions:
        raise RuntimeError(f"{variant}: sessions made {sorted(set(counts))} calls")
    print(json.dumps({"wall": wall, "cpu": cpu, "calls": float(sum(counts))}))


if __name__ == "__main__":
    main()

"""MCP tools over stdio: calls, errors, drift, concurrency, cancellation and lifecycle."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp_support import (
    batches_agent,
    calls_agent,
    codes,
    log_lines,
    mcp_threads,
    outcomes,
    process_gone,
    wait_for_log,
)

from tubeless.agent import AgentLimits
from tubeless.errors import McpServerClosedError
from tubeless.mcp import McpServer

pytestmark = pytest.mark.slow


def test_calls_give_structured_values_text_and_tool_errors(
    make_server: Callable[..., McpServer],
) -> None:
    """A tool with an output schema gives `structuredContent`, others text, `isError` a code."""
    with make_server() as server:
        agent = calls_agent(
            server.tools(include=["add", "echo", "fail"]),
            [
                {"id": "1", "tool": "add", "input": {"a": 2, "b": 3}},
                {"id": "2", "tool": "echo", "input": {"text": "héllo"}},
                {"id": "3", "tool": "fail", "input": {"reason": "no such city"}},
            ],
        )
        found = outcomes(agent.run({}))
    assert found[0] == {"id": "1", "tool": "add", "ok": True, "value": {"result": 5}}
    assert found[1] == {"id": "2", "tool": "echo", "ok": True, "value": "héllo"}
    assert found[2]["ok"] is False
    assert found[2]["error"]["code"] == "MCP_TOOL_ERROR"
    assert "no such city" in found[2]["error"]["message"]


def test_a_hostile_error_text_reaches_the_model_bounded_and_escaped(
    make_server: Callable[..., McpServer],
) -> None:
    """A huge `isError` text with control characters becomes a short, printable message."""
    with make_server() as server:
        reason = "\x1b[31m" + "x" * 20_000
        agent = calls_agent(
            server.tools(include=["fail"]),
            [{"id": "1", "tool": "fail", "input": {"reason": reason}}],
        )
        message = outcomes(agent.run({}))[0]["error"]["message"]
    assert len(message) < 4096
    assert "\x1b" not in message
    assert "\\x1b[31m" in message
    assert message.endswith("characters)")


def test_arguments_are_validated_before_dispatch(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """An argument that fails the server's input schema never reaches the server."""
    with make_server() as server:
        agent = calls_agent(server.tools(), [{"id": "1", "tool": "stall", "input": {"tag": 7}}])
        run = agent.run({})
    assert run.status == "failed"
    assert "input validation failed" in run.errors[0].message
    assert not any(line.startswith("started") for line in log_lines(log))


def test_drift_fails_the_run_before_any_call_starts(
    make_server: Callable[..., McpServer], log: Path, tmp_path: Path
) -> None:
    """A pinned description that the live server changed fails the run; nothing is called."""
    lock = tmp_path / "mcp.lock.json"
    with make_server() as server:
        lock.write_text(server.lock().to_json(), "utf-8")
    drifted = make_server(variant="drifted")
    agent = calls_agent(
        drifted.tools(pin=lock),
        [
            {"id": "1", "tool": "stall", "input": {"tag": "one"}},
            {"id": "2", "tool": "add", "input": {"a": 1, "b": 2}},
        ],
    )
    with drifted:
        run = agent.run({})
    assert run.status == "failed"
    assert "TUBELESS_MCP_TOOL_DRIFT" in codes(run)
    assert "'add' changed its description" in str(run.first_exception())
    assert not any(line.startswith("started") for line in log_lines(log))


def test_an_announced_change_is_refused_within_the_same_run(
    make_server: Callable[..., McpServer],
) -> None:
    """After `notifications/tools/list_changed`, the run's next batch checks again and fails."""
    add = [{"id": "a", "tool": "add", "input": {"a": 1, "b": 1}}]
    rug = [{"id": "r", "tool": "rug", "input": {"announce": True}}]
    with make_server() as server:
        run = batches_agent(server.tools(include=["add", "rug"]), [add, rug, add]).run({})
    assert run.status == "failed"
    assert "TUBELESS_MCP_TOOL_DRIFT" in codes(run)


def test_a_silent_change_is_refused_by_the_next_run(make_server: Callable[..., McpServer]) -> None:
    """A change the server does not announce is found by the next run's first batch."""
    add = [{"id": "a", "tool": "add", "input": {"a": 1, "b": 1}}]
    rug = [{"id": "r", "tool": "rug", "input": {"announce": False}}]
    with make_server() as server:
        tools = server.tools(include=["add", "rug"])
        first = outcomes(batches_agent(tools, [add, rug, add]).run({}))
        run = batches_agent(tools, [add]).run({})
    assert [outcome["ok"] for outcome in first] == [True, True, True]
    assert run.status == "failed"
    assert "TUBELESS_MCP_TOOL_DRIFT" in codes(run)


def test_a_pinned_agent_runs_against_the_same_server(
    make_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    """Definitions pinned from a server pass the drift check against that server."""
    lock = tmp_path / "mcp.lock.json"
    with make_server() as server:
        lock.write_text(server.lock().to_json(), "utf-8")
    server = make_server()
    agent = calls_agent(
        server.tools(pin=lock, include=["add"]),
        [{"id": "1", "tool": "add", "input": {"a": 1, "b": 1}}],
    )
    with server:
        assert outcomes(agent.run({}))[0]["value"] == {"result": 2}
        assert outcomes(agent.run({}))[0]["value"] == {"result": 2}


def test_max_concurrency_bounds_calls_in_flight_at_the_server(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """With `max_concurrency=2`, the server never sees more than two calls at once."""
    calls = [{"id": str(n), "tool": "slow", "input": {"tag": str(n)}} for n in range(6)]
    with make_server() as server:
        agent = calls_agent(server.tools(), calls, limits=AgentLimits(max_concurrency=2))
        found = outcomes(agent.run({}))
    assert [outcome["value"] for outcome in found] == [str(n) for n in range(6)]
    in_flight = [int(line.split()[1]) for line in log_lines(log) if line.startswith("in-flight")]
    assert max(in_flight) == 2


def test_the_runs_signal_cancels_the_waiting_request(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """Setting the signal ends the run cancelled and the server gets `notifications/cancelled`."""
    signal = threading.Event()
    with make_server() as server:
        agent = calls_agent(server.tools(), [{"id": "1", "tool": "stall", "input": {"tag": "s"}}])
        setter = threading.Thread(target=lambda: (wait_for_log(log, "started s"), signal.set()))
        setter.start()
        run = agent.run({}, context={"signal": signal})
        setter.join()
        assert run.status == "cancelled"
        wait_for_log(log, "cancelled s")


def test_a_timed_out_call_is_cancelled_and_recoverable(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """Past `timeout`, the call's outcome is `TUBELESS_AGENT_CALL_TIMED_OUT`; the server stops."""
    with make_server() as server:
        agent = calls_agent(
            server.tools(timeout=0.2), [{"id": "1", "tool": "stall", "input": {"tag": "t"}}]
        )
        found = outcomes(agent.run({}))
        wait_for_log(log, "cancelled t")
    assert found[0]["error"]["code"] == "TUBELESS_AGENT_CALL_TIMED_OUT"
    assert "may still complete" in found[0]["error"]["message"]


def test_the_runs_time_budget_bounds_a_call_without_a_timeout(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """`max_seconds` is a call's deadline too: the stalled request is cancelled on the
    server, and the run then stops with the time limit."""
    with make_server() as server:
        agent = calls_agent(
            server.tools(),
            [{"id": "1", "tool": "stall", "input": {"tag": "m"}}],
            limits=AgentLimits(max_seconds=0.5),
        )
        run = agent.run({})
        wait_for_log(log, "cancelled m")
    assert run.status == "failed"
    assert "max_seconds" in str(run.errors[0].to_dict())


def test_leaving_the_block_ends_thread_and_process(make_server: Callable[..., McpServer]) -> None:
    """After the `with` block no loop thread and no child process is left."""
    server = make_server()
    with server:
        assert len(mcp_threads()) == 1
        found = outcomes(
            calls_agent(server.tools(), [{"id": "1", "tool": "pid", "input": {}}]).run({})
        )
    pid = int(found[0]["value"])
    assert mcp_threads() == []
    assert process_gone(pid)
    assert server.closed


def test_a_closed_server_is_a_coded_error(make_server: Callable[..., McpServer]) -> None:
    """Calls, listing and re-entry after the block raise `TUBELESS_MCP_SERVER_CLOSED`."""
    server = make_server()
    with server:
        tools = server.tools(include=["echo"])
    run = calls_agent(tools, [{"id": "1", "tool": "echo", "input": {"text": "x"}}]).run({})
    assert run.status == "failed"
    assert "TUBELESS_MCP_SERVER_CLOSED" in codes(run)
    with pytest.raises(McpServerClosedError) as listing:
        server.lock()
    assert listing.value.code == "TUBELESS_MCP_SERVER_CLOSED"
    with pytest.raises(McpServerClosedError):
        server.__enter__()


def test_annotations_never_make_a_tool_safe_to_replay(
    make_server: Callable[..., McpServer],
) -> None:
    """`add` is annotated read-only, yet only the caller's `replay=` makes it safe."""
    from tubeless.agent._tools import tool_spec

    with make_server() as server:
        default = server.tools(include=["add"])
        chosen = server.tools(include=["add", "echo"], replay={"echo": "safe"})
    assert tool_spec(default["add"]).replay == "unsafe"
    assert tool_spec(chosen["add"]).replay == "unsafe"
    assert tool_spec(chosen["echo"]).replay == "safe"

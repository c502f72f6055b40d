"""Dead servers and dropped connections: recoverable outcomes, never a hang; HTTP transport."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp_support import SERVER, calls_agent, log_lines, outcomes, process_gone, wait_for_log

from tubeless.mcp import McpLock, McpServer, http_server

pytestmark = pytest.mark.slow


def test_a_server_killed_mid_call_is_a_recoverable_connection_loss(
    make_server: Callable[..., McpServer], log: Path
) -> None:
    """SIGKILL during a call gives `TUBELESS_MCP_CONNECTION_LOST`; later calls too, at once."""
    server = make_server()
    with server:
        tools = server.tools()
        pid = int(
            outcomes(calls_agent(tools, [{"id": "p", "tool": "pid", "input": {}}]).run({}))[0][
                "value"
            ]
        )
        killer = threading.Thread(
            target=lambda: (wait_for_log(log, "started k"), os.kill(pid, signal.SIGKILL))
        )
        killer.start()
        stalled = calls_agent(tools, [{"id": "1", "tool": "stall", "input": {"tag": "k"}}])
        first = outcomes(stalled.run({}))
        killer.join()
        second = outcomes(
            calls_agent(tools, [{"id": "2", "tool": "echo", "input": {"text": "x"}}]).run({})
        )
    assert first[0]["error"]["code"] == "TUBELESS_MCP_CONNECTION_LOST"
    assert second[0]["error"]["code"] == "TUBELESS_MCP_CONNECTION_LOST"


def test_a_command_that_is_no_server_fails_to_open(tmp_path: Path) -> None:
    """A child that exits at once is `TUBELESS_MCP_CONNECTION_FAILED` on entering the block."""
    from tubeless.errors import McpConnectionError
    from tubeless.mcp import stdio_server

    server = stdio_server(sys.executable, ["-c", "pass"])
    with pytest.raises(McpConnectionError) as raised, server:
        pass
    assert raised.value.code == "TUBELESS_MCP_CONNECTION_FAILED"
    assert server.closed


def test_a_server_that_never_initializes_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A child that never answers `initialize` fails to open in bounded time; it is stopped."""
    from tubeless.errors import McpConnectionError
    from tubeless.mcp import _session, stdio_server

    monkeypatch.setattr(_session, "OPEN_SECONDS", 2.0)
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    with pytest.raises(McpConnectionError, match="did not initialize in time"):
        stdio_server(sys.executable, ["-c", script]).__enter__()
    assert process_gone(int(pid_file.read_text()))


def test_http_server_calls_and_cancellation(
    http_url: tuple[str, subprocess.Popen[bytes]], log: Path
) -> None:
    """Over streamable HTTP, calls return values and the run's signal cancels a request."""
    url, _ = http_url
    stop = threading.Event()
    with http_server(url) as server:
        tools = server.tools()
        found = outcomes(
            calls_agent(tools, [{"id": "1", "tool": "add", "input": {"a": 4, "b": 5}}]).run({})
        )
        setter = threading.Thread(target=lambda: (wait_for_log(log, "started h"), stop.set()))
        setter.start()
        run = calls_agent(tools, [{"id": "2", "tool": "stall", "input": {"tag": "h"}}]).run(
            {}, context={"signal": stop}
        )
        setter.join()
        assert run.status == "cancelled"
        wait_for_log(log, "cancelled h")
    assert found[0]["value"] == {"result": 9}


def test_http_server_killed_mid_call_is_a_recoverable_connection_loss(
    http_url: tuple[str, subprocess.Popen[bytes]], log: Path
) -> None:
    """A streamable-HTTP server killed during a call gives `TUBELESS_MCP_CONNECTION_LOST`."""
    url, process = http_url
    with http_server(url) as server:
        tools = server.tools()
        killer = threading.Thread(target=lambda: (wait_for_log(log, "started d"), process.kill()))
        killer.start()
        found = outcomes(
            calls_agent(tools, [{"id": "1", "tool": "stall", "input": {"tag": "d"}}]).run({})
        )
        killer.join()
    assert found[0]["error"]["code"] == "TUBELESS_MCP_CONNECTION_LOST"


def test_cli_lock_writes_the_lock_document(
    http_url: tuple[str, subprocess.Popen[bytes]], log: Path
) -> None:
    """`tubeless mcp lock --stdio` and `--url` print the same valid lock for the same server."""
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "tubeless", "mcp", "lock"]
    over_stdio = subprocess.run(
        [*command, "--stdio", sys.executable, str(SERVER), "stdio"],
        capture_output=True,
        env=environment,
        check=True,
    )
    over_http = subprocess.run(
        [*command, "--url", http_url[0]], capture_output=True, env=environment, check=True
    )
    lock = McpLock.from_dict(json.loads(over_stdio.stdout))
    assert over_stdio.stdout == over_http.stdout
    assert "add" in lock.by_name()
    assert not any(line.startswith("started") for line in log_lines(log))


def test_cli_lock_reports_an_unreachable_server_and_a_bad_header() -> None:
    """No server at the URL exits 2 with the code; a header without a colon exits 1, unquoted."""
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "tubeless", "mcp", "lock"]
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/mcp"
        unreachable = subprocess.run(
            [*command, "--url", url], capture_output=True, text=True, env=environment
        )
    header = subprocess.run(
        [*command, "--url", url, "--header", "Bearer-hunter2"],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert unreachable.returncode == 2
    assert "TUBELESS_MCP_CONNECTION_FAILED" in unreachable.stderr
    assert unreachable.stdout == ""
    assert header.returncode == 1
    assert "hunter2" not in header.stderr

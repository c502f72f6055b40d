"""Real MCP servers for the tests: `server.py` over stdio, and over streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from mcp_support import PATIENCE, SERVER, mcp_threads  # noqa: E402

from tubeless.mcp import McpServer, stdio_server  # noqa: E402


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test ends with no tubeless thread alive."""
    yield
    assert mcp_threads() == []


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """The file the test server appends its events to."""
    return tmp_path / "server.log"


@pytest.fixture
def make_server(log: Path) -> Callable[..., McpServer]:
    """Make a stdio `McpServer` for the test server, logging to `log`."""

    def make(variant: str = "plain") -> McpServer:
        return stdio_server(
            sys.executable, [str(SERVER), "stdio", "--log", str(log), "--variant", variant]
        )

    return make


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_url(log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A streamable-HTTP test server on loopback: its URL and its process."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), "--log", str(log)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            assert process.poll() is None, "the HTTP test server exited"
            assert time.monotonic() < deadline, "the HTTP test server never listened"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        process.wait()

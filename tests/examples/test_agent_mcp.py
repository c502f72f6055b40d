"""The MCP example: its own server, its committed lock, and planning without a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_example_answers_through_its_server() -> None:
    """`python examples/agent_mcp.py` starts its server, calls both tools and prints the answer."""
    result = _python(str(EXAMPLES / "agent_mcp.py"), "--question", "tools over stdio")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 words; TOOLS OVER STDIO\n"


def test_the_committed_lock_matches_the_server() -> None:
    """`tubeless mcp lock` on the example server prints exactly the committed lock file."""
    result = _python(
        "-m", "tubeless", "mcp", "lock", "--stdio", sys.executable,
        str(EXAMPLES / "mcp_text_server.py"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == (EXAMPLES / "agent_mcp.lock.json").read_text("utf-8")


def test_planning_the_example_starts_no_server_and_imports_no_sdk() -> None:
    """Loading and planning the pinned agent needs neither a server nor the `mcp` package."""
    script = (
        "import runpy, sys\n"
        f"module = runpy.run_path({str(EXAMPLES / 'agent_mcp.py')!r})\n"
        "assert module['agent'].plan().ok\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'mcp'))\n"
    )
    result = _python("-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"

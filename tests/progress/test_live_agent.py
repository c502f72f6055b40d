"""The live frame of a real agent run in a real pseudo-terminal, its screen replayed by pyte.

A tool call of the agent module waits until the test creates a `release` file, so the
test sees the screen while calls are in flight, without timing assumptions.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pexpect
import pytest

pyte = pytest.importorskip("pyte")

SLOW_AGENT = """
import pathlib, time

from tubeless import ToolError, define_agent, define_pipeline_command, define_tool

NOTHING = {"type": "object"}


def get(value, context):
    while not pathlib.Path("release").exists():
        if value["n"] == 9:  # ignores cancellation: only a second Ctrl-C ends it
            time.sleep(0.05)
        elif context.signal.wait(0.05):
            raise ToolError("CANCELLED", "cancelled")
    if value["n"] == 2:
        raise ToolError("NOT_FOUND", "no item 2")
    return value["n"]


def decide(state, context):
    ns = {1: [0, 1, 2], 2: [4]}.get(context.turn)
    if context.options.get("stubborn"):
        ns = [9] if context.turn == 1 else None
    if ns is None:
        return {"kind": "finish", "result": state}
    calls = [{"id": f"get-{n}", "tool": "get", "input": {"n": n}} for n in ns]
    return {"kind": "continue", "calls": calls}


agent = define_agent(
    id="slow",
    input_schema={"type": "object", "properties": {"stubborn": {"type": "boolean"}}},
    result_schema={},
    tools={"get": define_tool(description="Get.", input_schema=NOTHING, output_schema={}, run=get)},
    initial_state=lambda options: {"n": 0},
    decide=decide,
    reduce=lambda state, outcomes: {"n": state["n"] + len(outcomes)},
    limits={"max_concurrency": 3},
)
command = define_pipeline_command(agent)
"""

ROOT = Path(__file__).resolve().parents[2]
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Terminal:
    """The CLI in a 100x30 pseudo-terminal, with everything it wrote replayed on a screen."""

    def __init__(self, directory: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "FORCE_COLOR")}
        env.update(TERM="xterm-256color", PYTHONUTF8="1", PYTHONPATH=str(ROOT))
        self.process = pexpect.spawn(
            sys.executable,
            ["-m", "tubeless", "run", "agent.py", "--", *args],
            cwd=str(directory),
            dimensions=(30, 100),
            env=env,
            encoding="utf-8",
            timeout=60,
        )
        self.screen = pyte.Screen(100, 30)
        self.stream = pyte.Stream(self.screen)
        self.output = ""

    def lines(self) -> list[str]:
        """The screen's non-blank lines."""
        return [line.rstrip() for line in self.screen.display if line.strip()]

    def wait_for(self, found: object, what: str) -> list[str]:
        """Read output until `found(lines)` holds; fail after 60 s (the run is stuck)."""
        deadline = time.monotonic() + 60
        while not found(self.lines()):  # type: ignore[operator]
            assert time.monotonic() < deadline, f"{what} never showed: {self.lines()}"
            try:
                self._feed(self.process.read_nonblocking(65536, timeout=0.1))
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                assert found(self.lines()), f"{what} never showed: {self.lines()}"  # type: ignore[operator]
        return self.lines()

    def finish(self) -> list[str]:
        """Read to the end of output and wait for the process."""
        while True:
            try:
                self._feed(self.process.read_nonblocking(65536, timeout=60))
            except pexpect.EOF:
                break
        self.process.close()
        return self.lines()

    def _feed(self, text: str) -> None:
        self.output += text
        self.stream.feed(text)


def _running(lines: list[str], call: str) -> bool:
    return any(line.strip()[:1] in SPINNER and line.strip()[2:] == call for line in lines)


@pytest.mark.slow
def test_running_calls_show_as_running_and_the_final_screen_reads_in_order(
    tmp_path: Path,
) -> None:
    """Calls in flight have spinners; at the end turns are in order, failures stay, done last."""
    (tmp_path / "agent.py").write_text(SLOW_AGENT, encoding="utf-8")
    terminal = Terminal(tmp_path)
    try:
        shown = terminal.wait_for(
            lambda lines: all(_running(lines, f"get-{n}") for n in range(3)), "3 running calls"
        )
        assert not any(line.strip() == "○ calls" for line in shown)
        (tmp_path / "release").write_text("go")
        final = terminal.finish()
    finally:
        terminal.process.terminate(force=True)
    frame = final[: final.index(next(line for line in final if "done in" in line)) + 1]
    assert frame[0] == "Pipeline slow (1 steps, dryRun=false)"
    assert frame[1].startswith("  ✓ agent (")
    assert frame[-2] == "  ✓ finalize (0ms)"
    names = [line.strip().split(" [")[0] for line in frame[2:-2]]
    assert names == ["✓ turn 1", "✗ get-2 NOT_FOUND: no item 2", "✓ turn 2", "✓ turn 3"]
    assert frame[-1].startswith("Pipeline slow: done in ")
    assert frame[-1].endswith("(status=completed, steps=1, errors=0, failed calls=1)")


@pytest.mark.slow
def test_a_second_ctrl_c_erases_the_frame_and_shows_the_cursor(tmp_path: Path) -> None:
    """A call that ignores cancellation: the second Ctrl-C kills, leaving a clean terminal."""
    (tmp_path / "agent.py").write_text(SLOW_AGENT, encoding="utf-8")
    terminal = Terminal(tmp_path, "--stubborn")
    try:
        terminal.wait_for(lambda lines: _running(lines, "get-9"), "the running call")
        terminal.process.kill(signal.SIGINT)
        terminal.wait_for(
            lambda lines: any("SIGINT received" in line for line in lines), "the first SIGINT"
        )
        terminal.process.kill(signal.SIGINT)
        final = terminal.finish()
    finally:
        terminal.process.terminate(force=True)
    hidden = terminal.output.rfind("\x1b[?25l")
    assert hidden != -1
    assert terminal.output.rfind("\x1b[?25h") > hidden  # the cursor is shown again
    assert not [line for line in final if "get-9" in line or "turn 1" in line]
    assert any("SIGINT received" in line for line in final)

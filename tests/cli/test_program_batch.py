"""`tubeless batch`: result lines as runs end, resumable after SIGKILL, a bar on a terminal."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pexpect
import pyte
import pytest

AGENT = """
import pathlib
import tubeless
from tubeless.testing import scripted_decide

def record(value, context):
    with pathlib.Path(value["effects"]).open("a") as stream:
        stream.write(f"{value['n']}\\n")
    context.sleep(value["seconds"])
    if value["n"] % 5 == 4:
        raise tubeless.ToolError("FIFTH", "every fifth input fails")
    return value["n"] * 2

def call(state, context):
    return {"kind": "continue", "calls": [{"id": "c", "tool": "record", "input": dict(state)}]}

def finish(state, context):
    outcome = state["outcome"]
    if not outcome["ok"]:
        raise RuntimeError(outcome["error"]["code"])
    return {"kind": "finish", "result": outcome["value"]}

agent = tubeless.define_agent(
    id="recorder",
    input_schema={"type": "object", "required": ["n"]},
    result_schema={"type": "integer"},
    initial_state=lambda o: {"n": o["n"], "effects": o["effects"], "seconds": o.get("seconds", 0)},
    decide=scripted_decide([call, finish]),
    reduce=lambda state, outcomes: {**state, "outcome": outcomes[0]},
    tools={"record": tubeless.define_tool(
        description="Record n", input_schema={"type": "object"},
        output_schema={"type": "integer"}, run=record)},
)
"""


def _tubeless(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tubeless", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _project(tmp_path: pathlib.Path, count: int, seconds: float = 0) -> pathlib.Path:
    (tmp_path / "recorder.py").write_text(AGENT)
    effects = str(tmp_path / "effects.txt")
    lines = [json.dumps({"n": n, "effects": effects, "seconds": seconds}) for n in range(count)]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def _rows(path: pathlib.Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_batch_writes_one_line_per_input_and_a_summary(tmp_path: pathlib.Path) -> None:
    """Completed inputs carry their value, failed ones their root cause's code; exit 6."""
    _project(tmp_path, 10)
    with (tmp_path / "in.jsonl").open("a") as stream:
        stream.write("\n{not json\n[1, 2]\n")
    done = _tubeless(
        "batch",
        "recorder.py",
        "--inputs",
        "in.jsonl",
        "--output",
        "out.jsonl",
        "--workers",
        "3",
        cwd=tmp_path,
    )
    assert done.returncode == 6, done.stderr
    rows = _rows(tmp_path / "out.jsonl")
    assert [row["index"] for row in rows] == [*range(10), 11, 12]
    assert rows[0] == {"index": 0, "status": "completed", "value": 0}
    assert rows[4]["status"] == "failed"
    assert rows[4]["error"]["code"] == "TUBELESS_STEP_FAILED"  # a RuntimeError in decide
    assert "FIFTH" in rows[4]["error"]["message"]
    assert rows[10]["error"]["code"] == "TUBELESS_BATCH_INPUT_INVALID"
    assert rows[10]["error"]["message"].startswith("line 12: not JSON")
    assert rows[11]["error"]["message"].startswith("line 13: expected a JSON object")
    assert re.search(r"^completed +8$", done.stdout, re.M)
    assert re.search(r"^failed +4$", done.stdout, re.M)
    assert "TUBELESS_BATCH_INPUT_INVALID" in done.stdout
    assert "p50" in done.stdout and "p95" in done.stdout
    assert done.stderr.count("] input ") == 12  # a plain line per input when not a terminal


def test_every_input_completed_exits_zero(tmp_path: pathlib.Path) -> None:
    """A batch whose inputs all complete exits 0, and running it again runs nothing."""
    _project(tmp_path, 4)
    first = _tubeless(
        "batch", "recorder.py", "--inputs", "in.jsonl", "--output", "out.jsonl", cwd=tmp_path
    )
    again = _tubeless(
        "batch", "recorder.py", "--inputs", "in.jsonl", "--output", "out.jsonl", cwd=tmp_path
    )
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert Counter((tmp_path / "effects.txt").read_text().split()) == Counter(["0", "1", "2", "3"])


def test_the_output_must_not_be_the_inputs(tmp_path: pathlib.Path) -> None:
    """Writing results over the inputs is refused before anything runs."""
    _project(tmp_path, 2)
    done = _tubeless(
        "batch", "recorder.py", "--inputs", "in.jsonl", "--output", "in.jsonl", cwd=tmp_path
    )
    assert done.returncode == 1
    assert "--output must not be the --inputs file" in done.stderr


@pytest.mark.slow
def test_a_killed_batch_run_again_ends_with_the_same_output(tmp_path: pathlib.Path) -> None:
    """SIGKILL mid-batch, then the same command: the output equals an uninterrupted
    batch's, and no input whose line was written runs again."""
    project = (
        _project(tmp_path / "killed", 16, seconds=0.2)
        if (tmp_path / "killed").mkdir() is None
        else None
    )
    assert project is not None
    args = [
        sys.executable,
        "-m",
        "tubeless",
        "batch",
        "recorder.py",
        "--inputs",
        "in.jsonl",
        "--output",
        "out.jsonl",
        "--workers",
        "2",
    ]
    process = subprocess.Popen(
        args, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    output = project / "out.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not output.exists() or len(output.read_text().splitlines()) < 5
    ):
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    finished = {row["index"] for row in _rows(output)}
    assert 5 <= len(finished) < 16
    before = Counter((project / "effects.txt").read_text().split())
    rerun = subprocess.run(
        args, cwd=project, capture_output=True, text=True, timeout=120, check=False
    )
    assert rerun.returncode == 6, rerun.stderr
    after = Counter((project / "effects.txt").read_text().split())
    assert all(after[str(index)] == before[str(index)] for index in finished)

    (tmp_path / "whole").mkdir()
    whole = _project(tmp_path / "whole", 16)
    subprocess.run(args, cwd=whole, capture_output=True, timeout=120, check=False)
    effects = str(project / "effects.txt"), str(whole / "effects.txt")
    assert output.read_text() == (whole / "out.jsonl").read_text().replace(effects[1], effects[0])


@pytest.mark.slow
def test_the_bar_on_a_terminal_counts_done_and_failed(tmp_path: pathlib.Path) -> None:
    """In a pseudo-terminal the bar is redrawn in place and ends with the final counts."""
    _project(tmp_path, 10, seconds=0.05)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "tubeless", "batch", "recorder.py", "--inputs", "in.jsonl", "--output", "out.jsonl"],
        cwd=str(tmp_path),
        dimensions=(24, 100),
        encoding="utf-8",
        timeout=60,
        env={**os.environ, "TERM": "xterm"},
    )
    child.expect(pexpect.EOF)
    child.close()
    screen = pyte.Screen(100, 24)
    pyte.Stream(screen).feed(child.before.replace("\n", "\r\n"))
    text = [line.rstrip() for line in screen.display if line.strip()]
    bars = [line for line in text if line.startswith("[")]
    assert bars == ["[########################] 10/10 done, 2 failed, ETA --:--"]
    assert child.exitstatus == 6
    assert any(line.startswith("completed") for line in text)

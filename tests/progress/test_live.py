"""Tests for the interactive reporter, in process and under a real pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tubeless.progress import create_reporter
from tubeless.progress._reporter import PipelineReporter

_SEQUENCE = re.compile(r"\x1b\[(\??)([0-9;]*)([A-Za-z])")


class Screen:
    """A tiny terminal: enough of VT100 to replay what the reporter writes."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.lines = [""]
        self.row = 0
        self.col = 0

    def feed(self, data: str) -> Screen:
        position = 0
        while position < len(data):
            match = _SEQUENCE.match(data, position)
            if match is not None:
                self._control(*match.groups())
                position = match.end()
                continue
            char = data[position]
            position += 1
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row, self.col = self.row + 1, 0
                if self.row == len(self.lines):
                    self.lines.append("")
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + char + line[self.col + 1 :]
                self.col += 1
        return self

    def _control(self, private: str, params: str, final: str) -> None:
        if private or final == "m":
            return  # cursor visibility, synchronized output and colour change no text
        count = int(params or "1")
        if final == "F":
            # The cursor cannot leave the visible screen for the scrollback.
            top = max(0, len(self.lines) - self.rows)
            self.row, self.col = max(top, self.row - count), 0
        elif final == "J":
            self.lines[self.row] = self.lines[self.row][: self.col]
            for index in range(self.row + 1, len(self.lines)):
                self.lines[index] = ""
        elif final == "K":
            self.lines[self.row] = self.lines[self.row][: self.col]

    def text(self) -> list[str]:
        lines = [line.rstrip() for line in self.lines]
        while lines and not lines[-1]:
            lines.pop()
        return lines


def strip_ansi(text: str) -> str:
    return _SEQUENCE.sub("", text)


def record(name: str, payload: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """One trace v3 record of the run `demo:run-1`."""
    base: dict[str, Any] = {
        "version": 3,
        "name": name,
        "pipelineId": "demo",
        "runId": "demo:run-1",
        "timestampMs": 1_700_000_000_000,
        "payload": payload or {},
    }
    return {**base, **fields}


def started(steps: int) -> dict[str, Any]:
    return record(
        "pipeline.started", {"dryRun": False, "planOk": True, "stepCount": steps, "targetIds": []}
    )


def planned(step_id: str, name: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"dependencies": [], "dryRun": "run", "selected": True}
    if name is not None:
        payload["name"] = name
    return record("step.planned", payload, stepId=step_id)


def running(step_id: str, progress: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = {} if progress is None else {"progress": progress}
    return record("step.running", payload, stepId=step_id, attemptId=f"{step_id}:a")


def complete(step_id: str, duration_ms: float) -> dict[str, Any]:
    return record("step.complete", {"status": "completed"}, stepId=step_id, durationMs=duration_ms)


def failed(step_id: str, message: str, kind: str = "failed") -> dict[str, Any]:
    error = {
        "code": "TUBELESS_STEP_FAILED",
        "kind": "step",
        "phase": "execution",
        "message": message,
    }
    return record(f"step.{kind}", {"status": kind}, stepId=step_id, error=error)


def skipped(step_id: str, reason: str, message: str | None = None) -> dict[str, Any]:
    payload = {"status": "skipped", "reason": reason}
    if message is not None:
        payload["message"] = message
    return record("step.skipped", payload, stepId=step_id)


def finished(status: str, steps: int, errors: int, duration_ms: float) -> dict[str, Any]:
    payload = {
        "status": status,
        "dryRun": False,
        "errorCount": errors,
        "finalized": True,
        "stepCount": steps,
    }
    return record("pipeline.completed", payload, durationMs=duration_ms)


def details(count: int, running_index: int) -> list[dict[str, Any]]:
    return [
        {"id": f"item-{index:02d}", "status": "running" if index == running_index else "completed"}
        for index in range(count)
    ]


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class WatchedStream(io.StringIO):
    """A StringIO whose writes wake up waiters, so tests wait for frames without sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def wait_for(self, fragment: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: fragment in self.getvalue(), timeout=10), fragment


def interactive(stream: io.StringIO, **options: Any) -> PipelineReporter:
    options.setdefault("symbols", "unicode")
    options.setdefault("color", False)
    options.setdefault("clock", FakeClock())
    return create_reporter(stream=stream, mode="interactive", **options)


def feed(reporter: PipelineReporter, records: list[dict[str, Any]]) -> None:
    for item in records:
        reporter.hooks["on_record"](item)


def full_run() -> list[dict[str, Any]]:
    return [
        started(4),
        planned("load", "Load Data"),
        planned("fan"),
        planned("later"),
        planned("skipped"),
        skipped("skipped", "dry-run"),
        running("load"),
        running("load", {"completed": 4, "total": 10, "message": "records", "detailCount": 0}),
        complete("load", 42),
        running("fan"),
        running(
            "fan",
            {
                "completed": 1,
                "total": 2,
                "message": "1/2 items · 1 running",
                "details": [
                    {"id": "shard-a", "label": "parse", "status": "completed", "depth": 1},
                    {
                        "id": "shard-b",
                        "name": "Shard B",
                        "status": "running",
                        "completed": 1,
                        "total": 2,
                    },
                ],
                "detailCount": 2,
            },
        ),
        complete("fan", 1500),
        running("later"),
        failed("later", "boom\nagain"),
        record("pipeline.finalize.started"),
        record("pipeline.finalize.completed", durationMs=3),
        finished("failed", 4, 1, 1600),
    ]


FINAL_TREE = [
    "Pipeline demo (4 steps, dryRun=false)",
    "  ✓ Load Data (42ms)",
    "  ✓ fan (1.5s)",
    "      ✓ shard-a parse",
    "    ✓ Shard B [██████████░░░░░░░░░░] 50% 1/2",
    "  ✗ later: boom again",
    "  – skipped (dry-run)",
    "  ✓ finalize (3ms)",
    "Pipeline demo: done in 1.6s (status=failed, steps=4, errors=1)",
]


def test_interactive_final_frame() -> None:
    """After the run the frame shows the summary header and every step's final state."""
    stream = io.StringIO()
    reporter = interactive(stream)
    feed(reporter, full_run())
    reporter.close()
    assert reporter.mode == "interactive"
    assert Screen(24).feed(stream.getvalue()).text() == FINAL_TREE
    assert stream.getvalue().endswith("\x1b[?25h")
    assert stream.getvalue().count("\x1b[?25h") == 1


def test_interactive_running_frame_shows_bar_percent_message_and_elapsed() -> None:
    """A running step shows spinner, bar, percent, counts, message and elapsed time."""
    clock = FakeClock()
    stream = io.StringIO()
    reporter = interactive(stream, clock=clock, refresh_interval=0.5)
    feed(reporter, [started(2), planned("a", "Alpha"), planned("b"), running("a")])
    clock.now += 2.5
    feed(
        reporter,
        [running("a", {"completed": 3, "total": 4, "message": "rows\x1b[31m!", "detailCount": 0})],
    )
    reporter.close()
    assert Screen(24).feed(stream.getvalue()).text() == [
        "Pipeline demo (2 steps, dryRun=false)",
        "  ⠴ Alpha [███████████████░░░░░] 75% 3/4 rows! 2.5s",
        "  ○ b waiting",
    ]


def test_an_agent_step_shows_its_turn_and_limit_not_a_percentage() -> None:
    """An iterating step counts turns against a limit: its row says `turn 3 (limit 6)`."""
    clock = FakeClock()
    stream = io.StringIO()
    reporter = interactive(stream, clock=clock, refresh_interval=0.5)
    agent = planned("agent")
    agent["payload"]["nestedPipeline"] = {"mode": "iterate", "maxIterations": 6}
    feed(reporter, [started(1), agent, running("agent")])
    clock.now += 1
    progress = {"completed": 2, "total": 6, "message": "turn 3 (limit 6): 1/2 calls"}
    feed(reporter, [running("agent", {**progress, "detailCount": 0})])
    reporter.close()
    assert Screen(24).feed(stream.getvalue()).text() == [
        "Pipeline demo (1 steps, dryRun=false)",
        "  ⠹ agent turn 3 (limit 6): 1/2 calls 1s",
    ]


def test_interactive_ascii_frame() -> None:
    """ASCII symbols use `=`/`-` bars and ASCII spinner frames."""
    stream = io.StringIO()
    reporter = interactive(stream, symbols="ascii", progress_bar_width=8)
    feed(
        reporter,
        [started(1), planned("a"), running("a", {"completed": 3, "total": 8, "detailCount": 0})],
    )
    reporter.close()
    assert Screen(24).feed(stream.getvalue()).text() == [
        "Pipeline demo (1 steps, dryRun=false)",
        "  | a [===-----] 38% 3/8 0ms",
    ]


def test_interactive_progress_without_total_and_cancelled_details() -> None:
    """Counts without a total print bare; cancelled details say so after the parent settles."""
    stream = io.StringIO()
    reporter = interactive(stream)
    progress = {
        "completed": 2.5,
        "message": "items",
        "details": [
            {"id": "child", "status": "cancelled", "label": "operator stopped"},
            {"id": "queued", "status": "pending"},
            {"id": "deep", "status": "skipped", "depth": 50},
        ],
        "detailCount": 3,
    }
    feed(reporter, [started(1), planned("work"), running("work"), running("work", progress)])
    feed(reporter, [failed("work", "stopped", kind="cancelled"), finished("cancelled", 1, 1, 10)])
    reporter.close()
    assert Screen(24).feed(stream.getvalue()).text() == [
        "Pipeline demo (1 steps, dryRun=false)",
        "  – work: cancelled: stopped",
        "    – child cancelled: operator stopped",
        "    ○ queued",
        " " * 68 + "– deep",
        "Pipeline demo: done in 10ms (status=cancelled, steps=1, errors=1)",
    ]


def test_interactive_logs_print_above_the_frame() -> None:
    """On a small terminal, log lines scroll above the frame and stay there."""
    stream = io.StringIO()
    reporter = interactive(stream)
    reporter.log.info("before the run")
    feed(reporter, [started(1), planned("a"), running("a")])
    reporter.log.info("first\nsecond\x1b]2;title\x07")
    reporter.log.warning("careful")
    reporter.log.error("broken\tbadly")
    feed(reporter, [complete("a", 5), finished("completed", 1, 0, 6)])
    reporter.log.info("after the run")
    reporter.close()
    assert Screen(24).feed(stream.getvalue()).text() == [
        "before the run",
        "first",
        "second",
        "! careful",
        "✗ broken badly",
        "Pipeline demo (1 steps, dryRun=false)",
        "  ✓ a (5ms)",
        "Pipeline demo: done in 6ms (status=completed, steps=1, errors=0)",
        "after the run",
    ]


def test_interactive_colour_only_when_enabled() -> None:
    """Colour codes appear in the frame when colour is on, never when it is off."""
    colored, muted = io.StringIO(), io.StringIO()
    for stream, color in ((colored, True), (muted, False)):
        reporter = interactive(stream, color=color)
        feed(reporter, full_run())
        reporter.close()
    assert "\x1b[32m✓\x1b[0m Load Data \x1b[2m(42ms)\x1b[0m" in colored.getvalue()
    assert "\x1b[31mPipeline demo: done in 1.6s" in colored.getvalue()
    assert not re.search(r"\x1b\[[0-9;]*m", muted.getvalue())


def test_interactive_sanitises_ids_names_and_details() -> None:
    """Pipeline ids, step names, details and messages cannot inject escape sequences."""
    stream = io.StringIO()
    reporter = interactive(stream, symbols="ascii")
    first = started(1)
    first["pipelineId"] = "inter\x1b]2;pipeline-title\x07active"
    feed(reporter, [first, planned("s", "Na\x1b[2Jme\u202e")])
    detail = {"id": "row\x1b]8;;http://x\x07link", "label": "lab\nel", "status": "running"}
    feed(
        reporter,
        [running("s"), running("s", {"completed": 1, "details": [detail], "detailCount": 1})],
    )
    feed(reporter, [skipped("s", "policy", "cached\x1b]2;owned\x07 safely")])
    reporter.close()
    output = stream.getvalue()
    assert "pipeline-title" not in output
    assert "owned" not in output
    assert "\x1b]" not in output
    assert "\u202e" not in output
    assert Screen(24).feed(output).text() == [
        "Pipeline interactive (1 steps, dryRun=false)",
        "  - Name (cached safely)",
        "    - rowlink lab el",
    ]


def test_refresh_thread_moves_spinner_and_elapsed_and_stops_on_close() -> None:
    """The refresh thread repaints a running step as the clock moves; close joins it."""
    baseline = threading.active_count()
    clock = FakeClock()
    stream = WatchedStream()
    reporter = interactive(stream, clock=clock, refresh_interval=0.03125, symbols="ascii")
    feed(reporter, [started(1), planned("busy"), running("busy")])
    assert threading.active_count() == baseline + 1
    stream.wait_for("- busy 0ms")
    clock.now += 3.03125
    stream.wait_for("\\ busy 3s")
    clock.now += 0.03125
    stream.wait_for("| busy 3.1s")
    reporter.close()
    assert threading.active_count() == baseline
    assert not any(thread.name == "tubeless-reporter-refresh" for thread in threading.enumerate())


def test_close_is_idempotent_and_stops_everything() -> None:
    """A second close changes nothing; records after close are ignored, logs still print."""
    baseline = threading.active_count()
    stream = io.StringIO()
    with interactive(stream) as reporter:
        feed(reporter, [started(1), planned("a"), running("a")])
    reporter.close()
    after_close = stream.getvalue()
    feed(reporter, [complete("a", 5), finished("completed", 1, 0, 6)])
    assert stream.getvalue() == after_close
    reporter.log.info("late line")
    assert stream.getvalue() == after_close + "late line\n"
    assert threading.active_count() == baseline
    assert Screen(24).feed(after_close).text() == [
        "Pipeline demo (1 steps, dryRun=false)",
        "  ⠋ a 0ms",
    ]


def test_pipeline_completed_closes_the_reporter() -> None:
    """The `pipeline.completed` record stops the refresh thread by itself."""
    baseline = threading.active_count()
    reporter = interactive(io.StringIO())
    feed(reporter, full_run())
    assert threading.active_count() == baseline


def test_close_without_a_run_writes_nothing() -> None:
    """A reporter that saw no run starts no thread and writes nothing."""
    stream = io.StringIO()
    reporter = interactive(stream)
    reporter.close()
    assert stream.getvalue() == ""


def test_tall_finished_tree_scrolls_out_once() -> None:
    """A finished tree taller than the terminal is printed once, in full."""
    stream = io.StringIO()
    reporter = interactive(stream)
    progress = {"completed": 39, "total": 40, "details": details(40, 20), "detailCount": 40}
    feed(reporter, [started(1), planned("fan"), running("fan"), running("fan", progress)])
    feed(reporter, [complete("fan", 80), finished("completed", 1, 0, 90)])
    reporter.close()
    output = stream.getvalue()
    assert output.count("done in") == 1
    screen = Screen(24).feed(output).text()
    assert screen[0] == "Pipeline demo (1 steps, dryRun=false)"
    assert screen[1].startswith("  ✓ fan (80ms)")
    assert screen[2:-1] == [f"    ✓ item-{index:02d}" for index in range(40)]
    assert screen[-1] == "Pipeline demo: done in 90ms (status=completed, steps=1, errors=0)"


CHILD = textwrap.dedent(
    """
    import itertools, json, sys, threading
    from tubeless.progress import create_reporter

    script = json.load(open(sys.argv[1], encoding="utf-8"))
    baseline = threading.active_count()
    # Every reading is a second later, so no repaint is ever held back for coalescing.
    clock = itertools.count(1000.0, 1.0).__next__
    reporter = create_reporter(stream=sys.stdout, env=script["env"], clock=clock)
    for step in script["steps"]:
        if "log" in step:
            level, message = step["log"]
            getattr(reporter.log, level)(message)
        else:
            reporter.hooks["on_record"](step["record"])
    reporter.close()
    print(f"MODE={reporter.mode} THREADS={threading.active_count()} BASELINE={baseline}")
    """
)


def run_in_terminal(tmp_path: Path, steps: list[dict[str, Any]], rows: int, columns: int) -> str:
    """Run the records through a reporter inside a real pseudo-terminal; return its output."""
    child = tmp_path / "child.py"
    child.write_text(CHILD, encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"env": {"TERM": "xterm-256color"}, "steps": steps}), encoding="utf-8"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CI", "NO_COLOR", "FORCE_COLOR")
    }
    env.update(TERM="xterm-256color", PYTHONUTF8="1")
    process = pexpect.spawn(
        sys.executable,
        [str(child), str(script)],
        dimensions=(rows, columns),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    process.expect(pexpect.EOF)
    output = process.before
    process.close()
    assert process.exitstatus == 0, output
    assert isinstance(output, str)
    return output


def records(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"record": item} for item in items]


@pytest.mark.slow
def test_interactive_under_a_real_terminal(tmp_path: Path) -> None:
    """Auto mode on a pty redraws in place; the final screen is the tree; no thread is left."""
    steps = [
        *records(full_run()[:9]),
        {"log": ["info", "loaded a batch"]},
        *records(full_run()[9:]),
    ]
    output = run_in_terminal(tmp_path, steps, rows=24, columns=80)
    screen = Screen(24).feed(output).text()
    assert screen == ["loaded a batch", *FINAL_TREE, "MODE=interactive THREADS=1 BASELINE=1"]
    assert "\x1b[32m" in output  # colour decided from a TTY with TERM=xterm-256color
    assert "\x1b[?25l" in output
    assert output.count("\x1b[?25h") == 1


@pytest.mark.slow
def test_tall_frame_in_a_small_terminal_shows_a_window(tmp_path: Path) -> None:
    """With 40 detail rows in a 10-row terminal, frames show `rows above/below` markers."""
    progress = {"completed": 20, "total": 40, "details": details(40, 20), "detailCount": 40}
    steps = records(
        [
            started(1),
            planned("fan"),
            running("fan"),
            running("fan", progress),
            complete("fan", 80),
            finished("completed", 1, 0, 90),
        ]
    )
    output = run_in_terminal(tmp_path, steps, rows=10, columns=80)
    plain = strip_ansi(output)
    assert "  … 18 rows above\r\n" in plain
    assert "  … 17 rows below\r\n" in plain
    frames = output.split("\x1b[?2026h")[1:]
    assert all(frame.count("\x1b[K") < 10 for frame in frames)
    assert plain.count("done in") == 1
    screen = Screen(10).feed(output).text()
    assert screen[-44:-42] == ["Pipeline demo (1 steps, dryRun=false)", "  ✓ fan (80ms)"]
    assert screen[-42:-2] == [f"    ✓ item-{index:02d}" for index in range(40)]
    assert screen[-2] == "Pipeline demo: done in 90ms (status=completed, steps=1, errors=0)"


@pytest.mark.slow
def test_log_pane_beside_the_frame_on_a_wide_terminal(tmp_path: Path) -> None:
    """On a 120x12 terminal logs go to a pane beside the frame, and above the final frame."""
    steps = records([started(1), planned("work"), running("work")])
    steps += [{"log": ["info", f"line {index}"]} for index in range(10)]
    steps += [
        {"log": ["warning", "first\nsecond"]},
        {"log": ["error", "\x1b[2Jfailure\x01\tmessage"]},
    ]
    steps += records([complete("work", 12), finished("completed", 1, 0, 20)])
    output = run_in_terminal(tmp_path, steps, rows=12, columns=120)
    frames = [strip_ansi(frame) for frame in output.split("\x1b[?2026h")[1:]]
    last_with_pane = [frame for frame in frames if "Logs" in frame][-1]
    assert "╭─ Logs " in last_with_pane
    assert "│ ! first" in last_with_pane
    assert "│ second" in last_with_pane
    assert "│ ✗ failure message" in last_with_pane
    assert "│ line 5" in last_with_pane
    assert "line 4" not in last_with_pane
    assert "\x1b[2J" not in output
    assert strip_ansi(output).count("line 0\r\n") == 1  # printed once, when the pane goes
    assert Screen(12).feed(output).text()[-17:] == [
        *(f"line {index}" for index in range(10)),
        "! first",
        "second",
        "✗ failure message",
        "Pipeline demo (1 steps, dryRun=false)",
        "  ✓ work (12ms)",
        "Pipeline demo: done in 20ms (status=completed, steps=1, errors=0)",
        "MODE=interactive THREADS=1 BASELINE=1",
    ]


@pytest.mark.slow
def test_the_final_frame_counts_failed_calls_of_a_completed_run(tmp_path: Path) -> None:
    """In a real terminal, a run that completed although calls failed says so at the end."""
    calls = [
        {"id": "iteration-1/calls/c0", "status": "failed", "label": "UNKNOWN_CITY: no city"},
        {"id": "iteration-1/calls/c1", "status": "completed"},
        {"id": "iteration-2/calls/c0", "status": "failed", "label": "UNKNOWN_CITY: no city"},
    ]
    steps = records(
        [
            started(1),
            planned("agent"),
            running("agent", {"completed": 1, "message": "turn 2", "details": calls}),
            # The batch shown collapsed afterwards adds no failure.
            running(
                "agent",
                {"completed": 2, "details": [{"id": "iteration-1/calls", "status": "failed"}]},
            ),
            complete("agent", 12),
            finished("completed", 1, 0, 15),
        ]
    )
    screen = Screen(24).feed(run_in_terminal(tmp_path, steps, rows=24, columns=100)).text()
    assert screen[0] == "Pipeline demo (1 steps, dryRun=false)"
    assert (
        "Pipeline demo: done in 15ms (status=completed, steps=1, errors=0, failed calls=2)"
    ) in screen

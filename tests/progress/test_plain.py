"""Tests for `create_reporter` and the plain (append-only) reporter."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tubeless.progress import create_reporter
from tubeless.progress._live import InteractiveReporter
from tubeless.progress._plain import PlainReporter
from tubeless.progress._reporter import PipelineReporter

START_MS = 1_700_000_000_000


class Records:
    """Builds the trace v3 records of one run, as an executor emits them."""

    def __init__(self, pipeline_id: str = "demo", run_id: str = "demo:run-1") -> None:
        self.pipeline_id = pipeline_id
        self.run_id = run_id
        self.now_ms = START_MS

    def make(
        self, name: str, payload: dict[str, Any] | None = None, **fields: Any
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "version": 3,
            "name": name,
            "pipelineId": self.pipeline_id,
            "runId": self.run_id,
            "timestampMs": self.now_ms,
            "payload": payload or {},
        }
        record.update(fields)
        return record

    def started(self, step_count: int, *, dry_run: bool = False) -> dict[str, Any]:
        return self.make(
            "pipeline.started",
            {"dryRun": dry_run, "planOk": True, "stepCount": step_count, "targetIds": []},
        )

    def planned(
        self, step_id: str, name: str | None = None, description: str | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "dependencies": [],
            "optionalDependencies": [],
            "skipAfterFailureOf": [],
            "dryRun": "run",
            "runtimeSkipPossible": False,
            "selected": True,
            "selectionReasons": ["all"],
        }
        if name is not None:
            payload["name"] = name
        if description is not None:
            payload["description"] = description
        return self.make("step.planned", payload, stepId=step_id)

    def running(self, step_id: str, progress: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = {} if progress is None else {"progress": {"detailCount": 0, **progress}}
        return self.make("step.running", payload, stepId=step_id, attemptId=f"{step_id}:a")

    def complete(self, step_id: str, duration_ms: float) -> dict[str, Any]:
        return self.make(
            "step.complete",
            {"status": "completed"},
            stepId=step_id,
            attemptId=f"{step_id}:a",
            durationMs=duration_ms,
        )

    def skipped(
        self,
        step_id: str,
        reason: str,
        *,
        dependency_id: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"status": "skipped", "reason": reason}
        if dependency_id is not None:
            payload["dependencyId"] = dependency_id
        if message is not None:
            payload["message"] = message
        return self.make("step.skipped", payload, stepId=step_id)

    def failed(self, step_id: str, message: str, *, cancelled: bool = False) -> dict[str, Any]:
        kind = "cancelled" if cancelled else "failed"
        error = {
            "code": "TUBELESS_STEP_FAILED",
            "kind": "step",
            "phase": "execution",
            "message": message,
        }
        return self.make(
            f"step.{kind}",
            {"status": kind},
            stepId=step_id,
            attemptId=f"{step_id}:a",
            error=error,
            durationMs=5,
        )

    def finalize_started(self) -> dict[str, Any]:
        return self.make("pipeline.finalize.started")

    def finalize_completed(self, duration_ms: float) -> dict[str, Any]:
        return self.make("pipeline.finalize.completed", durationMs=duration_ms)

    def finalize_failed(self, message: str) -> dict[str, Any]:
        error = {
            "code": "TUBELESS_FINALIZATION_FAILED",
            "kind": "finalization",
            "phase": "finalization",
            "message": message,
        }
        return self.make("pipeline.finalize.failed", durationMs=2, error=error)

    def completed(
        self, status: str, step_count: int, error_count: int, duration_ms: float
    ) -> dict[str, Any]:
        payload = {
            "status": status,
            "dryRun": False,
            "errorCount": error_count,
            "finalized": True,
            "stepCount": step_count,
        }
        return self.make("pipeline.completed", payload, durationMs=duration_ms)

    def log(self, level: str, message: str) -> dict[str, Any]:
        return self.make("pipeline.log", {"level": level, "message": message})


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(reporter: PipelineReporter, records: list[dict[str, Any]]) -> None:
    for record in records:
        reporter.hooks["on_record"](record)


def plain(**options: Any) -> tuple[PipelineReporter, io.StringIO]:
    stream = io.StringIO()
    options.setdefault("symbols", "ascii")
    options.setdefault("color", False)
    return create_reporter(stream=stream, mode="plain", **options), stream


def successful_run(r: Records) -> list[dict[str, Any]]:
    return [
        r.started(2),
        r.planned("build", "Build Artifact", "Build the artifact"),
        r.planned("write"),
        r.running("build"),
        r.complete("build", 42),
        r.running("write"),
        r.complete("write", 1500),
        r.finalize_started(),
        r.finalize_completed(3),
        r.completed("completed", 2, 0, 1550),
    ]


def test_plain_reporter_prints_the_run_timeline() -> None:
    """A successful run prints the start, every step, finalize and the summary line."""
    reporter, stream = plain()
    feed(reporter, successful_run(Records()))
    assert stream.getvalue().splitlines() == [
        "Pipeline demo: starting (2 steps, dryRun=false)",
        "  -> Build Artifact - Build the artifact",
        "  ok Build Artifact (42ms)",
        "  -> write",
        "  ok write (1.5s)",
        "  -> finalize",
        "  ok finalize (3ms)",
        "Pipeline demo: done in 1.6s (status=completed, steps=2, errors=0)",
    ]
    assert reporter.mode == "plain"
    assert isinstance(reporter, PlainReporter)


def test_plain_reporter_prints_skips_cancellations_and_failures() -> None:
    """Skipped, cancelled and failed steps get their own lines; a failed run says so."""
    r = Records(pipeline_id="jobs")
    reporter, stream = plain()
    feed(
        reporter,
        [
            r.started(5, dry_run=True),
            r.planned("a"),
            r.planned("b", "Bee"),
            r.planned("c"),
            r.planned("d"),
            r.planned("e"),
            r.skipped("a", "dry-run"),
            r.running("b"),
            r.failed("b", "artifact is empty\nreally"),
            r.skipped(
                "c",
                "fail-fast",
                dependency_id="b",
                message="Not run because fail-fast stopped after b failed.",
            ),
            r.skipped("d", "policy", message="cached already"),
            r.running("e"),
            r.failed("e", "Pipeline run aborted: stop", cancelled=True),
            r.finalize_started(),
            r.finalize_failed("no value"),
            r.completed("failed", 5, 2, 61_000),
        ],
    )
    assert stream.getvalue().splitlines() == [
        "Pipeline jobs: starting (5 steps, dryRun=true)",
        "  - a (dry-run)",
        "  -> Bee",
        "  fail Bee: artifact is empty really",
        "  - c (fail-fast: b)",
        "  - d (cached already)",
        "  -> e",
        "  - e: cancelled: Pipeline run aborted: stop",
        "  -> finalize",
        "  fail finalize: no value",
        "Pipeline jobs: done in 1m1s (status=failed, steps=5, errors=2)",
    ]


def test_plain_progress_lines_are_throttled_per_step() -> None:
    """One progress line per step per 750 ms; completion lines always print."""
    clock = FakeClock()
    r = Records()
    reporter, stream = plain(clock=clock)
    feed(
        reporter,
        [
            r.started(2),
            r.planned("load"),
            r.planned("other", "Other"),
            r.running("load"),
            r.running("other"),
        ],
    )
    feed(reporter, [r.running("load", {"completed": 1, "total": 10, "message": "records"})])
    clock.now += 0.5
    feed(reporter, [r.running("load", {"completed": 2, "total": 10})])
    feed(reporter, [r.running("other", {"completed": 7})])
    clock.now += 0.25
    feed(reporter, [r.running("load", {"completed": 3, "total": 10})])
    clock.now += 0.1
    feed(reporter, [r.running("load", {"completed": 4, "total": 10})])
    feed(reporter, [r.running("load", {"completed": 10, "total": 10, "message": "done"})])
    feed(reporter, [r.running("load", {"completed": 12, "total": 10})])
    feed(reporter, [r.running("load", {"completed": 0, "detailCount": 0})])
    feed(reporter, [r.running("other", {"completed": 2.5, "message": "  "})])
    assert stream.getvalue().splitlines()[3:] == [
        "  ... load 1/10 records",
        "  ... Other 7/?",
        "  ... load 3/10",
        "  ... load 10/10 done",
        "  ... load 12/10",
    ]


def test_plain_progress_throttle_restarts_after_the_step_ends() -> None:
    """A step's throttle window does not leak into a later run of the same step id."""
    clock = FakeClock()
    r = Records()
    reporter, stream = plain(clock=clock, symbols="unicode")
    feed(reporter, [r.started(1), r.planned("s"), r.running("s")])
    feed(reporter, [r.running("s", {"completed": 1, "total": 3})])
    feed(reporter, [r.complete("s", 10)])
    second = Records(run_id="demo:run-2")
    feed(reporter, [second.started(1), second.planned("s"), second.running("s")])
    feed(reporter, [second.running("s", {"completed": 1, "total": 3})])
    assert stream.getvalue().splitlines() == [
        "Pipeline demo: starting (1 steps, dryRun=false)",
        "  → s",
        "  … s 1/3",
        "  ✓ s (10ms)",
        "Pipeline demo: starting (1 steps, dryRun=false)",
        "  → s",
        "  … s 1/3",
    ]


def _agent_step(r: Records) -> dict[str, Any]:
    """The `step.planned` record of an agent step: it iterates, at most six turns."""
    planned = r.planned("agent")
    planned["payload"]["nestedPipeline"] = {
        "mode": "iterate",
        "pipelineId": "demo/turn",
        "stepCount": 3,
        "stepIds": ["decide", "calls", "reduce"],
        "maxIterations": 6,
    }
    return planned


def _turn(turn: int, message: str = "", calls: dict[str, str] | None = None) -> dict[str, Any]:
    """The agent step's progress in `turn`, with call rows (`id: status`)."""
    details: list[dict[str, Any]] = [
        {"id": f"iteration-{turn}", "name": f"turn {turn}", "status": "running"},
        {"id": f"iteration-{turn}/calls", "name": "calls", "status": "running", "depth": 1},
    ]
    for call_id, status in (calls or {}).items():
        row = {"id": f"iteration-{turn}/calls/{call_id}", "name": call_id, "status": status}
        if status == "failed":
            row["label"] = f"{call_id} broke"
        details.append({**row, "depth": 2})
    text = f"turn {turn} (limit 6){message}"
    return {"completed": turn - 1, "total": 6, "message": text, "details": details}


def test_plain_prints_every_turn_and_every_failed_call_without_a_percentage() -> None:
    """Each turn start and each failed call gets a line, even inside the throttle window."""
    r = Records()
    reporter, stream = plain(clock=FakeClock())
    feed(reporter, [r.started(1), _agent_step(r), r.running("agent")])
    feed(reporter, [r.running("agent", _turn(1))])
    feed(reporter, [r.running("agent", _turn(1, ": 0/2 calls", {"a": "running", "b": "running"}))])
    feed(reporter, [r.running("agent", _turn(1, ": 1/2 calls", {"a": "failed", "b": "running"}))])
    feed(reporter, [r.running("agent", _turn(1, ": 2/2 calls", {"a": "failed", "b": "failed"}))])
    feed(reporter, [r.running("agent", _turn(2))])
    feed(reporter, [r.running("agent", _turn(3, ": 0/1 calls", {"c": "cancelled"}))])
    feed(reporter, [r.complete("agent", 30)])
    assert stream.getvalue().splitlines()[2:] == [
        "  ... agent turn 1 (limit 6)",
        "  fail agent > a: a broke",
        "  fail agent > b: b broke",
        "  ... agent turn 2 (limit 6)",
        "  ... agent turn 3 (limit 6): 0/1 calls",
        "  - agent > c: cancelled",
        "  ok agent (30ms)",
    ]
    assert "Iteration" not in stream.getvalue()
    assert "/6" not in stream.getvalue()


def test_plain_prints_a_failed_batch_once_through_its_failed_call() -> None:
    """A failed group row whose failed call was printed adds no line of its own."""
    r = Records()
    reporter, stream = plain(clock=FakeClock())
    feed(reporter, [r.started(1), _agent_step(r), r.running("agent")])
    feed(reporter, [r.running("agent", _turn(1, "", {"a": "failed"}))])
    settled = _turn(1)
    settled["details"][0]["status"] = "failed"
    settled["details"][1]["status"] = "failed"
    feed(reporter, [r.running("agent", settled)])
    assert stream.getvalue().splitlines()[2:] == [
        "  ... agent turn 1 (limit 6)",
        "  fail agent > a: a broke",
    ]


def test_plain_ignores_progress_that_arrives_after_the_step_settled() -> None:
    """A late progress record of a failed step prints nothing (no repeated first line)."""
    r = Records()
    reporter, stream = plain(clock=FakeClock())
    feed(reporter, [r.started(1), _agent_step(r), r.running("agent")])
    feed(reporter, [r.running("agent", _turn(1))])
    feed(reporter, [r.failed("agent", "turn failed")])
    feed(reporter, [r.running("agent", _turn(2))])
    assert stream.getvalue().splitlines()[2:] == [
        "  ... agent turn 1 (limit 6)",
        "  fail agent: turn failed",
    ]


@pytest.mark.parametrize(
    ("symbols", "expected"),
    [
        ("ascii", ["  -> Build Artifact - Build the artifact", "  ok Build Artifact (42ms)"]),
        ("unicode", ["  → Build Artifact - Build the artifact", "  ✓ Build Artifact (42ms)"]),
        ("emoji", ["  ⏳ Build Artifact - Build the artifact", "  ✅ Build Artifact (42ms)"]),
    ],
)
def test_plain_symbol_sets(symbols: str, expected: list[str]) -> None:
    """Each symbol set marks step starts and completions with its own symbols."""
    reporter, stream = plain(symbols=symbols)
    feed(reporter, successful_run(Records()))
    assert stream.getvalue().splitlines()[1:3] == expected


def test_plain_unicode_symbols_for_failures_and_skips() -> None:
    """Unicode marks failures with ✗, skips and cancellations with –."""
    r = Records()
    reporter, stream = plain(symbols="unicode")
    feed(reporter, [r.started(2), r.planned("a"), r.planned("b"), r.skipped("a", "filtered")])
    feed(reporter, [r.running("b"), r.failed("b", "boom")])
    assert stream.getvalue().splitlines()[1:] == ["  – a (filtered)", "  → b", "  ✗ b: boom"]


def test_plain_colour_only_when_enabled() -> None:
    """ANSI codes appear when colour is on and never when it is off."""
    colored, colored_stream = plain(color=True)
    feed(colored, successful_run(Records()))
    plain_reporter, plain_stream = plain(color=False)
    feed(plain_reporter, successful_run(Records()))
    assert "\x1b[32mok\x1b[0m Build Artifact \x1b[2m(42ms)\x1b[0m" in colored_stream.getvalue()
    assert (
        colored_stream.getvalue().splitlines()[0]
        == "\x1b[1;36mPipeline demo: starting (2 steps, dryRun=false)\x1b[0m"
    )
    assert "\x1b" not in plain_stream.getvalue()


def test_plain_failed_summary_is_red_when_coloured() -> None:
    """The summary of a run that did not complete is painted as a failure."""
    r = Records()
    reporter, stream = plain(color=True)
    feed(reporter, [r.started(0), r.completed("cancelled", 0, 1, 5)])
    assert stream.getvalue().splitlines()[-1] == (
        "\x1b[31mPipeline demo: done in 5ms (status=cancelled, steps=0, errors=1)\x1b[0m"
    )


def test_plain_sanitises_every_user_field() -> None:
    """Ids, names, descriptions, progress, skip and error messages are terminal-safe."""
    r = Records(pipeline_id="plain\x1b]2;pipeline-title\x07-safe")
    reporter, stream = plain()
    feed(
        reporter,
        [
            r.started(2),
            r.planned("skip", "Skip\x1b]2;owned\x07 Step"),
            r.planned("fail", "Fail\x1bPsecret\x1b\\ Step", "Read\nrows\x1b[31m now\x1b[0m"),
            r.skipped("skip", "policy", message="cached\x1b[?2004h safely"),
            r.running("fail"),
            r.running("fail", {"completed": 1, "message": "one\trow\x9b31m"}),
            r.failed("fail", "bad\nvalue\x1b]2;hidden\x07"),
            r.completed("failed", 2, 1, 3),
        ],
    )
    assert stream.getvalue().splitlines() == [
        "Pipeline plain-safe: starting (2 steps, dryRun=false)",
        "  - Skip Step (cached safely)",
        "  -> Fail Step - Read rows now",
        "  ... Fail Step 1/? one row",
        "  fail Fail Step: bad value",
        "Pipeline plain-safe: done in 3ms (status=failed, steps=2, errors=1)",
    ]


def test_plain_log_writes_every_level_to_the_stream() -> None:
    """Step logs print as given (sanitised, lines kept); the level only sets the colour."""
    reporter, stream = plain(color=True)
    reporter.log.info("loaded\x1b[2J a batch\nsecond line")
    reporter.log.warning("careful")
    reporter.log.error("broken")
    assert stream.getvalue() == (
        "loaded a batch\nsecond line\n\x1b[33mcareful\x1b[0m\n\x1b[31mbroken\x1b[0m\n"
    )


def test_plain_ignores_pipeline_log_records_and_other_runs() -> None:
    """`pipeline.log` records and records of another run print nothing."""
    r = Records()
    child = Records(pipeline_id="child", run_id="child:run")
    reporter, stream = plain()
    feed(reporter, [r.planned("early"), r.started(1), r.planned("s"), r.log("log", "step says hi")])
    feed(reporter, [child.planned("s"), child.running("s"), child.complete("s", 1)])
    feed(
        reporter,
        [r.running("s"), r.make("step.attempted", {"attempt": 1, "attributes": {}}, stepId="s")],
    )
    assert stream.getvalue().splitlines() == [
        "Pipeline demo: starting (1 steps, dryRun=false)",
        "  -> s",
    ]


def test_plain_uses_record_timestamps_when_duration_is_missing() -> None:
    """Without `durationMs`, durations come from the records' timestamps."""
    r = Records()
    reporter, stream = plain()
    feed(reporter, [r.started(1), r.planned("s"), r.running("s")])
    r.now_ms += 2500
    complete = r.complete("s", 0)
    del complete["durationMs"]
    summary = r.completed("completed", 1, 0, 0)
    del summary["durationMs"]
    feed(reporter, [complete, summary])
    assert stream.getvalue().splitlines()[2:] == [
        "  ok s (2.5s)",
        "Pipeline demo: done in 2.5s (status=completed, steps=1, errors=0)",
    ]


def test_plain_never_prints_the_result_value() -> None:
    """Nothing but the summary follows `pipeline.completed`, even with extra fields present."""
    r = Records()
    reporter, stream = plain()
    final = r.completed("completed", 0, 0, 1)
    final["payload"]["value"] = "SECRET-RESULT"
    feed(reporter, [r.started(0), final])
    assert "SECRET-RESULT" not in stream.getvalue()


def test_plain_close_is_idempotent_and_a_context_manager() -> None:
    """Closing twice is harmless and `with` closes the reporter."""
    with create_reporter(stream=io.StringIO(), mode="plain") as reporter:
        reporter.close()
    reporter.close()


class PseudoTerminal:
    """A real pseudo-terminal: `stream` writes to it, `output()` returns what it showed."""

    def __init__(self) -> None:
        self._main, secondary = os.openpty()
        self.stream = open(secondary, "w", encoding="utf-8")  # noqa: SIM115 - closed in output()
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._drain)
        self._reader.start()

    def _drain(self) -> None:
        # Reading the main side fails with EIO once the secondary side is closed.
        try:
            while chunk := os.read(self._main, 65536):
                self._chunks.append(chunk)
        except OSError:
            pass

    def output(self) -> str:
        if not self.stream.closed:
            self.stream.close()
            self._reader.join()
            os.close(self._main)
        return b"".join(self._chunks).decode("utf-8").replace("\r\n", "\n")


@pytest.fixture
def tty() -> Iterator[PseudoTerminal]:
    terminal = PseudoTerminal()
    try:
        yield terminal
    finally:
        terminal.output()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TERM": "xterm"}, "interactive"),
        ({"TERM": "xterm", "CI": ""}, "interactive"),
        ({"TERM": "xterm", "CI": "0"}, "interactive"),
        ({"TERM": "xterm", "CI": "false"}, "interactive"),
        ({"TERM": "xterm", "CI": "true"}, "plain"),
        ({"TERM": "xterm", "CI": "1"}, "plain"),
        ({"TERM": "dumb"}, "plain"),
    ],
)
def test_auto_mode_on_a_tty(tty: PseudoTerminal, env: dict[str, str], expected: str) -> None:
    """On a real pseudo-terminal, auto mode is interactive unless CI or a dumb TERM says no."""
    reporter = create_reporter(stream=tty.stream, env=env)
    try:
        assert reporter.mode == expected
        assert isinstance(
            reporter, InteractiveReporter if expected == "interactive" else PlainReporter
        )
    finally:
        reporter.close()


def test_plain_defaults_on_a_tty(tty: PseudoTerminal) -> None:
    """On a UTF-8 TTY the defaults are Unicode symbols and colour."""
    reporter = create_reporter(stream=tty.stream, mode="plain", env={"TERM": "xterm"})
    r = Records()
    feed(reporter, [r.started(1), r.planned("s"), r.running("s"), r.complete("s", 7)])
    reporter.close()
    assert "\x1b[36m→\x1b[0m s\n  \x1b[32m✓\x1b[0m s \x1b[2m(7ms)\x1b[0m\n" in tty.output()


def test_plain_defaults_on_a_dumb_tty(tty: PseudoTerminal) -> None:
    """A TTY whose TERM is `dumb` gets ASCII symbols and no colour."""
    reporter = create_reporter(stream=tty.stream, env={"TERM": "dumb"})
    r = Records()
    feed(reporter, [r.started(1), r.planned("s"), r.running("s"), r.complete("s", 7)])
    reporter.close()
    assert tty.output().splitlines()[1:] == ["  -> s", "  ok s (7ms)"]


def test_auto_mode_is_plain_off_a_tty() -> None:
    """A StringIO is no terminal: auto mode prints plain ASCII lines without colour."""
    stream = io.StringIO()
    reporter = create_reporter(stream=stream, env={"TERM": "xterm", "FORCE_COLOR": "0"})
    feed(reporter, successful_run(Records()))
    assert reporter.mode == "plain"
    assert stream.getvalue().splitlines()[1] == "  -> Build Artifact - Build the artifact"


def test_force_color_colours_a_non_tty() -> None:
    """FORCE_COLOR turns colour on for a plain stream; NO_COLOR alone keeps it off."""
    forced = io.StringIO()
    feed(create_reporter(stream=forced, env={"FORCE_COLOR": "1"}), successful_run(Records()))
    muted = io.StringIO()
    feed(create_reporter(stream=muted, env={"NO_COLOR": "1"}), successful_run(Records()))
    assert "\x1b[" in forced.getvalue()
    assert "\x1b" not in muted.getvalue()


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a stream the reporter prints to `sys.stderr`."""
    reporter = create_reporter(mode="plain", env={})
    reporter.log.info("to stderr")
    captured = capsys.readouterr()
    assert captured.err == "to stderr\n"
    assert captured.out == ""


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "fancy"},
        {"symbols": "runes"},
        {"refresh_interval": 0},
        {"refresh_interval": float("nan")},
    ],
)
def test_create_reporter_rejects_bad_options(options: dict[str, Any]) -> None:
    """Unknown modes or symbol sets and non-positive refresh intervals are refused."""
    with pytest.raises(ValueError):
        create_reporter(stream=io.StringIO(), **options)


def test_plain_output_survives_a_closed_stream() -> None:
    """Writing to a closed stream is ignored instead of failing the run."""
    stream = io.StringIO()
    reporter = create_reporter(stream=stream, mode="plain")
    stream.close()
    feed(reporter, successful_run(Records()))
    reporter.log.info("lost")
    reporter.close()


class WatchedStream(io.StringIO):
    """A StringIO whose writes wake up waiters."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def wait_for(self, fragment: str, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: fragment in self.getvalue(), timeout=timeout)


def test_a_real_agent_prints_each_turn_and_each_failed_call_as_it_happens() -> None:
    """Three turns of a real agent: every turn and failed call is printed, failures early."""
    from tubeless import ToolError, define_agent, define_pipeline_command, define_tool

    stream = WatchedStream()
    seen_early: list[bool] = []

    def fail(value: str, context: Any) -> str:
        raise ToolError("UNKNOWN_CITY", f"no city {value}")

    def slow(value: str, context: Any) -> str:
        # Still running while the sibling's failure must already be on the stream.
        seen_early.append(stream.wait_for(f"bad-{value}: UNKNOWN_CITY: no city {value}", timeout=5))
        return value

    def decide(state: dict[str, Any], context: Any) -> dict[str, Any]:
        turn = state["turn"]
        if turn > 3:
            return {"kind": "finish", "result": "done"}
        calls = [
            {"id": f"bad-{turn}", "tool": "fail", "input": str(turn)},
            {"id": f"slow-{turn}", "tool": "slow", "input": str(turn)},
        ]
        return {"kind": "continue", "calls": calls}

    text = {"type": "string"}
    agent = define_agent(
        id="turns",
        input_schema={"type": "object", "properties": {}},
        result_schema=text,
        tools={
            "fail": define_tool(
                description="Fail.", input_schema=text, output_schema=text, run=fail
            ),
            "slow": define_tool(
                description="Slow.", input_schema=text, output_schema=text, run=slow
            ),
        },
        limits={"max_turns": 6, "max_calls": 100, "max_decisions": 10, "max_concurrency": 2},
        initial_state=lambda options: {"turn": 1},
        decide=decide,
        reduce=lambda state, outcomes: {"turn": state["turn"] + 1},
    )
    reporter = {"stream": stream, "mode": "plain", "symbols": "ascii", "color": False}
    assert define_pipeline_command(agent, reporter=reporter).run([]) == "done"
    lines = stream.getvalue().splitlines()
    assert [line for line in lines if line.startswith("  ... ")] == [
        f"  ... agent turn {turn} (limit 6)" for turn in range(1, 5)
    ]
    assert [line for line in lines if line.startswith("  fail")] == [
        f"  fail agent > bad-{turn}: UNKNOWN_CITY: no city {turn}" for turn in range(1, 4)
    ]
    assert len(lines) == len(set(lines))
    assert seen_early == [True, True, True]

"""Tests for `tubeless history`, through the real CLI, on stores written by `run --store`."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tubeless import SqliteCheckpointStore
from tubeless.errors import TraceStoreError
from tubeless.trace import SqliteTraceStore, validate_record

pytestmark = pytest.mark.slow

_LIST_LINE = re.compile(
    r"(?P<run>greet:[0-9a-f-]{36})  greet  (?P<status>\w+)  "
    r"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  \d+(\.\d+)?ms"
)


def _record_runs(cli: Any, *names: str, fail: bool = False) -> None:
    cli.write_fixture("greet")
    for name in names:
        extra = ["--fail"] if fail else []
        cli("run", "--store", ".tubeless/runs.sqlite", "greet.py", "--", "--name", name, *extra)


def test_history_lists_recorded_runs_from_the_default_store(cli: Any) -> None:
    """Each recorded run is one line: id, pipeline, status, start time, duration."""
    _record_runs(cli, "Ada", "Bob")
    result = cli("history")
    assert (result.code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert all(_LIST_LINE.fullmatch(line) for line in lines), lines
    assert {_LIST_LINE.fullmatch(line)["status"] for line in lines} == {"completed"}  # type: ignore[index]


def test_history_json_lists_run_summaries(cli: Any) -> None:
    """`--json` gives `{runs: [{runId, pipelineId, startedAtMs, status, durationMs}]}`."""
    _record_runs(cli, "Ada")
    document = json.loads(cli("history", "--json").stdout)
    (run,) = document["runs"]
    assert list(run) == ["runId", "pipelineId", "startedAtMs", "status", "durationMs"]
    assert (run["pipelineId"], run["status"]) == ("greet", "completed")


def test_history_shows_one_run_in_detail(cli: Any) -> None:
    """A run id prints the run's header, steps, logs and error."""
    _record_runs(cli, "x", fail=True)
    run_id = json.loads(cli("history", "--json").stdout)["runs"][0]["runId"]
    result = cli("history", run_id)
    text = result.stdout
    assert result.code == 0
    assert text.startswith(f"Run {run_id}\nPipeline greet\nStatus failed\nStarted ")
    assert "\nSteps:\n  greet  failed  " in text
    assert "\n  polish  skipped\n" in text or "\n  polish  skipped  " in text
    assert text.endswith("\nError:\n  TUBELESS_STEP_FAILED  greeting refused\n")
    detail = json.loads(cli("history", "--json", run_id).stdout)
    assert (detail["runId"], detail["status"]) == (run_id, "failed")


def test_history_detail_lists_the_logs(cli: Any) -> None:
    """Step logs recorded in the store appear under `Logs:`."""
    _record_runs(cli, "Ada")
    run_id = json.loads(cli("history", "--json").stdout)["runs"][0]["runId"]
    assert "\nLogs:\n  [log] greeting Ada\n" in cli("history", run_id).stdout


def test_history_events_print_raw_records_with_ids(cli: Any) -> None:
    """`--events` prints each stored record as one JSON line with its row id."""
    _record_runs(cli, "Ada")
    lines = cli("history", "--events").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert [event["id"] for event in events] == list(range(1, len(events) + 1))
    for event in events:
        validate_record({key: value for key, value in event.items() if key != "id"})
    with SqliteTraceStore(cli.directory / ".tubeless/runs.sqlite", read_only=True) as store:
        assert [{k: v for k, v in e.items() if k != "id"} for e in events] == store.events()


def test_history_reads_an_ndjson_trace(cli: Any) -> None:
    """`--trace FILE` projects the runs of an NDJSON trace."""
    cli.write_fixture("greet")
    cli("run", "--trace", "trace.ndjson", "greet.py", "--", "--name", "Ada")
    listed = cli("history", "--trace", "trace.ndjson")
    run_id = json.loads(cli("history", "--trace", "trace.ndjson", "--json").stdout)["runs"][0][
        "runId"
    ]
    events = cli("history", "--trace", "trace.ndjson", "--events", run_id).stdout.splitlines()
    assert _LIST_LINE.fullmatch(listed.stdout.strip())
    assert json.loads(events[0])["id"] == 0


def test_history_unknown_run_is_a_usage_error(cli: Any) -> None:
    """An unknown run id exits 1, for the detail and for `--events`."""
    _record_runs(cli, "Ada")
    detail = cli("history", "nope")
    events = cli("history", "--events", "nope")
    assert (detail.code, events.code) == (1, 1)
    assert detail.stderr.startswith('Error: Unknown run "nope".\n\nusage: tubeless history')


def test_history_missing_files_exit_2_and_create_nothing(cli: Any) -> None:
    """A missing store or trace exits 2 and no file or directory is created."""
    store = cli("history")
    trace = cli("history", "--trace", "absent.ndjson")
    assert (store.code, trace.code) == (2, 2)
    assert (
        store.stderr == f"Error: Run store not found at {cli.directory / '.tubeless/runs.sqlite'}\n"
    )
    assert trace.stderr.startswith("Error: Trace file not found at ")
    assert list(Path(cli.directory).iterdir()) == []


def test_history_does_not_change_the_store(cli: Any) -> None:
    """Reading a store leaves its database file byte for byte as it was."""
    _record_runs(cli, "Ada")
    database = cli.directory / ".tubeless/runs.sqlite"
    before = database.read_bytes()
    for args in ((), ("--json",), ("--events",)):
        assert cli("history", *args).code == 0
    assert database.read_bytes() == before


def test_history_leaves_no_sidecar_files(cli: Any) -> None:
    """Reading a cleanly closed store creates no `-wal` or `-shm` file beside it."""
    _record_runs(cli, "Ada")
    directory = cli.directory / ".tubeless"
    before = sorted(path.name for path in directory.iterdir())
    assert cli("history").code == 0
    assert sorted(path.name for path in directory.iterdir()) == before


def test_history_exclusive_options_are_usage_errors(cli: Any) -> None:
    """`--store` with `--trace`, and `--json` with `--events`, exit 1."""
    both_sources = cli("history", "--store", "a", "--trace", "b")
    both_outputs = cli("history", "--json", "--events")
    assert (both_sources.code, both_outputs.code) == (1, 1)
    assert "not allowed with argument" in both_sources.stderr.splitlines()[0]


def test_history_reads_a_trace_with_a_torn_last_line_and_warns(cli: Any) -> None:
    """A trace whose writer died mid-line still lists its runs; stderr says what was skipped."""
    cli.write_fixture("greet")
    cli("run", "--trace", "trace.ndjson", "greet.py", "--", "--name", "Ada")
    path = cli.directory / "trace.ndjson"
    whole = path.read_text("utf-8")
    path.write_text(whole + whole.splitlines()[0][:40], "utf-8")

    listed = cli("history", "--trace", "trace.ndjson")

    assert listed.code == 0
    assert _LIST_LINE.fullmatch(listed.stdout.strip())
    count = len(whole.splitlines())
    assert listed.stderr == (
        f"warning: {path} ends with a torn line {count + 1} (no newline), skipped; "
        f"read {count} records\n"
    )


def _record_delegation(cli: Any) -> str:
    examples = Path(__file__).resolve().parents[2] / "examples"
    for name in ("agent_delegation.py", "agent_tools.py"):
        cli.write(name, (examples / name).read_text("utf-8"))
    store = ".tubeless/runs.sqlite"
    result = cli("run", "--store", store, "agent_delegation.py", "--", "--topic", "unknown")
    assert result.code == 0, result.stderr
    runs = json.loads(cli("history", "--json").stdout)["runs"]
    return next(run["runId"] for run in runs if run["pipelineId"] == "planner")


def test_history_of_an_agent_run_shows_its_agent_tree(cli: Any) -> None:
    """The planner's detail ends with its tree: turns, calls, the subagent under its call."""
    run_id = _record_delegation(cli)

    text = cli("history", run_id).stdout

    assert text.startswith(f"Run {run_id}\nPipeline planner\nStatus completed\n")
    tree = text.split("\nAgent tree:\n", 1)[1]
    lines = [re.sub(r"  \d+ms$", "", line) for line in tree.splitlines()]
    assert lines[0] == f"agent planner  {run_id}  finished"
    assert lines[1:3] == ["  turn 1  completed", "    call research-1  research  completed"]
    assert re.fullmatch(r"      agent researcher  researcher:[0-9a-f-]{36}  finished", lines[3])
    assert "          call lookup  lookup  failed  NOT_FOUND" in lines
    assert "    call summary-1  summarize  completed" in lines


def test_history_json_of_an_agent_run_has_agent_history(cli: Any) -> None:
    """`--json RUN_ID` adds `agentHistory.agents[]` with `childAgentRunIds` and `parentCall`."""
    run_id = _record_delegation(cli)

    detail = json.loads(cli("history", "--json", run_id).stdout)

    planner, researcher = detail["agentHistory"]["agents"]
    call = planner["turns"][0]["calls"][0]
    assert call["childAgentRunIds"] == [researcher["runId"]]
    assert researcher["parentCall"] == {
        "agentRunId": run_id,
        "turnRunId": planner["turns"][0]["runId"],
        "callId": "research-1",
        "tool": "research",
    }
    assert detail["steps"][0]["id"] == "agent"


def _call_recorded(path: Path, call_id: str) -> bool:
    """Whether the trace store at `path` holds an attempt of tool call `call_id`."""
    if not path.exists():
        return False
    try:
        reader = SqliteTraceStore(path, read_only=True)
    except TraceStoreError:
        return False  # being created by the run right now
    try:
        return any(
            (record["payload"].get("attributes") or {}).get("agent.callId") == call_id
            for record in reader.events()
            if record["name"] == "step.attempted"
        )
    finally:
        reader.close()


def test_history_of_a_resumed_durable_agent_marks_reused_and_interrupted_calls(
    cli: Any,
) -> None:
    """Killed while `effect-2` runs, resumed: effect-1 is reused, effect-2 interrupted."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    cli.write("agent_durable.py", (examples / "agent_durable.py").read_text("utf-8"))
    store, checkpoints = ".tubeless/runs.sqlite", cli.directory / "checkpoints.db"
    arguments = ("run", "--store", store, "agent_durable.py", "--", "--effects", "e.txt")
    environment = {"AGENT_DURABLE_STORE": str(checkpoints)}
    first = cli.spawn(
        *arguments, "--count", "2", env={**environment, "AGENT_DURABLE_SLOW_EFFECT": "effect-2"}
    )
    try:
        key = "effects:e.txt"
        for _ in range(3000):
            text = SqliteCheckpointStore(checkpoints).read(key) if checkpoints.exists() else None
            turn = json.loads(text)["agent"]["turn"] if text else None
            if turn and [c["status"] for c in turn["calls"]] == ["completed", "running"]:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("effect-2 never started")
        # The store commits within 50 ms: wait until effect-2's attempt is there, so the
        # killed run is listed (its records reached the store before the kill).
        for _ in range(3000):
            if _call_recorded(cli.directory / store, "effect-2.1"):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("effect-2's attempt never reached the trace store")
    finally:
        first.kill()
        first.communicate(timeout=30)
    resumed = cli(*arguments, "--count", "2", env=environment)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "2 effects, each once (interrupted: effect-2.1)\n"
    runs = json.loads(cli("history", "--json").stdout)["runs"]
    agent_runs = [run for run in runs if run["pipelineId"] == "durable-effects"]
    # Newest first; the killed run's records reached the store before the kill.
    assert [run["status"] for run in agent_runs] == ["completed", "running"]
    run_id = agent_runs[0]["runId"]

    tree = cli("history", run_id).stdout.split("\nAgent tree:\n", 1)[1]
    lines = [re.sub(r"  \d+(\.\d+)?ms$", "", line) for line in tree.splitlines()]
    assert lines[1:4] == [
        "  turn 1  completed",
        "    call effect-1.1  append  completed  reused",
        "    call effect-2.1  append  failed  TUBELESS_AGENT_CALL_INTERRUPTED  interrupted",
    ]
    detail = json.loads(cli("history", "--json", run_id).stdout)
    calls = detail["agentHistory"]["agents"][0]["turns"][0]["calls"]
    assert [call.get("replay") for call in calls] == ["reused", "interrupted"]


def test_execution_key_chooses_the_durable_key(cli: Any) -> None:
    """`--execution-key` (declared by the example's command) replaces the key from options."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    cli.write("agent_durable.py", (examples / "agent_durable.py").read_text("utf-8"))
    environment = {"AGENT_DURABLE_STORE": str(cli.directory / "c.db")}
    arguments = ("run", "agent_durable.py", "--", "--effects", "e.txt", "--count", "1")
    first = cli(*arguments, "--execution-key", "night-batch", env=environment)
    assert (first.code, first.stdout) == (0, "1 effects, each once (interrupted: none)\n")
    again = cli(*arguments, "--execution-key", "night-batch", env=environment)
    assert again.code == 0
    assert SqliteCheckpointStore(cli.directory / "c.db").keys() == ["night-batch"]
    assert (cli.directory / "e.txt").read_text("utf-8").count("\n") == 1  # resumed: done

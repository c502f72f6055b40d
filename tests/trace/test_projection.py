"""Folding record streams into stored runs, and rendering them for `history`."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.trace import (
    RunFold,
    format_run_detail,
    format_run_list,
    project_runs,
    validate_record,
)

T0 = 1704164645678  # 2024-01-02T03:04:05.678Z


def _record(name: str, run_id: str = "root", **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "version": 3,
        "name": name,
        "pipelineId": "agent" if run_id == "root" else "agent/turn",
        "runId": run_id,
        "timestampMs": T0,
        "payload": {},
    }
    record.update(fields)
    return record


def _planned(step_id: str, **payload: Any) -> dict[str, Any]:
    base = {
        "dependencies": [],
        "optionalDependencies": [],
        "skipAfterFailureOf": [],
        "dryRun": "run",
        "runtimeSkipPossible": False,
        "selected": True,
        "selectionReasons": [{"kind": "all"}],
    }
    return _record("step.planned", stepId=step_id, payload={**base, **payload})


CHILD = {
    "parentRunId": "root",
    "itemKey": "iteration-1",
    "correlationId": "c-1",
    "iteration": {"runId": "root", "stepId": "agent", "attemptId": "a-1", "index": 1},
}

STREAM = [
    _record(
        "pipeline.started",
        correlationId="c-1",
        payload={
            "dryRun": False,
            "planOk": True,
            "stepCount": 2,
            "targetIds": ["agent"],
            "definitionIdentity": {
                "version": 2,
                "structuralFingerprint": "sha256:" + "1" * 64,
                "definitionId": "sha256:" + "2" * 64,
            },
        },
    ),
    _planned("agent", name="Agent", description="Loop", dependencies=["load"]),
    _planned("load"),
    _record("step.running", stepId="agent", attemptId="a-1", timestampMs=T0 + 1),
    _record(
        "pipeline.started",
        "turn-1",
        **CHILD,
        payload={"dryRun": False, "planOk": True, "stepCount": 1, "targetIds": []},
    ),
    _record(
        "step.running",
        stepId="agent",
        attemptId="a-1",
        timestampMs=T0 + 2,
        payload={"progress": {"completed": 1, "total": 3, "details": [{"id": "iteration-1"}]}},
    ),
    _record(
        "step.running",
        stepId="agent",
        attemptId="a-1",
        timestampMs=T0 + 3,
        payload={"progress": {"completed": 0}},
    ),
    _record(
        "step.attempted",
        stepId="agent",
        attemptId="a-1",
        payload={"attempt": 2, "attributes": {"retry": True}},
    ),
    _record(
        "pipeline.log",
        stepId="agent",
        attemptId="a-1",
        timestampMs=T0 + 4,
        payload={"level": "warn", "message": "slow\x1b[2J model"},
    ),
    _record("pipeline.log", "turn-1", **CHILD, payload={"level": "log", "message": "child"}),
    _record(
        "step.complete",
        stepId="agent",
        attemptId="a-1",
        timestampMs=T0 + 40,
        durationMs=39.5,
        payload={"status": "completed"},
    ),
    _record(
        "step.skipped",
        stepId="load",
        payload={"status": "skipped", "reason": "filtered"},
    ),
    _record(
        "pipeline.completed",
        timestampMs=T0 + 50,
        durationMs=50,
        error={
            "code": "TUBELESS_CHILD_FAILED",
            "kind": "child",
            "phase": "execution",
            "message": "turn failed",
        },
        payload={
            "status": "failed",
            "dryRun": False,
            "errorCount": 1,
            "finalized": False,
            "stepCount": 2,
        },
    ),
]


def test_the_sample_stream_is_valid() -> None:
    """The stream these tests fold is made of valid records."""
    for record in STREAM:
        validate_record(record)


def test_runs_are_projected_in_order_of_first_appearance() -> None:
    """One stored run per run id, ordered by each run's first record."""
    runs = project_runs(STREAM)
    assert [run.run_id for run in runs] == ["root", "turn-1"]
    root, child = runs
    assert (root.status, root.event_count, root.log_count) == ("failed", 11, 1)
    assert (child.status, child.event_count, child.log_count) == ("running", 2, 1)


def test_a_finished_run_projects_to_the_reference_shape() -> None:
    """The root run's `to_dict` is the reference's `StoredPipelineRun`."""
    root = project_runs(STREAM)[0].to_dict()
    assert root == {
        "version": 2,
        "runId": "root",
        "pipelineId": "agent",
        "status": "failed",
        "dryRun": False,
        "startedAtMs": T0,
        "finishedAtMs": T0 + 50,
        "durationMs": 50,
        "eventCount": 11,
        "logCount": 1,
        "logs": [
            {
                "id": 8,
                "level": "warn",
                "message": "slow\x1b[2J model",
                "stepId": "agent",
                "attemptId": "a-1",
                "timestampMs": T0 + 4,
            }
        ],
        "error": {
            "code": "TUBELESS_CHILD_FAILED",
            "kind": "child",
            "phase": "execution",
            "message": "turn failed",
        },
        "correlationId": "c-1",
        "definitionIdentity": STREAM[0]["payload"]["definitionIdentity"],
        "steps": [
            {
                "id": "agent",
                "status": "completed",
                "name": "Agent",
                "description": "Loop",
                "dependencies": ["load"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "startedAtMs": T0 + 0.5,
                "finishedAtMs": T0 + 40,
                "durationMs": 39.5,
                "progress": {
                    "completed": 1,
                    "total": 3,
                    "details": [{"id": "iteration-1"}],
                    "detailCount": 1,
                },
                "attempt": {
                    "attemptId": "a-1",
                    "startedAtMs": T0 + 1,
                    "status": "completed",
                    "retries": [2],
                    "durationMs": 39.5,
                    "finishedAtMs": T0 + 40,
                },
            },
            {
                "id": "load",
                "status": "skipped",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "finishedAtMs": T0,
            },
        ],
    }


def test_a_child_run_keeps_its_relations() -> None:
    """A child run carries its parent, item key and iteration relation."""
    child = project_runs(STREAM)[1].to_dict()
    assert child["parentRunId"] == "root"
    assert child["itemKey"] == "iteration-1"
    assert child["iteration"] == CHILD["iteration"]
    assert child["logs"] == [{"id": 9, "level": "log", "message": "child", "timestampMs": T0}]
    assert "finishedAtMs" not in child and "durationMs" not in child


def test_ids_let_a_stream_be_refreshed() -> None:
    """Given ids, a record whose id is not above the last accepted one is ignored."""
    ids = [10, 11, 11, 5, 12]
    runs = project_runs(STREAM[:5], ids)
    assert runs[0].event_count == 2
    assert [step.id for step in runs[0].steps] == ["agent"]
    assert runs[1].run_id == "turn-1"
    with pytest.raises(ValueError):
        project_runs(STREAM[:2], [1])


def test_the_list_renders_one_line_per_run() -> None:
    """Each run renders as `<id>  <pipeline>  <status>  started <ISO>[  <N>ms]`."""
    assert format_run_list(project_runs(STREAM)) == (
        "root  agent  failed  started 2024-01-02T03:04:05.678Z  50ms\n"
        "turn-1  agent/turn  running  started 2024-01-02T03:04:05.678Z\n"
    )
    assert format_run_list([]) == ""


def test_the_detail_renders_steps_logs_and_error() -> None:
    """A run's detail lists its header, steps, logs and error, control characters blanked."""
    assert format_run_detail(project_runs(STREAM)[0]) == (
        "Run root\n"
        "Pipeline agent\n"
        "Status failed\n"
        "Started 2024-01-02T03:04:05.678Z\n"
        "Duration 50ms\n"
        "\n"
        "Steps:\n"
        "  agent  completed  39.5ms\n"
        "  load  skipped\n"
        "\n"
        "Logs:\n"
        "  [warn] slow [2J model\n"
        "\n"
        "Error:\n"
        "  TUBELESS_CHILD_FAILED  turn failed\n"
    )


def test_a_running_run_has_no_duration_or_error() -> None:
    """A run without `pipeline.completed` renders without duration and error sections."""
    text = format_run_detail(project_runs(STREAM)[1])
    assert "Duration" not in text and "Error:" not in text
    assert text.endswith("Logs:\n  [log] child\n")


def test_a_run_fold_read_as_it_grows_freezes_into_the_stored_run() -> None:
    """`RunFold` shows each step's state as records arrive and freezes into the same run."""
    root = [record for record in STREAM if record["runId"] == "root"]
    fold = RunFold(root[0])
    for index, record in enumerate(root):
        fold.add(record, event_id=STREAM.index(record))
        if index == 3:
            agent = fold.steps["agent"]
            assert (agent.status, agent.name, agent.started_at_ms) == ("running", "Agent", T0 + 1)
            assert agent.ended is None
            assert fold.completed is None
    assert list(fold.steps) == ["agent", "load"]
    load = fold.steps["load"]
    assert load.status == "skipped"
    assert load.ended is not None and load.ended["payload"]["reason"] == "filtered"
    assert fold.steps["agent"].duration_ms == 39.5
    assert fold.completed is not None and fold.completed["payload"]["status"] == "failed"
    assert fold.freeze() == project_runs(STREAM)[0]


def test_a_run_fold_keeps_the_latest_finalize_record() -> None:
    """`finalize` is the last `pipeline.finalize.*` record, which the live frame draws."""
    fold = RunFold(STREAM[0])
    fold.add(_record("pipeline.finalize.started"))
    fold.add(_record("pipeline.finalize.completed", durationMs=3))
    assert fold.finalize is not None and fold.finalize["name"] == "pipeline.finalize.completed"
    assert fold.freeze().event_count == 2


def test_a_late_progress_record_never_reopens_a_settled_step() -> None:
    """A `step.running` after the step's terminal record leaves it settled."""
    fold = RunFold(STREAM[0])
    fold.add(_record("step.failed", stepId="s", payload={"status": "failed"}))
    fold.add(_record("step.running", stepId="s", payload={"progress": {"completed": 1}}))
    assert fold.steps["s"].status == "failed"
    assert fold.freeze().steps[0].progress is None


def _running(details: list[tuple[str, str]]) -> dict[str, Any]:
    rows = [{"id": row_id, "name": row_id, "status": status} for row_id, status in details]
    return {
        "name": "step.running",
        "stepId": "agent",
        "timestampMs": 1,
        "payload": {"progress": {"completed": 0, "details": rows}},
    }


def test_a_step_fold_counts_each_failed_call_once() -> None:
    """Failed leaf rows count once across snapshots; a collapsed failed group adds none."""
    from tubeless.trace import StepFold

    fold = StepFold("agent")
    turn = [("iteration-1", "running"), ("iteration-1/calls", "running")]
    fold.add(
        _running([*turn, ("iteration-1/calls/c0", "failed"), ("iteration-1/calls/c1", "running")])
    )
    fold.add(
        _running([*turn, ("iteration-1/calls/c0", "failed"), ("iteration-1/calls/c1", "failed")])
    )
    assert fold.failed_detail_count == 2
    # The batch shown collapsed after its calls: still two.
    fold.add(_running([("iteration-1", "failed"), ("iteration-1/calls", "failed")]))
    assert fold.failed_detail_count == 2
    # A new turn's call with the same call id is another call.
    fold.add(_running([("iteration-2", "running"), ("iteration-2/calls/c0", "failed")]))
    assert fold.failed_detail_count == 3

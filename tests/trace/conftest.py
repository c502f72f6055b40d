"""Hand-built trace records of every kind, shared by the trace tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tubeless._fingerprint import snapshot_identity

FINGERPRINT_A = "sha256:" + "a" * 64
FINGERPRINT_B = "sha256:" + "b" * 64
FINGERPRINT_C = "sha256:" + "c" * 64

CHILD_IDENTITY = {
    "version": 2,
    "structuralFingerprint": FINGERPRINT_A,
    "definitionId": FINGERPRINT_C,
    "implementationVersion": "2024.1",
}
TOOL_IDENTITY = {
    "version": 1,
    "structuralFingerprint": FINGERPRINT_C,
    "definitionId": FINGERPRINT_C,
}

ERROR = {
    "code": "TUBELESS_STEP_FAILED",
    "kind": "step",
    "phase": "execution",
    "message": "cannot read rows",
    "sourceCode": "TUBELESS_AGENT_LIMIT_REACHED",
    "stack": "Traceback ...",
    "cause": {"message": "denied", "name": "PermissionError", "cause": {"message": "root"}},
    "issues": [{"message": "must be a string", "path": ["rows", 0, "name"]}, {"message": "bad"}],
    "fanOut": {
        "failures": [
            {
                "index": 1,
                "key": "item-1",
                "keyTruncated": False,
                "cancelled": False,
                "error": {"message": "boom", "name": "ValueError"},
            },
            {
                "index": 4,
                "key": "",
                "keyTruncated": True,
                "cancelled": True,
                "error": {"message": "stopped"},
            },
        ],
        "failureCount": 3,
        "omittedFailureCount": 1,
    },
}

STEPS = [
    {
        "id": "agent",
        "dependencies": [],
        "optionalDependencies": [],
        "skipAfterFailureOf": [],
        "dryRun": "custom",
        "runtimeSkipPossible": False,
        "outputValidated": True,
        "nestedPipeline": {
            "pipelineId": "scripted-agent/turn",
            "mode": "iterate",
            "maxIterations": 3,
            "stepIds": ["decide", "calls", "reduce"],
            "identity": CHILD_IDENTITY,
        },
        "agent": {
            "limits": {"maxTurns": 3, "maxCalls": 10, "maxDecisions": 5, "maxConcurrency": 2},
            "resultSchemaFingerprint": FINGERPRINT_A,
            "capabilities": [
                {
                    "name": "search",
                    "description": "Search the corpus.",
                    "inputSchemaFingerprint": FINGERPRINT_B,
                    "identity": TOOL_IDENTITY,
                }
            ],
        },
    }
]
# Readers check a snapshot against its fingerprints, so the run's identity is the real one.
IDENTITY = snapshot_identity(STEPS, ["agent"], None, (True, True), "2024.1")
SNAPSHOT = {
    "identity": IDENTITY,
    "steps": STEPS,
    "targetIds": ["agent"],
    "optionsValidated": True,
    "resultValidated": True,
}


def _base(name: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "version": 3,
        "name": name,
        "pipelineId": "scripted-agent",
        "runId": "run-1",
        "timestampMs": 1700000000000,
    }
    record.update(fields)
    return record


def _records() -> dict[str, dict[str, Any]]:
    child = {
        "pipelineId": "scripted-agent/turn",
        "runId": "turn-1",
        "parentRunId": "run-1",
        "correlationId": "corr-1",
        "itemKey": "iteration-1",
        "iteration": {"runId": "run-1", "stepId": "agent", "attemptId": "att-1", "index": 1},
    }
    return {
        "pipeline.started": _base(
            "pipeline.started",
            correlationId="corr-1",
            payload={
                "dryRun": False,
                "planOk": True,
                "stepCount": 1,
                "targetIds": ["agent"],
                "definitionIdentity": IDENTITY,
                "definitionSnapshot": SNAPSHOT,
            },
        ),
        "step.planned": _base(
            "step.planned",
            stepId="agent",
            payload={
                "dependencies": [],
                "optionalDependencies": ["warmup"],
                "skipAfterFailureOf": [],
                "dryRun": "custom",
                "name": "Agent",
                "description": "Runs the loop.",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [
                    {"kind": "target", "targetId": "agent"},
                    {"kind": "required-dependency", "dependentId": "b", "targetId": "agent"},
                    {"kind": "all"},
                ],
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "scripted-agent/turn",
                    "stepCount": 3,
                    "stepIds": ["decide", "calls", "reduce"],
                    "maxIterations": 3,
                },
                "remote": {"engine": "local", "target": ""},
            },
        ),
        "step.running": _base(
            "step.running",
            **child,
            stepId="calls",
            attemptId="att-2",
            payload={
                "progress": {
                    "completed": 1,
                    "total": 2.5,
                    "message": "iteration 1 (limit 3)",
                    "details": [
                        {"id": "call-1", "name": "search", "status": "running", "depth": 0},
                        {"id": "call-1/x", "label": "", "completed": 1, "total": 2, "depth": 1},
                    ],
                    "detailCount": 5,
                }
            },
        ),
        "step.attempted": _base(
            "step.attempted",
            **child,
            stepId="decide",
            attemptId="att-3",
            durationMs=0.25,
            payload={
                "attempt": 1,
                "attributes": {
                    "agent.runId": "run-1",
                    "agent.turn": 1,
                    "agent.decision": "continue",
                    "agent.ratio": 0.5,
                    "agent.final": False,
                },
            },
        ),
        "step.artifact": _base(
            "step.artifact",
            stepId="load",
            attemptId="att-4",
            payload={
                "operation": "write",
                "preview": False,
                "artifact": {"uri": "file:///tmp/x.json", "byteSize": 10, "metadata": {"a": [1]}},
            },
        ),
        "pipeline.log": _base(
            "pipeline.log",
            stepId="load",
            attemptId="att-4",
            payload={"level": "warn", "message": "slow"},
        ),
        "step.complete": _base(
            "step.complete",
            stepId="load",
            attemptId="att-4",
            durationMs=12,
            payload={"status": "completed"},
        ),
        "step.skipped": _base(
            "step.skipped",
            stepId="save",
            payload={
                "status": "skipped",
                "reason": "failed-dependency",
                "dependencyId": "load",
                "message": "load failed",
            },
        ),
        "step.failed": _base(
            "step.failed",
            stepId="load",
            attemptId="att-5",
            durationMs=3.5,
            error=ERROR,
            payload={"status": "failed"},
        ),
        "step.cancelled": _base(
            "step.cancelled",
            stepId="load",
            error={
                "code": "TUBELESS_RUN_CANCELLED",
                "kind": "cancellation",
                "phase": "execution",
                "message": "Pipeline run aborted",
            },
            payload={"status": "cancelled", "outputSource": "override"},
        ),
        "pipeline.finalize.started": _base("pipeline.finalize.started", payload={}),
        "pipeline.finalize.completed": _base(
            "pipeline.finalize.completed", durationMs=1, payload={}
        ),
        "pipeline.finalize.failed": _base(
            "pipeline.finalize.failed",
            durationMs=2,
            error={
                "code": "TUBELESS_FINALIZATION_FAILED",
                "kind": "finalization",
                "phase": "finalization",
                "message": "no",
            },
            payload={},
        ),
        "pipeline.completed": _base(
            "pipeline.completed",
            durationMs=40,
            error=ERROR,
            payload={
                "status": "failed",
                "dryRun": False,
                "errorCount": 1,
                "finalized": False,
                "stepCount": 1,
            },
        ),
    }


@pytest.fixture
def every_kind() -> dict[str, dict[str, Any]]:
    """A fresh valid record of every kind, keyed by name."""
    return copy.deepcopy(_records())


@pytest.fixture
def make_record() -> Callable[..., dict[str, Any]]:
    """Build a fresh valid record of a kind, with top-level fields replaced."""

    def build(kind: str, /, **fields: Any) -> dict[str, Any]:
        record = copy.deepcopy(_records()[kind])
        record.update(fields)
        return record

    return build

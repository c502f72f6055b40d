"""Wire forms: every `to_dict()` of the definition, plan, error and document dataclasses.

The dicts are pinned as they were before `tubeless._fields` built most of them: identities
and checkpoints hash them, so key names, key order, omitted keys and container types
(lists, not tuples; plain dicts, not frozen ones) must all stay exactly as they are.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from tubeless import define_agent
from tubeless._diagnostics import Issue
from tubeless._fields import AS_IS, OMIT_NONE, camel_case, wire, wire_dict
from tubeless._frozen import FrozenDict
from tubeless.agent import AgentLimits, CassetteDocument, RecordedAgent, RecordedTurn, Usage
from tubeless.cli._commands._flags import CliParameter
from tubeless.errors import (
    Diagnostic,
    ErrorCause,
    FanOutDiagnostics,
    FanOutFailure,
    PendingApproval,
)
from tubeless.mcp._lock import McpLock, McpToolDefinition
from tubeless.pipeline import SelectionReason, create_steps, define_pipeline


def _pipelines() -> Any:
    step = create_steps({"type": "object"})
    leaf = step("leaf", run=lambda inputs, context: 1)
    child = define_pipeline(id="child", steps=[leaf], implementation_version="7")
    first = step("first", run=lambda i, c: 1, name="First", description="Starts")
    second = step("second", run=lambda i, c: 2, dry_run="skip", output_schema={"type": "integer"})
    wrap = step.from_pipeline("wrap", pipeline=child, depends_on=[first], dry_run="skip")
    fan = step.for_each_pipeline(
        "fan",
        pipeline=child,
        items=lambda i, c: [1],
        key=lambda item, index: str(item),
        concurrency=3,
        optional_depends_on=[second],
        skip_after_failure_of=[wrap],
    )
    loop = step.iterate_pipeline(
        "loop",
        pipeline=child,
        max_iterations=4,
        initial_state=lambda i, c: {},
        transition=lambda v, s, c: {"kind": "finish", "result": v},
        controls={"continue_on_error": True},
        skip=lambda i, c: False,
        depends_on=[fan],
    )
    agent = define_agent(
        id="helper",
        input_schema={"type": "object"},
        result_schema={"type": "integer"},
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": 1},
        limits={"max_turns": 3, "max_cost": 2.5},
    )
    helper = step.from_pipeline("helper", pipeline=agent, depends_on=[loop])
    parent = define_pipeline(
        id="parent",
        steps=[first, second, wrap, fan, loop, helper],
        targets=[helper, second],
        finalize=lambda outputs, context: outputs,
        result_schema={"type": "object"},
    )
    return parent, agent


@functools.cache
def cases() -> dict[str, Any]:
    """Name -> object with a `to_dict()`."""
    parent, agent = _pipelines()
    cause = ErrorCause("outer", name="ValueError", source_code="E1", cause=ErrorCause("inner"))
    failure = FanOutFailure(index=1, key="k", key_truncated=True, cancelled=False, error=cause)
    tool = McpToolDefinition(
        name="search", description="Finds", input_schema={"type": "object", "required": ["q"]}
    )
    typed = McpToolDefinition(
        name="add",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"sum": {"type": "number"}}},
    )
    turns = (
        RecordedTurn(
            turn=1,
            decision={"kind": "continue", "calls": [{"id": "c1", "tool": "t", "input": None}]},
            outcomes=({"id": "c1", "tool": "t", "ok": True, "value": [1, 2]},),
        ),
        RecordedTurn(turn=2, decision={"kind": "finish", "result": "done"}),
    )
    return {
        "PendingApproval": PendingApproval(
            call_id="c1", tool="search", input={"q": (1, 2)}, turn=2, agent_run_id="r1", agent="a"
        ),
        "Issue root": Issue("bad"),
        "Issue path": Issue("bad", ("items", 0)),
        "ErrorCause bare": ErrorCause("alone"),
        "ErrorCause chain": cause,
        "FanOutFailure": failure,
        "FanOutDiagnostics": FanOutDiagnostics(
            failures=(failure,), failure_count=3, omitted_failure_count=2
        ),
        "Diagnostic bare": Diagnostic(
            code="TUBELESS_STEP_FAILED", kind="step", phase="execution", message="m"
        ),
        "Diagnostic full": Diagnostic(
            code="TUBELESS_VALIDATION_FAILED",
            kind="validation",
            phase="execution",
            message="bad output",
            step_id="s",
            source_code="E2",
            cause=cause,
            issues=(Issue("bad"), Issue("worse", ("a",))),
            fan_out=FanOutDiagnostics(failures=(), failure_count=0, omitted_failure_count=0),
        ),
        "Usage none": Usage(),
        "Usage some": Usage(input_tokens=3, output_tokens=4, cost=0.5),
        "AgentLimits default": AgentLimits(),
        "AgentLimits full": AgentLimits(
            max_turns=5,
            max_calls=0,
            max_input_tokens=10,
            max_output_tokens=0,
            max_total_tokens=30,
            max_cost=1.5,
            max_seconds=2.0,
            max_repairs=2,
        ),
        "PipelinePlan": parent.plan(),
        "PipelinePlan dry run": parent.plan({"dry_run": True, "step_ids": ["second"]}),
        "PipelinePlan errors": parent.plan({"step_ids": []}),
        "SelectionReason": SelectionReason("required-dependency", target_id="t", dependent_id="d"),
        "PipelinePlan selected": parent.plan({"step_ids": ["fan"]}),
        "DefinitionIdentity": parent.definition.identity,
        "DefinitionIdentity versioned": next(
            s for s in parent.execution_order if s.nested
        ).nested.pipeline.definition.identity,
        "DefinitionSnapshot": parent.definition,
        "DefinitionSnapshot agent": agent.definition,
        "NestedPipeline": next(s for s in parent.execution_order if s.id == "loop").nested,
        "McpToolDefinition": tool,
        "McpToolDefinition output": typed,
        "McpLock": McpLock(tools=(tool, typed)),
        "RecordedTurn": turns[0],
        "RecordedAgent": RecordedAgent(path="root", turns=turns),
        "CassetteDocument": CassetteDocument(agents=(RecordedAgent(path="root", turns=turns),)),
        "CliParameter bare": CliParameter(key="n", flag="n", type="number"),
        "CliParameter full": CliParameter(
            key="mode",
            flag="mode",
            type="string",
            multiple=True,
            default=("a",),
            choices=("a", "b"),
            description="How",
            env="MODE",
            short="m",
            group="execution",
            exclusive=True,
        ),
    }


# The fingerprints of the definitions above (they must not change either).
_SHA_A84BA469 = "sha256:a84ba469e2eab5d878dff025e193362518cf4b3da4abe61072344654e54505ab"
_SHA_861B7414 = "sha256:861b741497321ddecd0ad8d59fffaff6651c46dd8019a2153e30edeee7ce0f0a"
_SHA_047B4BF1 = "sha256:047b4bf173370303896b10d7f42bf363a37184d186abf4be14d0a2bff1d112de"
_SHA_56DD5186 = "sha256:56dd51861eac218614b8c602e4491a61a5f6736e38621fa23c917cff5fc86112"
_SHA_3914CD70 = "sha256:3914cd701cbd26719a962581fafd1352328c65f4b233512115682b57e85185b6"
_SHA_9CA9686B = "sha256:9ca9686bd4807e586a46ee7e1a46950191f5536b0d69062ab39297f5922320f0"
_SHA_F0965C63 = "sha256:f0965c6366eace2ea2352aad909f9e2444abb9bbd16e77bc6b273b8a5bbe61f0"
_SHA_F920A6E6 = "sha256:f920a6e60a18ebe7a268467892400064fdf3404501aeb62dd0da5c1185df8b5a"
_SHA_F0765DBF = "sha256:f0765dbf409c74f001806c446f2cf171d8c46b5b15779d54423dde921a4b0670"
_SHA_C836E8BB = "sha256:c836e8bbbe5ec6183d6434619de49ef79fd9f680b987b51ec8f76744b65e41f9"
_SHA_614D8ACD = "sha256:614d8acd0f6e707718a9eafe76f37d2401e701f8cde018b8e842701c232328b7"

EXPECTED: dict[str, Any] = {
    "PendingApproval": {
        "callId": "c1",
        "tool": "search",
        "input": {
            "q": (
                1,
                2,
            )
        },
        "turn": 2,
        "agentRunId": "r1",
        "agent": "a",
    },
    "Issue root": {"message": "bad"},
    "Issue path": {"message": "bad", "path": ["items", 0]},
    "ErrorCause bare": {"message": "alone"},
    "ErrorCause chain": {
        "message": "outer",
        "name": "ValueError",
        "sourceCode": "E1",
        "cause": {"message": "inner"},
    },
    "FanOutFailure": {
        "index": 1,
        "key": "k",
        "keyTruncated": True,
        "cancelled": False,
        "error": {
            "message": "outer",
            "name": "ValueError",
            "sourceCode": "E1",
            "cause": {"message": "inner"},
        },
    },
    "FanOutDiagnostics": {
        "failures": [
            {
                "index": 1,
                "key": "k",
                "keyTruncated": True,
                "cancelled": False,
                "error": {
                    "message": "outer",
                    "name": "ValueError",
                    "sourceCode": "E1",
                    "cause": {"message": "inner"},
                },
            }
        ],
        "failureCount": 3,
        "omittedFailureCount": 2,
    },
    "Diagnostic bare": {
        "code": "TUBELESS_STEP_FAILED",
        "kind": "step",
        "phase": "execution",
        "message": "m",
    },
    "Diagnostic full": {
        "code": "TUBELESS_VALIDATION_FAILED",
        "kind": "validation",
        "phase": "execution",
        "message": "bad output",
        "stepId": "s",
        "sourceCode": "E2",
        "cause": {
            "message": "outer",
            "name": "ValueError",
            "sourceCode": "E1",
            "cause": {"message": "inner"},
        },
        "issues": [{"message": "bad"}, {"message": "worse", "path": ["a"]}],
        "fanOut": {"failures": [], "failureCount": 0, "omittedFailureCount": 0},
    },
    "Usage none": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0, "cost": 0},
    "Usage some": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7, "cost": 0.5},
    "AgentLimits default": {
        "maxTurns": 20,
        "maxCalls": 100,
        "maxDecisions": 100,
        "maxDepth": 4,
        "maxConcurrency": 1,
    },
    "AgentLimits full": {
        "maxTurns": 5,
        "maxCalls": 0,
        "maxDecisions": 100,
        "maxDepth": 4,
        "maxConcurrency": 1,
        "maxInputTokens": 10,
        "maxOutputTokens": 0,
        "maxTotalTokens": 30,
        "maxCost": 1.5,
        "maxSeconds": 2.0,
        "maxRepairs": 2,
    },
    "PipelinePlan": {
        "pipelineId": "parent",
        "dryRun": False,
        "ok": True,
        "errors": [],
        "steps": [
            {
                "id": "first",
                "name": "First",
                "description": "Starts",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
            },
            {
                "id": "second",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
            },
            {
                "id": "wrap",
                "dependencies": ["first"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                },
            },
            {
                "id": "fan",
                "dependencies": [],
                "optionalDependencies": ["second"],
                "skipAfterFailureOf": ["wrap"],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
                "nestedPipeline": {
                    "mode": "for-each",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "concurrency": 3,
                },
            },
            {
                "id": "loop",
                "dependencies": ["fan"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": True,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "maxIterations": 4,
                    "controls": {"continueOnError": True},
                },
            },
            {
                "id": "helper",
                "dependencies": ["loop"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "all"}],
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "helper",
                    "stepIds": ["agent"],
                    "identity": {
                        "version": 2,
                        "structuralFingerprint": _SHA_047B4BF1,
                        "definitionId": _SHA_56DD5186,
                    },
                },
            },
        ],
    },
    "PipelinePlan dry run": {
        "pipelineId": "parent",
        "dryRun": True,
        "ok": True,
        "errors": [],
        "steps": [
            {
                "id": "first",
                "name": "First",
                "description": "Starts",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
            },
            {
                "id": "second",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "exact"}],
                "skipReason": "dry-run",
            },
            {
                "id": "wrap",
                "dependencies": ["first"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                },
            },
            {
                "id": "fan",
                "dependencies": [],
                "optionalDependencies": ["second"],
                "skipAfterFailureOf": ["wrap"],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "for-each",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "concurrency": 3,
                },
            },
            {
                "id": "loop",
                "dependencies": ["fan"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": True,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "maxIterations": 4,
                    "controls": {"continueOnError": True},
                },
            },
            {
                "id": "helper",
                "dependencies": ["loop"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "helper",
                    "stepIds": ["agent"],
                    "identity": {
                        "version": 2,
                        "structuralFingerprint": _SHA_047B4BF1,
                        "definitionId": _SHA_56DD5186,
                    },
                },
            },
        ],
    },
    "PipelinePlan errors": {
        "pipelineId": "parent",
        "dryRun": False,
        "ok": False,
        "errors": [
            {
                "code": "TUBELESS_PLANNING_STEP_SELECTION_EMPTY",
                "kind": "selection",
                "phase": "planning",
                "message": (
                    "Pipeline parent received an empty step_ids list; "
                    "omit step_ids to run every step, or pass at least one step id"
                ),
            }
        ],
        "steps": [],
    },
    "SelectionReason": {"kind": "required-dependency", "dependentId": "d", "targetId": "t"},
    "PipelinePlan selected": {
        "pipelineId": "parent",
        "dryRun": False,
        "ok": True,
        "errors": [],
        "steps": [
            {
                "id": "first",
                "name": "First",
                "description": "Starts",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
            },
            {
                "id": "second",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
            },
            {
                "id": "wrap",
                "dependencies": ["first"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                },
            },
            {
                "id": "fan",
                "dependencies": [],
                "optionalDependencies": ["second"],
                "skipAfterFailureOf": ["wrap"],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": True,
                "selectionReasons": [{"kind": "exact"}],
                "nestedPipeline": {
                    "mode": "for-each",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "concurrency": 3,
                },
            },
            {
                "id": "loop",
                "dependencies": ["fan"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": True,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "maxIterations": 4,
                    "controls": {"continueOnError": True},
                },
            },
            {
                "id": "helper",
                "dependencies": ["loop"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "selected": False,
                "selectionReasons": [{"kind": "not-selected"}],
                "skipReason": "filtered",
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "helper",
                    "stepIds": ["agent"],
                    "identity": {
                        "version": 2,
                        "structuralFingerprint": _SHA_047B4BF1,
                        "definitionId": _SHA_56DD5186,
                    },
                },
            },
        ],
    },
    "DefinitionIdentity": {
        "version": 2,
        "structuralFingerprint": _SHA_3914CD70,
        "definitionId": _SHA_9CA9686B,
    },
    "DefinitionIdentity versioned": {
        "version": 1,
        "structuralFingerprint": _SHA_A84BA469,
        "definitionId": _SHA_861B7414,
        "implementationVersion": "7",
    },
    "DefinitionSnapshot": {
        "identity": {
            "version": 2,
            "structuralFingerprint": _SHA_3914CD70,
            "definitionId": _SHA_9CA9686B,
        },
        "steps": [
            {
                "id": "first",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "outputValidated": False,
            },
            {
                "id": "second",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "outputValidated": True,
            },
            {
                "id": "wrap",
                "dependencies": ["first"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "outputValidated": False,
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                },
            },
            {
                "id": "fan",
                "dependencies": [],
                "optionalDependencies": ["second"],
                "skipAfterFailureOf": ["wrap"],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "outputValidated": False,
                "nestedPipeline": {
                    "mode": "for-each",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "concurrency": 3,
                },
            },
            {
                "id": "loop",
                "dependencies": ["fan"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": True,
                "outputValidated": False,
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "child",
                    "stepIds": ["leaf"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_A84BA469,
                        "definitionId": _SHA_861B7414,
                        "implementationVersion": "7",
                    },
                    "maxIterations": 4,
                    "controls": {"continueOnError": True},
                },
            },
            {
                "id": "helper",
                "dependencies": ["loop"],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "run",
                "runtimeSkipPossible": False,
                "outputValidated": False,
                "nestedPipeline": {
                    "mode": "single",
                    "pipelineId": "helper",
                    "stepIds": ["agent"],
                    "identity": {
                        "version": 2,
                        "structuralFingerprint": _SHA_047B4BF1,
                        "definitionId": _SHA_56DD5186,
                    },
                },
            },
        ],
        "targetIds": ["helper", "second"],
        "optionsValidated": True,
        "resultValidated": True,
    },
    "DefinitionSnapshot agent": {
        "identity": {
            "version": 2,
            "structuralFingerprint": _SHA_047B4BF1,
            "definitionId": _SHA_56DD5186,
        },
        "steps": [
            {
                "id": "agent",
                "dependencies": [],
                "optionalDependencies": [],
                "skipAfterFailureOf": [],
                "dryRun": "skip",
                "runtimeSkipPossible": False,
                "outputValidated": False,
                "nestedPipeline": {
                    "mode": "iterate",
                    "pipelineId": "helper/turn",
                    "stepIds": ["decide", "calls", "reduce"],
                    "identity": {
                        "version": 1,
                        "structuralFingerprint": _SHA_F0965C63,
                        "definitionId": _SHA_F920A6E6,
                    },
                    "maxIterations": 3,
                },
                "agent": {
                    "limits": {
                        "maxTurns": 3,
                        "maxCalls": 100,
                        "maxDecisions": 100,
                        "maxDepth": 4,
                        "maxConcurrency": 1,
                        "maxCost": 2.5,
                    },
                    "resultSchemaFingerprint": _SHA_F0765DBF,
                    "capabilities": [],
                },
            }
        ],
        "targetIds": ["agent"],
        "requiredFinalizerStepIds": ["agent"],
        "optionsValidated": True,
        "resultValidated": False,
    },
    "NestedPipeline": {
        "mode": "iterate",
        "pipelineId": "child",
        "stepIds": ["leaf"],
        "identity": {
            "version": 1,
            "structuralFingerprint": _SHA_A84BA469,
            "definitionId": _SHA_861B7414,
            "implementationVersion": "7",
        },
        "maxIterations": 4,
        "controls": {"continueOnError": True},
    },
    "McpToolDefinition": {
        "name": "search",
        "description": "Finds",
        "inputSchema": {"type": "object", "required": ["q"]},
    },
    "McpToolDefinition output": {
        "name": "add",
        "description": "",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}},
    },
    "McpLock": {
        "version": 1,
        "tools": [
            {
                "name": "add",
                "description": "",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}},
                "digest": _SHA_C836E8BB,
            },
            {
                "name": "search",
                "description": "Finds",
                "inputSchema": {"type": "object", "required": ["q"]},
                "digest": _SHA_614D8ACD,
            },
        ],
    },
    "RecordedTurn": {
        "turn": 1,
        "decision": {"kind": "continue", "calls": [{"id": "c1", "tool": "t", "input": None}]},
        "outcomes": [{"id": "c1", "tool": "t", "ok": True, "value": [1, 2]}],
    },
    "RecordedAgent": {
        "path": "root",
        "turns": [
            {
                "turn": 1,
                "decision": {
                    "kind": "continue",
                    "calls": [{"id": "c1", "tool": "t", "input": None}],
                },
                "outcomes": [{"id": "c1", "tool": "t", "ok": True, "value": [1, 2]}],
            },
            {"turn": 2, "decision": {"kind": "finish", "result": "done"}},
        ],
    },
    "CassetteDocument": {
        "tubelessCassette": 1,
        "agents": [
            {
                "path": "root",
                "turns": [
                    {
                        "turn": 1,
                        "decision": {
                            "kind": "continue",
                            "calls": [{"id": "c1", "tool": "t", "input": None}],
                        },
                        "outcomes": [{"id": "c1", "tool": "t", "ok": True, "value": [1, 2]}],
                    },
                    {"turn": 2, "decision": {"kind": "finish", "result": "done"}},
                ],
            }
        ],
    },
    "CliParameter bare": FrozenDict(
        {
            "key": "n",
            "flag": "n",
            "type": "number",
            "required": True,
            "multiple": False,
            "positional": False,
        }
    ),
    "CliParameter full": FrozenDict(
        {
            "key": "mode",
            "flag": "mode",
            "type": "string",
            "required": False,
            "multiple": True,
            "positional": False,
            "group": "execution",
            "exclusive": True,
            "choices": (
                "a",
                "b",
            ),
            "default": ("a",),
            "description": "How",
            "environment": "MODE",
            "short": "m",
        }
    ),
}


def _exact(actual: Any, expected: Any, where: str = "$") -> None:
    """Equal values of the very same types, dict keys in the same order."""
    assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)}"
        for key, value in expected.items():
            _exact(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)}"
        for index, (item, value) in enumerate(zip(actual, expected, strict=True)):
            _exact(item, value, f"{where}[{index}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_wire_form_is_pinned(name: str) -> None:
    """Each `to_dict()` gives exactly the pinned dict: keys, order, omissions and types."""
    _exact(cases()[name].to_dict(), EXPECTED[name])


def test_every_case_is_pinned() -> None:
    """No representative value goes without its pinned wire form."""
    assert sorted(cases()) == sorted(EXPECTED)


@dataclasses.dataclass(frozen=True, slots=True)
class _Leaf:
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"leaf": self.n}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    plain_value: int
    absent: str | None = None
    required_absent: str | None = dataclasses.field(metadata=OMIT_NONE)
    count: int = dataclasses.field(default=0, metadata=wire(omit="falsy"))
    leaves: tuple[Any, ...] = ()
    leaf: _Leaf | None = None
    raw: Any = dataclasses.field(default=None, metadata=AS_IS)
    null: Any = dataclasses.field(default=None, metadata=wire(omit="never"))
    schema: Any = dataclasses.field(default=None, metadata=wire(key="$schema", convert=repr))
    hidden: int = dataclasses.field(default=0, metadata=wire(written=False))


def test_fields_give_keys_in_order_with_their_rules() -> None:
    """camelCase keys in field order; `None` defaults left out; `wire` metadata as declared."""
    record = _Record(
        plain_value=1, required_absent=None, leaves=(_Leaf(2), (3,), "x"), leaf=_Leaf(4), raw=(5,)
    )
    _exact(
        wire_dict(record),
        {
            "plainValue": 1,
            "leaves": [{"leaf": 2}, (3,), "x"],
            "leaf": {"leaf": 4},
            "raw": (5,),
            "null": None,
        },
    )
    full = _Record(plain_value=0, absent="", required_absent="", count=2, schema=1, hidden=9)
    _exact(
        wire_dict(full),
        {
            "plainValue": 0,
            "absent": "",
            "requiredAbsent": "",
            "count": 2,
            "leaves": [],
            "null": None,
            "$schema": "1",
        },
    )
    assert camel_case("max_input_tokens") == "maxInputTokens"
    assert camel_case("id") == "id"

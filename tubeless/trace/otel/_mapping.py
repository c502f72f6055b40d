"""The mapping from trace records to OpenTelemetry spans: the one table, and nothing else.

The GenAI semantic conventions are still experimental, so every span name, kind and
attribute key the export writes is in this module and nowhere else. `SPAN_MAPPING` has
one `SpanRule` per span role; `RUN_ATTRIBUTES`, `STEP_ATTRIBUTES` and `ERROR_ATTRIBUTES`
say which record fields every run, step and failure adds; `KEPT_ATTRIBUTE_PREFIXES` which
`step.attempted` attributes are copied, `USAGE_ATTRIBUTES` which of them are copied again
under their GenAI names. Values come from record fields that hold ids,
codes, counts and statuses only: never options, inputs, outputs, prompts, state, log
lines, progress messages or error messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ATTRIBUTE_STRING_LIMIT",
    "CALL_ATTRIBUTES",
    "ERROR_ATTRIBUTES",
    "INCOMPLETE_ERROR_TYPE",
    "KEPT_ATTRIBUTE_PREFIXES",
    "RUN_ATTRIBUTES",
    "SPAN_MAPPING",
    "STEP_ATTRIBUTES",
    "USAGE_ATTRIBUTES",
    "SpanRule",
]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SpanRule:
    """How one role of run or step becomes a span."""

    name: str
    """The span name, a `str.format` template over the span's facts."""
    kind: str = "INTERNAL"
    """The `SpanKind` member name."""
    constant: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Attributes with fixed values."""
    facts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Attribute key -> the fact it copies (an absent fact adds no attribute)."""
    folded_step: str | None = None
    """A step of the run that gets no span of its own: its attributes go on this span."""


SPAN_MAPPING: Mapping[str, SpanRule] = MappingProxyType(
    {
        # The root run of an agent (`define_agent`); its one step `agent` is the span itself.
        "agent": SpanRule(
            name="invoke_agent {pipelineId}",
            constant={"gen_ai.operation.name": "invoke_agent"},
            facts={
                "gen_ai.agent.id": "pipelineId",
                "gen_ai.agent.name": "pipelineId",
                "gen_ai.agent.version": "implementationVersion",
            },
            folded_step="agent",
        ),
        # One turn: the child run `<agent>/turn` with steps decide -> calls -> reduce.
        "turn": SpanRule(
            name="turn {index}",
            facts={"tubeless.iteration.index": "index", "tubeless.item.key": "itemKey"},
        ),
        # A tool call run by a handler: the one-step run `<agent>/tool/<name>`.
        "tool": SpanRule(
            name="execute_tool {tool}",
            constant={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"},
            facts={"gen_ai.tool.name": "tool", "gen_ai.tool.call.id": "itemKey"},
            folded_step="tool",
        ),
        # A call of a pipeline tool: any other child run of a turn (a child agent's run
        # then gets an `agent` span under this one).
        "call": SpanRule(
            name="execute_tool {tool}",
            constant={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"},
            facts={"gen_ai.tool.name": "tool", "gen_ai.tool.call.id": "itemKey"},
        ),
        # Every other run, and every step that is not folded.
        "pipeline": SpanRule(name="pipeline {pipelineId}"),
        "step": SpanRule(name="step {stepId}"),
    }
)
"""Span role -> its rule. Roles: agent, turn, tool, call, pipeline, step."""

RUN_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {
        "tubeless.pipeline.id": "pipelineId",
        "tubeless.run.id": "runId",
        "tubeless.run.parent_id": "parentRunId",
        "tubeless.correlation.id": "correlationId",
        "tubeless.definition.id": "definitionId",
        "tubeless.run.dry_run": "dryRun",
        "tubeless.run.status": "status",
        "tubeless.run.finalized": "finalized",
    }
)
"""Attribute key -> fact, on every run's span (an agent called as a tool: on both spans)."""

STEP_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {
        "tubeless.step.id": "stepId",
        "tubeless.attempt.id": "attemptId",
        "tubeless.step.status": "status",
        "tubeless.step.skip_reason": "reason",
    }
)
"""Attribute key -> fact, on every step's span."""

ERROR_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {
        "error.type": "code",
        "tubeless.error.kind": "kind",
        "tubeless.error.phase": "phase",
        "tubeless.error.source_code": "sourceCode",
    }
)
"""Attribute key -> field of the record's `error`, on a failed or cancelled span.

The span status is then ERROR with the code as its description; the error's message,
cause and stack are never copied (they may quote inputs).
"""

KEPT_ATTRIBUTE_PREFIXES = ("agent.",)
"""`step.attempted` attributes copied as they are (`agent.turn`, `agent.callId`, ...)."""

USAGE_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {
        "agent.usage.inputTokens": "gen_ai.usage.input_tokens",
        "agent.usage.outputTokens": "gen_ai.usage.output_tokens",
    }
)
"""Usage a `decide` attempt charged -> the GenAI attribute it also goes on its span as."""

CALL_ATTRIBUTES = ("agent.callId", "agent.tool", "agent.parentAttemptId")
"""Kept attributes of an agent called as a tool that also go on its `execute_tool` span."""

INCOMPLETE_ERROR_TYPE = "_OTHER"
"""`error.type` of a span still open when its sink closed (the run never completed)."""

ATTRIBUTE_STRING_LIMIT = 4096
"""String attribute values are cut to this many characters."""

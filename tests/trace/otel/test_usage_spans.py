"""Usage on OpenTelemetry spans: each decide span carries `gen_ai.usage.*` tokens."""

from __future__ import annotations

from typing import Any

from tubeless import define_agent, define_tool
from tubeless.trace.otel import OtelTraceSink


def _decide(state: Any, context: Any) -> Any:
    reservation = context.reserve_usage(input_tokens=500, output_tokens=100, cost=0.5)
    reservation.settle(input_tokens=120 * context.turn, output_tokens=30, cost=0.25)
    if context.turn == 1:
        return {"kind": "continue", "calls": [{"id": "e", "tool": "echo", "input": 1}]}
    return {"kind": "finish", "result": "done"}


def test_decide_spans_carry_the_gen_ai_usage_of_their_turn(spans: Any) -> None:
    """Turn 1's decide span has 120 in / 30 out, turn 2's 240 in / 30 out (in-memory export)."""
    echo = define_tool(
        description="Echo", input_schema={}, output_schema={}, run=lambda value, context: value
    )
    agent = define_agent(
        id="metered",
        input_schema={},
        result_schema={"type": "string"},
        initial_state=lambda options: {},
        decide=_decide,
        tools={"echo": echo},
    )
    with OtelTraceSink(spans.provider) as sink:
        run = agent.run({}, context={"tracing": sink})
    assert run.status == "completed", run.errors

    decides = sorted(
        (dict(span.attributes or {}) for span in spans.ended if span.name == "step decide"),
        key=lambda attributes: attributes["agent.turn"],
    )
    assert [(a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) for a in decides] == [
        (120, 30),
        (240, 30),
    ]
    assert [a["agent.usage.cost"] for a in decides] == [0.25, 0.25]
    assert run.usage.input_tokens == 360


def test_a_decide_that_charges_nothing_has_no_usage_attributes(spans: Any) -> None:
    """Without reservations or reports no `gen_ai.usage.*` key is exported."""
    agent = define_agent(
        id="quiet",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": 1},
    )
    with OtelTraceSink(spans.provider) as sink:
        agent.run({}, context={"tracing": sink})
    attributes = dict(spans.one("step decide").attributes or {})
    assert "gen_ai.usage.input_tokens" not in attributes
    assert "agent.usage.inputTokens" not in attributes

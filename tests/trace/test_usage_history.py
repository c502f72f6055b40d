"""Per-agent usage in the agent history: from the decide attempts' records, text and JSON."""

from __future__ import annotations

from typing import Any

from tubeless import define_agent
from tubeless.testing import MemoryTraceSink
from tubeless.trace import agent_history, format_agent_history


def _tree(source: str) -> tuple[Any, list[dict[str, Any]]]:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    sink = MemoryTraceSink()
    run = namespace["agent"].run({}, context={"tracing": sink})
    assert run.status == "completed", run.errors
    return run, sink.records


def test_each_agent_shows_its_own_usage_and_each_turn_its_decisions(
    metered_agents_source: str,
) -> None:
    """The parent counts its two turns, the child its one: a tree's usage is not summed."""
    run, records = _tree(metered_agents_source)

    history = agent_history(records, run.run_id)

    assert history is not None
    parent, child = history.agents
    assert parent.usage == {"inputTokens": 200, "outputTokens": 40, "totalTokens": 240, "cost": 2}
    assert child.usage == {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35, "cost": 0.25}
    assert [turn.usage for turn in parent.turns] == [
        {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120, "cost": 1}
    ] * 2
    assert parent.to_dict()["usage"]["totalTokens"] == 240
    assert run.usage.total_tokens == 275


def test_history_text_prints_usage_on_agent_and_turn_lines(metered_agents_source: str) -> None:
    """`tokens <in> in <out> out  cost <c>` follows each agent and turn that spent any."""
    run, records = _tree(metered_agents_source)
    history = agent_history(records, run.run_id)
    assert history is not None

    lines = format_agent_history(history).splitlines()

    assert lines[0].endswith("tokens 200 in 40 out  cost 2")
    assert lines[1] == "  turn 1  completed  tokens 100 in 20 out  cost 1"
    assert any(line.endswith("tokens 30 in 5 out  cost 0.25") for line in lines)


def test_agents_without_usage_have_no_usage_in_history() -> None:
    """An agent that never charged usage keeps today's history shape."""
    agent = define_agent(
        id="quiet",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": 1},
    )
    sink = MemoryTraceSink()
    run = agent.run({}, context={"tracing": sink})
    history = agent_history(sink.records, run.run_id)
    assert history is not None
    assert "usage" not in history.to_dict()["agents"][0]
    assert "tokens" not in format_agent_history(history)

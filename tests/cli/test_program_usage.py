"""`tubeless history` shows per-agent usage, read from a store written by `run --store`."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.slow

METERED = textwrap.dedent(
    """
    from tubeless import define_agent, define_pipeline_command, pipeline_tool

    def child_decide(state, context):
        context.reserve_usage(input_tokens=50, output_tokens=50).settle(
            input_tokens=30, output_tokens=5, cost=0.25
        )
        return {"kind": "finish", "result": "child done"}

    child = define_agent(
        id="child", input_schema={}, result_schema={}, initial_state=lambda o: {},
        decide=child_decide,
    )

    def decide(state, context):
        context.report_usage(input_tokens=100, output_tokens=20, cost=1)
        if context.turn == 1:
            return {"kind": "continue", "calls": [{"id": "k", "tool": "child", "input": {}}]}
        return {"kind": "finish", "result": "done"}

    agent = define_agent(
        id="parent", input_schema={"type": "object"}, result_schema={},
        initial_state=lambda o: {},
        decide=decide, tools={"child": pipeline_tool(child, description="Delegate")},
    )
    command = define_pipeline_command(agent)
    """
)


def test_history_json_and_text_show_usage_through_the_cli(cli: Any) -> None:
    """`history --json RUN_ID` and `history RUN_ID` read per-agent usage from the store."""
    cli.write("metered.py", METERED)
    result = cli("run", "--store", ".tubeless/runs.sqlite", "metered.py")
    assert result.code == 0, result.stderr
    runs = json.loads(cli("history", "--json").stdout)["runs"]
    run_id = next(run["runId"] for run in runs if run["pipelineId"] == "parent")

    detail = json.loads(cli("history", "--json", run_id).stdout)
    text = cli("history", run_id).stdout

    parent, child = detail["agentHistory"]["agents"]
    assert parent["usage"]["inputTokens"] == 200
    assert child["usage"] == {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35, "cost": 0.25}
    assert "tokens 200 in 40 out  cost 2" in text

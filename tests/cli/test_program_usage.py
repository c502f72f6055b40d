"""`tubeless history` shows per-agent usage, read from a store written by `run --store`."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_history_json_and_text_show_usage_through_the_cli(
    cli: Any, metered_agents_source: str
) -> None:
    """`history --json RUN_ID` and `history RUN_ID` read per-agent usage from the store."""
    cli.write("metered.py", metered_agents_source)
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

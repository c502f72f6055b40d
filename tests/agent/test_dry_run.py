"""Dry runs: the agent is skipped without a preview decision source, tools need previews."""

from __future__ import annotations

import json
from typing import Any

from tubeless.agent import define_agent, define_tool
from tubeless.errors import ToolError
from tubeless.pipeline import render_plan
from tubeless.testing import MemoryTraceSink

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}


class Calls:
    """Names of the callbacks that ran, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def initial_state(self, options: Any) -> Any:
        self.names.append("initial_state")
        return {"seen": []}

    def decide(self, state: Any, context: Any) -> Any:
        self.names.append("decide")
        return FINISH

    def preview_decide(self, state: Any, context: Any) -> Any:
        self.names.append(f"dry_run:{context.turn}:{context.dry_run}")
        if state["seen"]:
            return {"kind": "finish", "result": ";".join(state["seen"])}
        return {"kind": "continue", "calls": [{"id": "c1", "tool": "work", "input": "x"}]}

    def run(self, value: str, context: Any) -> str:
        self.names.append("run")
        return value

    def preview(self, value: str, context: Any) -> str:
        self.names.append(f"preview:{context.dry_run}")
        return f"preview of {value}"

    def reduce(self, state: Any, outcomes: Any) -> Any:
        self.names.append("reduce")
        seen = [
            o["value"] if o["ok"] else f"{o['error']['code']}: {o['error']['message']}"
            for o in outcomes
        ]
        return {"seen": seen}


def _agent(calls: Calls, *, source: bool, preview: Any = None) -> Any:
    tool = define_tool(
        description="Work",
        input_schema=TEXT,
        output_schema=TEXT,
        run=calls.run,
        dry_run=preview,
    )
    return define_agent(
        id="preview-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=calls.initial_state,
        decide=calls.decide,
        dry_run=calls.preview_decide if source else None,
        tools={"work": tool},
        reduce=calls.reduce,
    )


def test_without_a_preview_source_the_agent_step_is_skipped() -> None:
    """No state, no decisions; the step is skipped and required finalization fails."""
    calls = Calls()

    run = _agent(calls, source=False).run({}, controls={"dry_run": True})

    assert calls.names == []
    assert run.status == "failed"
    assert run.finalized is False
    assert run.dry_run is True
    [step] = run.steps
    assert (step.id, step.status, step.reason) == ("agent", "skipped", "dry-run")
    assert run.errors[0].phase == "finalization"


def test_the_plan_shows_the_agent_skipped_in_a_dry_run_without_source() -> None:
    """The dry-run plan disposition is `skip: dry-run` without a preview source."""
    plan = _agent(Calls(), source=False).plan({"dry_run": True})

    assert render_plan(plan, explain=False) == (
        "Pipeline preview-agent: plan (ok=true, dryRun=true, steps=1)\n"
        "  - agent: skip: dry-run -> iteration (at most 20) pipeline preview-agent/turn "
        "(3 declared steps)"
    )


def test_with_a_preview_source_decide_is_never_called() -> None:
    """The preview source decides, preview handlers run, and the agent finishes."""
    calls = Calls()

    run = _agent(calls, source=True, preview=calls.preview).run({}, controls={"dry_run": True})

    assert run.status == "completed"
    assert run.value == "preview of x"
    assert calls.names == [
        "initial_state",
        "dry_run:1:True",
        "preview:True",
        "reduce",
        "dry_run:2:True",
    ]
    plan = _agent(calls, source=True).plan({"dry_run": True})
    assert "agent: run -> iteration" in render_plan(plan, explain=False)


def test_the_preview_source_is_not_used_in_real_runs() -> None:
    """Outside dry runs `decide` decides and `run` handles calls."""
    calls = Calls()

    run = _agent(calls, source=True, preview=calls.preview).run({})

    assert run.value == "done"
    assert calls.names == ["initial_state", "decide"]


def test_a_tool_without_a_preview_fails_the_turn_in_a_dry_run(sink: MemoryTraceSink) -> None:
    """A skipped tool leaves no observation: the turn fails instead of inventing one."""
    calls = Calls()

    run = _agent(calls, source=True).run({}, controls={"dry_run": True}, context={"tracing": sink})

    assert run.status == "failed"
    assert run.finalized is False
    assert calls.names == ["initial_state", "dry_run:1:True"]
    skipped = [
        r for r in sink.records if r["name"] == "step.skipped" and "/tool/" in r["pipelineId"]
    ]
    assert [(r["itemKey"], r["payload"]["reason"]) for r in skipped] == [("c1", "dry-run")]
    assert "TUBELESS_REQUIRED_OUTPUTS_MISSING" in json.dumps([e.to_dict() for e in run.errors])


def test_a_tool_error_from_a_preview_handler_is_recoverable() -> None:
    """Previews may raise `ToolError` too; the reducer sees the failed outcome."""
    calls = Calls()

    def preview(value: str, context: Any) -> str:
        raise ToolError("PREVIEW_ONLY", "No live data in a preview")

    run = _agent(calls, source=True, preview=preview).run({}, controls={"dry_run": True})

    assert run.status == "completed"
    assert run.value == "PREVIEW_ONLY: No live data in a preview"


def test_a_skip_policy_is_the_same_as_no_preview() -> None:
    """`dry_run="skip"` on a tool behaves as having no preview handler."""
    calls = Calls()

    run = _agent(calls, source=True, preview="skip").run({}, controls={"dry_run": True})

    assert run.status == "failed"
    assert "run" not in calls.names

"""The agent tree of a recorded run: agents, their turns, calls and subagents, from records.

Pure functions over trace records (no I/O, no clock), for `tubeless history RUN_ID`. An
agent run is recognised by its records alone: a run whose step `agent` was planned as an
iteration over `<pipeline id>/turn`. Its turns are the iteration runs below it; each run
directly below a turn is one call (`itemKey` = call id). A subagent's own run is the call
run; an ordinary pipeline tool's run (`<agent>/tool/<name>`) has its pipeline below it. The
usage a turn's `decide` charged is on its attempt (`agent.usage.*` attributes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tubeless.errors import ApprovalRequiredError
from tubeless.trace._projection import _safe

__all__ = [
    "AgentCallView",
    "AgentHistory",
    "AgentTurnView",
    "AgentView",
    "agent_history",
    "failed_call_counts",
    "format_agent_history",
]

LIMIT_CODE = "TUBELESS_AGENT_LIMIT_REACHED"
USAGE_ATTRIBUTES = (
    ("agent.usage.inputTokens", "inputTokens"),
    ("agent.usage.outputTokens", "outputTokens"),
    ("agent.usage.cost", "cost"),
)
"""Decide-attempt attribute -> its figure in a history's `usage`."""
APPROVAL_CODE = ApprovalRequiredError.CODE


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentCallView:
    """One call of an agent's turn."""

    id: str
    """The call id (the call run's `itemKey`)."""
    tool: str
    """The tool name the decision used (the alias, from the call's first attempt)."""
    run_id: str
    """The call's run: the tool run, or the subagent's own run."""
    status: str
    """`running`, `completed`, `failed` or `cancelled`."""
    duration_ms: float | None = None
    """How long the call run took."""
    tool_error_code: str | None = None
    """The handler's `ToolError` code, for a call that failed with one."""
    child_agent_run_ids: tuple[str, ...] = ()
    """The agent runs this call started (a subagent, or agents inside a pipeline tool)."""
    replay: str | None = None
    """For a durable agent that resumed: `reused` (the saved outcome, not run again),
    `interrupted` (running when the process died; not safe to repeat) or `rejected` (a
    person refused the call it waited on)."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{id, tool, runId, status, durationMs?, toolErrorCode?, replay?,
        childAgentRunIds}`."""
        out: dict[str, Any] = {
            "id": self.id,
            "tool": self.tool,
            "runId": self.run_id,
            "status": self.status,
        }
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        if self.tool_error_code is not None:
            out["toolErrorCode"] = self.tool_error_code
        if self.replay is not None:
            out["replay"] = self.replay
        out["childAgentRunIds"] = list(self.child_agent_run_ids)
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentTurnView:
    """One turn of an agent."""

    index: int
    """1-based turn number."""
    run_id: str
    """The turn run (`<agent id>/turn`)."""
    status: str
    """The turn run's status."""
    calls: tuple[AgentCallView, ...]
    """The turn's dispatched calls, in the order they started."""
    usage: Mapping[str, int | float] | None = None
    """`{inputTokens, outputTokens, totalTokens, cost}` its `decide` charged, if any."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{index, runId, status, usage?, calls}`."""
        out: dict[str, Any] = {"index": self.index, "runId": self.run_id, "status": self.status}
        if self.usage is not None:
            out["usage"] = dict(self.usage)
        out["calls"] = [call.to_dict() for call in self.calls]
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentView:
    """One agent invocation in the tree."""

    run_id: str
    """The agent's run."""
    pipeline_id: str
    """The agent's id."""
    status: str
    """The agent run's status."""
    ended: str
    """`finished`, `limit`, `waiting` (for approval of tool calls), `cancelled`, `failed`
    or `running`."""
    turns: tuple[AgentTurnView, ...]
    """The agent's turns, in order."""
    duration_ms: float | None = None
    """How long the agent run took."""
    parent_call: Mapping[str, str] | None = None
    """`{agentRunId, turnRunId, callId, tool}` of the call that started it, if any."""
    usage: Mapping[str, int | float] | None = None
    """`{inputTokens, outputTokens, totalTokens, cost}` its own turns charged (its
    subagents' are theirs), when any turn recorded usage."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{runId, pipelineId, status, ended, durationMs?, parentCall?, usage?,
        turns}`."""
        out: dict[str, Any] = {
            "runId": self.run_id,
            "pipelineId": self.pipeline_id,
            "status": self.status,
            "ended": self.ended,
        }
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        if self.parent_call is not None:
            out["parentCall"] = dict(self.parent_call)
        if self.usage is not None:
            out["usage"] = dict(self.usage)
        out["turns"] = [turn.to_dict() for turn in self.turns]
        return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentHistory:
    """Every agent in the subtree of one run, parents before their subagents."""

    agents: tuple[AgentView, ...]
    """The agents, depth first, each subagent after the call that started it."""

    def to_dict(self) -> dict[str, Any]:
        """Return `{agents: [...]}`."""
        return {"agents": [agent.to_dict() for agent in self.agents]}


def _add_usage(
    total: dict[str, int | float] | None, figures: Mapping[str, Any] | None
) -> dict[str, int | float] | None:
    """`total` plus the usage `figures` (either may be absent)."""
    if figures is None:
        return total
    out = dict(total or {"inputTokens": 0, "outputTokens": 0, "cost": 0})
    for key in ("inputTokens", "outputTokens", "cost"):
        value = figures.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] += value
    out["totalTokens"] = out["inputTokens"] + out["outputTokens"]
    return out


class _Run:
    __slots__ = ("attributes", "children", "completed", "first", "is_agent", "usage")

    def __init__(self, first: Mapping[str, Any]) -> None:
        self.first = first
        self.completed: Mapping[str, Any] | None = None
        self.attributes: Mapping[str, Any] | None = None
        self.is_agent = False
        self.children: list[str] = []
        self.usage: dict[str, int | float] | None = None
        """What the run's `decide` attempts charged (a turn run's)."""

    @property
    def run_id(self) -> str:
        return str(self.first["runId"])

    @property
    def pipeline_id(self) -> str:
        return str(self.first["pipelineId"])

    @property
    def parent(self) -> str | None:
        return self.first.get("parentRunId") or None

    @property
    def status(self) -> str:
        return str(self.completed["payload"]["status"]) if self.completed else "running"

    @property
    def duration_ms(self) -> float | None:
        return self.completed.get("durationMs") if self.completed else None

    @property
    def error(self) -> Mapping[str, Any] | None:
        return self.completed.get("error") if self.completed else None

    def add(self, record: Mapping[str, Any]) -> None:
        name = record["name"]
        if name == "pipeline.completed":
            self.completed = record
        elif name == "step.planned" and record.get("stepId") == "agent":
            nested = record["payload"].get("nestedPipeline") or {}
            self.is_agent = (
                nested.get("mode") == "iterate"
                and nested.get("pipelineId") == f"{self.pipeline_id}/turn"
            )
        elif name == "step.attempted":
            attributes = record["payload"].get("attributes") or {}
            if record.get("stepId") == "decide" and USAGE_ATTRIBUTES[0][0] in attributes:
                figures = {key: attributes.get(attribute) for attribute, key in USAGE_ATTRIBUTES}
                self.usage = _add_usage(self.usage, figures)
            elif self.attributes is None and "agent.callId" in attributes:
                self.attributes = attributes


def _fold(records: Iterable[Mapping[str, Any]]) -> dict[str, _Run]:
    runs: dict[str, _Run] = {}
    for record in records:
        run = runs.get(record["runId"])
        if run is None:
            run = runs[record["runId"]] = _Run(record)
            parent = runs.get(run.parent or "")
            if parent is not None:
                parent.children.append(run.run_id)
        run.add(record)
    return runs


def _codes(error: Mapping[str, Any] | None) -> Iterable[str]:
    link: Mapping[str, Any] | None = error
    while link is not None:
        for key in ("code", "sourceCode"):
            if isinstance(link.get(key), str):
                yield link[key]
        link = link.get("cause")


def _ended(run: _Run) -> str:
    if run.status == "completed":
        return "finished"
    if run.status in ("cancelled", "running"):
        return run.status
    codes = set(_codes(run.error))
    if APPROVAL_CODE in codes:
        return "waiting"
    return "limit" if LIMIT_CODE in codes else "failed"


def _replay(attributes: Mapping[str, Any]) -> str | None:
    if attributes.get("agent.replayed") is True:
        return "reused"
    if attributes.get("agent.interrupted") is True:
        return "interrupted"
    if attributes.get("agent.rejected") is True:
        return "rejected"
    return None


class _Builder:
    def __init__(self, runs: dict[str, _Run]) -> None:
        self._runs = runs
        self.agents: list[AgentView] = []

    def _agents_below(self, run_id: str) -> list[str]:
        """Agent runs below `run_id`, not counting those below another agent."""
        found: list[str] = []
        for child_id in self._runs[run_id].children:
            child = self._runs[child_id]
            found += [child_id] if child.is_agent else self._agents_below(child_id)
        return found

    def _call(self, agent: _Run, run: _Run) -> AgentCallView:
        attributes = run.attributes or {}
        prefix = f"{agent.pipeline_id}/tool/"
        fallback = run.pipeline_id.removeprefix(prefix)
        error = run.error or {}
        code = error.get("sourceCode") if error.get("code") == "TUBELESS_STEP_FAILED" else None
        children = [run.run_id] if run.is_agent else self._agents_below(run.run_id)
        return AgentCallView(
            id=str(run.first.get("itemKey", "")),
            tool=str(attributes.get("agent.tool", fallback)),
            run_id=run.run_id,
            status=run.status,
            duration_ms=run.duration_ms,
            tool_error_code=code if isinstance(code, str) else None,
            child_agent_run_ids=tuple(children),
            replay=_replay(attributes),
        )

    def add_agent(self, agent: _Run, parent_call: Mapping[str, str] | None) -> None:
        turns: list[AgentTurnView] = []
        usage: dict[str, int | float] | None = None
        calls_of: list[tuple[AgentCallView, _Run]] = []
        for turn_id in agent.children:
            turn = self._runs[turn_id]
            iteration = turn.first.get("iteration") or {}
            if iteration.get("runId") != agent.run_id:
                continue
            calls = []
            for call_id in turn.children:
                call = self._call(agent, self._runs[call_id])
                calls.append(call)
                calls_of.append((call, turn))
            turns.append(
                AgentTurnView(
                    index=int(iteration.get("index", len(turns) + 1)),
                    run_id=turn.run_id,
                    status=turn.status,
                    calls=tuple(calls),
                    usage=_add_usage(None, turn.usage),
                )
            )
            usage = _add_usage(usage, turn.usage)
        self.agents.append(
            AgentView(
                run_id=agent.run_id,
                pipeline_id=agent.pipeline_id,
                status=agent.status,
                ended=_ended(agent),
                turns=tuple(turns),
                duration_ms=agent.duration_ms,
                parent_call=parent_call,
                usage=usage,
            )
        )
        for call, turn in calls_of:
            for child_id in call.child_agent_run_ids:
                link = {
                    "agentRunId": agent.run_id,
                    "turnRunId": turn.run_id,
                    "callId": call.id,
                    "tool": call.tool,
                }
                self.add_agent(self._runs[child_id], link)


def agent_history(records: Sequence[Mapping[str, Any]], run_id: str) -> AgentHistory | None:
    """The agent tree of `run_id`, or `None` when no agent ran in its subtree.

    Args:
        records: trace records in write order; they may hold many run trees.
        run_id: the run whose subtree to show (an agent run, or a pipeline that nests
            agents).
    """
    runs = _fold(records)
    if run_id not in runs:
        return None
    builder = _Builder(runs)
    roots = [run_id] if runs[run_id].is_agent else builder._agents_below(run_id)
    for root in roots:
        builder.add_agent(runs[root], None)
    return AgentHistory(agents=tuple(builder.agents)) if builder.agents else None


def failed_call_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """For each agent run with failed tool calls, how many of its calls failed.

    A call counts when its run (directly below one of the agent's turns) did not
    complete; calls of subagents count for the subagent, not for the agent above it.

    Args:
        records: trace records in write order; they may hold many run trees.
    """
    runs = _fold(records)
    counts: dict[str, int] = {}
    for agent in runs.values():
        if not agent.is_agent:
            continue
        failed = 0
        for turn_id in agent.children:
            turn = runs[turn_id]
            if (turn.first.get("iteration") or {}).get("runId") != agent.run_id:
                continue
            failed += sum(1 for call in turn.children if runs[call].status == "failed")
        if failed:
            counts[agent.run_id] = failed
    return counts


def _line(depth: int, text: str) -> str:
    return "  " * depth + text


def _spent(usage: Mapping[str, int | float] | None) -> str:
    """`  tokens <in> in <out> out  cost <cost>` for a line, or nothing without usage."""
    if usage is None:
        return ""
    cost = f"  cost {usage['cost']:g}" if usage["cost"] else ""
    return f"  tokens {usage['inputTokens']} in {usage['outputTokens']} out{cost}"


def format_agent_history(history: AgentHistory) -> str:
    """Render the tree: each agent, its turns, each call, subagents under their calls.

    Recorded text (ids, tool names, codes) has control characters replaced, so it cannot
    rewrite the terminal.
    """
    safe = _safe
    by_id = {agent.run_id: agent for agent in history.agents}
    children = {id(agent) for agent in history.agents if agent.parent_call is not None}
    lines: list[str] = []

    def ms(value: float | None) -> str:
        if value is None:
            return ""
        return f"  {int(value)}ms" if float(value).is_integer() else f"  {value}ms"

    def agent_lines(agent: AgentView, depth: int) -> None:
        lines.append(
            _line(
                depth,
                f"agent {safe(agent.pipeline_id)}  {safe(agent.run_id)}  {agent.ended}"
                f"{ms(agent.duration_ms)}{_spent(agent.usage)}",
            )
        )
        for turn in agent.turns:
            lines.append(_line(depth + 1, f"turn {turn.index}  {turn.status}{_spent(turn.usage)}"))
            for call in turn.calls:
                code = f"  {safe(call.tool_error_code)}" if call.tool_error_code else ""
                replay = f"  {call.replay}" if call.replay else ""
                lines.append(
                    _line(
                        depth + 2,
                        f"call {safe(call.id)}  {safe(call.tool)}  {call.status}{code}"
                        f"{replay}{ms(call.duration_ms)}",
                    )
                )
                for child_id in call.child_agent_run_ids:
                    if child_id in by_id:
                        agent_lines(by_id[child_id], depth + 3)

    for agent in history.agents:
        if id(agent) not in children:
            agent_lines(agent, 0)
    return "\n".join(lines) + "\n"

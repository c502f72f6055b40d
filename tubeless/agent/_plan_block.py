"""The agent block of a plan: the `agent` annotation of an agent's step, which renders
itself under the step in `render_plan` (its limits, then the capability tree)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict

_LIMIT_NAMES = (
    ("maxTurns", "max_turns"),
    ("maxCalls", "max_calls"),
    ("maxDecisions", "max_decisions"),
    ("maxDepth", "max_depth"),
    ("maxConcurrency", "max_concurrency"),
    ("maxSeconds", "max_seconds"),
    ("maxRepairs", "max_repairs"),
)


class AgentBlock(FrozenDict):
    """The annotation data of an agent step: `{limits, resultSchemaFingerprint,
    capabilities}` as plans and snapshots show it, and the lines a rendered plan shows."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return (AgentBlock, (dict(self),))

    def plan_lines(self) -> list[str]:
        """The lines under the step in an explained plan: limits, then the tools."""
        lines = [f"      limits: {_limits_text(self['limits'])}"]
        return lines + _render_capabilities(self["capabilities"], "      ")


def _limits_text(limits: Mapping[str, Any]) -> str:
    return " ".join(f"{name}={limits[key]}" for key, name in _LIMIT_NAMES if key in limits)


def _render_capabilities(capabilities: Sequence[Mapping[str, Any]], indent: str) -> list[str]:
    """One line per tool; a pipeline tool names its child, a subagent nests its own tools."""
    lines = []
    for capability in capabilities:
        line = f"{indent}tool {capability['name']}"
        child = capability.get("pipeline")
        if child is not None:
            kind = "subagent" if child["subagent"] else "pipeline"
            line += f": {kind} {child['id']}"
            if "limits" in capability:
                line += f" ({_limits_text(capability['limits'])})"
        lines.append(line)
        lines += _render_capabilities(capability.get("capabilities", ()), indent + "  ")
    return lines

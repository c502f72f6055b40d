"""Repairs: an invalid decision goes back to `decide`, with every problem one pass finds.

A repairable problem (an envelope or call shape, an unknown tool, a duplicate id, an
argument or finish result that fails its schema or the plain-data check) is found before
anything of the decision is admitted. With a repair left (`AgentLimits.max_repairs`,
charged to every budget in the chain with the decision it asks for), `decide` runs again
in the same turn and sees the rejection as `context.rejection`; without one the run fails
with the first problem's error, as it did before repairs existed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import QUOTE_LIMIT, quote
from tubeless.agent._budget import Budget
from tubeless.agent._decisions import CALL_ID_LIMIT, AgentCall, decision_problems
from tubeless.errors import AgentError, AgentLimitError, Issue, SchemaValidationError

ARGUMENTS_CODE = "TUBELESS_AGENT_INVALID_ARGUMENTS"
"""An argument failed its tool's input schema or the plain-data check."""
DECISION_CODE = "TUBELESS_AGENT_INVALID_DECISION"
"""The envelope or a call is malformed: shape, tool names, call ids."""
RESULT_CODE = "TUBELESS_AGENT_INVALID_RESULT"
"""A finish result failed the result schema or the plain-data check."""

ISSUE_LIMIT = 32
"""At most this many issues in one rejection."""
MESSAGE_LIMIT = 500
"""Characters of an issue's message (a rejection's own message gets twice as many)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One repairable thing wrong with a decision."""

    error: AgentError
    """What the run fails with for it when no repair is left."""
    path: str
    """JSON pointer into the decision (`/calls/1/input`); schema issues go below it."""
    call: object = None
    """The offending call (raw or parsed), when the problem belongs to one."""
    issues: tuple[Issue, ...] = ()
    """The schema's issues, each one issue of the rejection (none: the error's message)."""


class DecisionRejected(Exception):  # noqa: N818 - internal signal, never leaves `decide`
    """A decision with repairable problems; nothing of it was admitted or charged."""

    def __init__(self, error: AgentError, problems: Sequence[Problem]) -> None:
        super().__init__(str(error))
        self.error = error
        """The error the run fails with: the first problem in the order checks run."""
        self.problems = tuple(problems) or (Problem(error, ""),)


def refused_input(error: Exception, code: str) -> AgentError:
    """A boundary's refusal of model data under the agent's `code` (the refusal its cause).

    The message keeps the boundary's words (`Agent tool echo input validation failed: ...`).
    """
    refused = AgentError(str(error)[:4096], code=code)
    refused.__cause__ = error
    return refused


def schema_issues(error: AgentError) -> tuple[Issue, ...]:
    """The schema issues behind a refused input (none when the schema itself raised)."""
    cause = error.__cause__
    return cause.issues if isinstance(cause, SchemaValidationError) else ()


def shape_rejection(raw: object, error: AgentError) -> DecisionRejected:
    """Every shape problem of a decision `parse_decision` refused with `error`."""
    try:
        found = decision_problems(raw, ISSUE_LIMIT)
    except Exception:  # a hostile value that breaks the second look, too
        found = []
    return DecisionRejected(error, [Problem(problem, path, call) for path, problem, call in found])


def charge_repair(budget: Budget, rejected: DecisionRejected) -> None:
    """Charge a repair and its decision, or raise what the run fails with.

    (An agent whose own `max_repairs` is 0 never gets here: its first problem raises.)

    Raises:
        AgentLimitError: `max_repairs` or `max_decisions` (with `scope=` the refusing
            budget), caused by the first problem's error.
    """
    try:
        budget.admit_repair()
    except AgentLimitError as limit:
        raise limit from rejected.error


def rejection_of(rejected: DecisionRejected, attempt: int, tools: Collection[str]) -> FrozenDict:
    """The read-only `context.rejection` for the next `decide` of the turn."""
    issues: list[FrozenDict] = []
    for problem in rejected.problems:
        call_id, tool = _call_fields(problem.call, tools)
        found = problem.issues or (Issue(message=str(problem.error)),)
        for issue in found:
            issues.append(
                FrozenDict(
                    callId=call_id,
                    tool=tool,
                    path=problem.path + pointer(issue.path),
                    message=bounded(issue.message, MESSAGE_LIMIT),
                )
            )
    return FrozenDict(
        code=rejected.error.code,
        message=bounded(str(rejected.error), 2 * MESSAGE_LIMIT),
        attempt=attempt,
        issues=tuple(issues[:ISSUE_LIMIT]),
    )


def pointer(parts: Sequence[str | int]) -> str:
    """A JSON pointer (RFC 6901) of a value path; an odd or long key shows quoted, bounded."""
    text = []
    for part in parts:
        if isinstance(part, int):
            text.append(f"/{part}")
        elif len(part) <= QUOTE_LIMIT and part.isprintable():
            text.append("/" + part.replace("~", "~0").replace("/", "~1"))
        else:
            text.append("/" + quote(part).replace("~", "~0").replace("/", "~1"))
    return "".join(text)


def bounded(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, control and unprintable characters escaped."""
    cut = text[:limit]
    if not cut.isprintable():
        cut = "".join(char if char.isprintable() else repr(char)[1:-1] for char in cut)
    return cut if len(text) <= limit else f"{cut}… ({len(text)} characters)"


def _call_fields(call: object, tools: Collection[str]) -> tuple[str | None, str | None]:
    """`(callId, tool)` of an offending call: its id when well formed, else `None`; its
    tool name when registered, else a bounded quote of what was given."""
    raw_id: object
    raw_tool: object
    try:
        if isinstance(call, AgentCall):
            raw_id, raw_tool = call.id, call.tool
        elif isinstance(call, Mapping):
            raw_id, raw_tool = call.get("id"), call.get("tool")
        else:
            return None, None
    except Exception:  # a key whose comparison raises
        return None, None
    call_id = None
    if type(raw_id) is str and raw_id.strip() and len(raw_id) <= CALL_ID_LIMIT:
        call_id = raw_id if bounded(raw_id, CALL_ID_LIMIT) == raw_id else None
    if type(raw_tool) is not str:
        return call_id, None
    return call_id, raw_tool if raw_tool in tools else quote(raw_tool)


def rejection_attributes(rejection: Mapping[str, Any]) -> dict[str, object]:
    """Trace attributes of a rejected decide attempt."""
    return {
        "agent.rejection.code": rejection["code"],
        "agent.rejection.issueCount": len(rejection["issues"]),
    }

"""The checkpoint document of a durable agent: its shape, its checks, and typed reads of it.

A checkpoint is one JSON document (`format`, `version`, `key`, `id`, `agent`, and
`decided`, the log of approval decisions given): one node per agent, the root's under
`agent` and a durable subagent's under the call that started it (`child`).
`parse_document` checks it before any agent callback runs; `check_identity` refuses a
node of another definition; the budget helpers sum what a node charged; `SavedCall`,
`DecisionRecord` and `ApprovalChoice` are the typed forms approvals read and write.

The change log a store keeps beside a snapshot is `_journal_changes`.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from tubeless._quote import quote
from tubeless.errors import AgentError

CHECKPOINT_FORMAT = "tubeless.agent-checkpoint"
CHECKPOINT_VERSION = 1
INVALID_CODE = "TUBELESS_AGENT_CHECKPOINT_INVALID"
MISMATCH_CODE = "TUBELESS_AGENT_CHECKPOINT_MISMATCH"
Path = tuple[str | int, ...]
"""Where a value sits in the document: dictionary keys and list indices from the top."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalChoice:
    """A decision on a waiting call, as the journal saves it on the call."""

    kind: Literal["approve", "reject", "edit"]
    """What was decided (saved as the call's `approval.decision`)."""
    input: Any = None
    """An edit's validated new input (the call's `input`; the old one becomes
    `proposedInput`)."""
    outcome: Any = None
    """A rejection's recoverable outcome (the call is saved as completed with it)."""


def invalid(problem: str) -> AgentError:
    """The error of a checkpoint that is corrupt or of another version."""
    return AgentError(
        f"Checkpoint is corrupt or of an unknown version: {problem}", code=INVALID_CODE
    )


def fresh_document(key: str) -> dict[str, Any]:
    """A new execution's document (a fresh execution id, no agent node yet)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "key": key,
        "id": uuid.uuid4().hex,
        "agent": None,
    }


def parse_document(text: str) -> dict[str, Any]:
    """The checked document in `text`.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID`.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise invalid(f"not JSON ({str(error)[:120]})") from None
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise invalid("not a tubeless agent checkpoint")
    if document.get("version") != CHECKPOINT_VERSION:
        raise invalid(f"version {quote(document.get('version'))}, expected 1")
    if type(document.get("id")) is not str or not (
        document.get("agent") is None or isinstance(document.get("agent"), dict)
    ):
        raise invalid("missing execution id or agent node")
    if document["agent"] is not None:
        _check_node(document["agent"], "agent")
    return document


_STATUSES = frozenset({"pending", "running", "completed"})


def _counter(value: object) -> bool:
    return type(value) is int and value >= 0


def _usage_ok(holder: Mapping[str, Any]) -> bool:
    """Whether the optional `usage` of a `spent` or `consumed` holder is well formed."""
    usage = holder.get("usage")
    if usage is None:
        return True
    cost = usage.get("cost") if isinstance(usage, dict) else None
    return (
        isinstance(usage, dict)
        and all(_counter(usage.get(name)) for name in ("inputTokens", "outputTokens"))
        and isinstance(cost, (int, float))
        and not isinstance(cost, bool)
        and 0 <= cost < float("inf")
    )


def _usage_of(holder: Mapping[str, Any] | None) -> tuple[int, int, Decimal]:
    """The usage in a `spent` or `consumed` holder (none recorded: zero)."""
    usage = holder.get("usage") if holder else None
    if not usage:
        return 0, 0, Decimal(0)
    return usage["inputTokens"], usage["outputTokens"], Decimal(repr(usage["cost"]))


def add_usage(holder: dict[str, Any], amounts: tuple[int, int, Decimal]) -> None:
    """Add `amounts` to the usage of a `spent` holder."""
    if not any(amounts):
        return
    now = _usage_of(holder)
    cost = now[2] + amounts[2]
    holder["usage"] = {
        "inputTokens": now[0] + amounts[0],
        "outputTokens": now[1] + amounts[1],
        "cost": int(cost) if cost == cost.to_integral_value() else float(cost),
    }


def _check_node(node: Any, where: str) -> None:
    """Check the shape of a saved node and everything below it, before any callback."""
    if not isinstance(node, dict) or not isinstance(node.get("spent"), dict):
        raise invalid(f"{where} has no budget")
    spent = node["spent"]
    counters = (spent.get("calls"), spent.get("decisions"), spent.get("repairs", 0))
    if not all(_counter(value) for value in counters):
        raise invalid(f"{where} has a malformed budget")
    if not _usage_ok(spent):
        raise invalid(f"{where} has a malformed usage")
    execution = node.get("execution")
    if execution is not None and not (
        isinstance(execution, dict)
        and all(_counter(execution.get(name)) for name in ("turn", "stateVersion", "calls"))
        and "state" in execution
        and execution["turn"] >= 1
    ):
        raise invalid(f"{where} has a malformed execution")
    if "failure" in node and not (
        isinstance(node["failure"], dict)
        and all(type(node["failure"].get(name)) is str for name in ("code", "message"))
    ):
        raise invalid(f"{where} has a malformed failure")
    turn = node.get("turn", 0)
    if turn is None:
        return
    if not (
        isinstance(turn, dict)
        and _counter(turn.get("index"))
        and turn.get("phase") in ("reserved", "decided")
        and isinstance(turn.get("calls"), list)
    ):
        raise invalid(f"{where} has a malformed turn")
    if not isinstance(turn.get("rejection", {}), dict):
        raise invalid(f"{where} has a malformed rejection")
    for position, entry in enumerate(turn["calls"]):
        _check_entry(entry, f"{where} call {position}")


def _check_entry(entry: Any, where: str) -> None:
    if not (
        isinstance(entry, dict)
        and type(entry.get("id")) is str
        and type(entry.get("tool")) is str
        and "input" in entry
        and entry.get("status") in _STATUSES
    ):
        raise invalid(f"{where} is malformed")
    outcome = entry.get("outcome")
    if entry["status"] == "completed" and not (
        isinstance(outcome, dict) and type(outcome.get("ok")) is bool
    ):
        raise invalid(f"{where} is completed without an outcome")
    if "approval" in entry and not isinstance(entry["approval"], dict):
        raise invalid(f"{where} has a malformed approval")
    consumed = entry.get("consumed")
    if consumed is not None and not (
        isinstance(consumed, dict)
        and all(_counter(consumed.get(name)) for name in ("calls", "decisions"))
        and _usage_ok(consumed)
        and _counter(consumed.get("repairs", 0))
    ):
        raise invalid(f"{where} has a malformed budget")
    if entry.get("child") is not None:
        _check_node(entry["child"], f"{where} child")


def _spent(counts: Mapping[str, Any]) -> tuple[int, int, int]:
    """`(calls, decisions, repairs)`; `repairs` is absent from checkpoints made before it."""
    return counts["calls"], counts["decisions"], counts.get("repairs", 0)


def node_totals(node: Mapping[str, Any]) -> tuple[int, int, int]:
    """Calls, decisions and repairs charged to this node's budget: its own and its subtree's."""
    calls, decisions, repairs = _spent(node["spent"])
    turn = node.get("turn")
    for entry in turn["calls"] if turn else ():
        below = entry_totals(entry)
        calls += below[0]
        decisions += below[1]
        repairs += below[2]
    return calls, decisions, repairs


def node_usage_totals(node: Mapping[str, Any]) -> tuple[int, int, Decimal]:
    """Usage charged to this node's budget: its own and its subtree's."""
    total = _usage_of(node["spent"])
    turn = node.get("turn")
    for entry in turn["calls"] if turn else ():
        below = entry_usage(entry)
        total = (total[0] + below[0], total[1] + below[1], total[2] + below[2])
    return total


def entry_usage(entry: Mapping[str, Any]) -> tuple[int, int, Decimal]:
    if entry.get("child") is not None:
        return node_usage_totals(entry["child"])
    return _usage_of(entry.get("consumed"))


def entry_totals(entry: Mapping[str, Any]) -> tuple[int, int, int]:
    if entry.get("child") is not None:
        return node_totals(entry["child"])
    consumed = entry.get("consumed")
    return _spent(consumed) if consumed else (0, 0, 0)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeIdentity:
    """What a saved node must match: definition, options, limits and tool kinds."""

    agent: str
    definition_id: str
    options: str
    limits: Mapping[str, int | float]
    tools: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "definitionId": self.definition_id,
            "options": self.options,
            "limits": dict(self.limits),
            "tools": dict(self.tools),
        }


def new_node(identity: NodeIdentity) -> dict[str, Any]:
    """A new agent node of `identity`: nothing spent, no state, no turn."""
    return {
        **identity.to_dict(),
        "spent": {"calls": 0, "decisions": 0},
        "execution": None,
        "turn": None,
    }


def check_identity(node: Mapping[str, Any], identity: NodeIdentity) -> None:
    """Refuse a saved node made by another definition, options, limits or tools.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_MISMATCH`, naming what differs.
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a node missing its fields.
    """
    if not isinstance(node.get("spent"), dict) or "turn" not in node:
        raise invalid("agent node without its budget or turn")
    for field, value in identity.to_dict().items():
        if node.get(field) != value:
            raise AgentError(
                f"Checkpoint of agent {quote(identity.agent)} has another {field}; use a "
                "new execution key",
                code=MISMATCH_CODE,
            )


# -- reading the calls and decisions of a checkpoint (for approvals) --------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SavedCall:
    """A call of an agent's current turn, as the checkpoint holds it."""

    agent: str
    """The agent path of the node the call belongs to."""
    turn: int
    """The node's current turn."""
    id: str
    """The call id the decision gave."""
    tool: str
    """The tool's name."""
    input: Any
    """The prepared input (an edit's validated input once edited)."""
    status: str
    """`pending`, `running` or `completed`."""
    needs_approval: bool
    """Whether the call was admitted waiting for a person."""
    agent_run_id: str
    """The agent run that last stopped for it (waiting calls; else empty)."""
    decision: str | None
    """The kind of the decision recorded on it (`approve`, `reject`, `edit`), if any."""
    child: Mapping[str, Any] | None
    """The node of the durable subagent the call started, if any."""

    @property
    def waiting(self) -> bool:
        """Whether the call waits for a decision (admitted, none recorded yet)."""
        return self.needs_approval and self.decision is None and self.status == "pending"

    @property
    def child_path(self) -> str:
        """The agent path of the subagent the call started."""
        return f"{self.agent}/{self.turn}/{self.id}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """A decision kept in the checkpoint's log (`decided`) of every decision given."""

    call: str
    """The call id it decided."""
    kind: str
    """`approve`, `reject` or `edit`."""
    message: Any = None
    """A rejection's message."""
    input: Any = None
    """An edit's input, as the person gave it."""
    legacy: bool = False
    """Read from the call itself (a checkpoint saved before the log existed keeps only the
    decision's kind)."""


def waiting(entry: Mapping[str, Any]) -> bool:
    """Whether a journaled call waits for a decision (admitted, none recorded yet)."""
    approval = entry.get("approval")
    return (
        isinstance(approval, dict) and "decision" not in approval and entry["status"] == "pending"
    )


def node_calls(node: Mapping[str, Any], path: str) -> list[SavedCall]:
    """The calls of `node`'s current turn (`path`: its agent path)."""
    turn: Any = node.get("turn")
    found = []
    for entry in turn["calls"] if turn else ():
        approval = entry.get("approval")
        approval = approval if isinstance(approval, dict) else None
        found.append(
            SavedCall(
                agent=path,
                turn=turn["index"],
                id=entry["id"],
                tool=entry["tool"],
                input=entry["input"],
                status=entry["status"],
                needs_approval=approval is not None,
                agent_run_id="" if approval is None else str(approval.get("agentRunId", "")),
                decision=str(approval["decision"])
                if approval is not None and "decision" in approval
                else None,
                child=entry.get("child"),
            )
        )
    return found


def tree_calls(node: Mapping[str, Any], path: str) -> list[SavedCall]:
    """The calls of `node` and of every subagent node below it, each node's before its
    subagents'."""
    own = node_calls(node, path)
    found = list(own)
    for call in own:
        if call.child is not None:
            found += tree_calls(call.child, call.child_path)
    return found


def root_of(document: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
    """The root agent node and its path, or `None` before the execution started."""
    root = document.get("agent")
    return (root, str(root.get("agent", ""))) if isinstance(root, dict) else None


def finished(node: Mapping[str, Any]) -> bool:
    """Whether an agent node saved its result or a terminal failure."""
    return "result" in node or "failure" in node


def decision_log(document: Mapping[str, Any], call_id: str) -> list[DecisionRecord]:
    """The logged decisions of calls with this id, oldest first."""
    log = document.get("decided")
    return [
        DecisionRecord(
            call=call_id,
            kind=str(record.get("kind")),
            message=record.get("message"),
            input=record.get("input"),
        )
        for record in (log if isinstance(log, list) else ())
        if isinstance(record, dict) and record.get("call") == call_id
    ]

"""The checkpoint document of a durable agent: its shape, its checks, and its typed parts.

A checkpoint is one JSON document (`format`, `version`, `key`, `id`, `agent`, and
`decided`, the log of approval decisions given): one node per agent, the root's under
`agent` and a durable subagent's under the call that started it (`child`).

Every part of the document is a frozen dataclass here, each with one checked
`from_dict(value, where)` (a damaged part raises `TUBELESS_AGENT_CHECKPOINT_INVALID`
naming where it is) and one `to_dict()` (the JSON form the journal saves):
`Checkpoint` (the document), `AgentNode` (an agent: its identity, `Spent` budget,
`SavedExecution`, `SavedTurn` and terminal `Failure` or result), `CallEntry` (a call of
a turn: its `CallApproval`, outcome, `consumed` budget and durable `child` node) and
`DecisionRecord` (an entry of the log of decisions). `parse_document` checks a whole
document before any agent callback runs; `check_identity` refuses a node of another
definition; `ApprovalChoice` is what the
journal saves on a waiting call.

The writer keeps the document as the JSON dictionaries these parts convert to and from
(`_journal_writer`; where each part sits, and the flat view of the calls approvals read,
are `_journal_access`); the change log a store keeps beside a snapshot is `_journal_changes`.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from tubeless._fields import wire, wire_dict
from tubeless._quote import quote
from tubeless.errors import AgentError

CHECKPOINT_FORMAT = "tubeless.agent-checkpoint"
CHECKPOINT_VERSION = 1
INVALID_CODE = "TUBELESS_AGENT_CHECKPOINT_INVALID"
MISMATCH_CODE = "TUBELESS_AGENT_CHECKPOINT_MISMATCH"
Path = tuple[str | int, ...]
"""Where a value sits in the document: dictionary keys and list indices from the top."""
Amounts = tuple[int, int, Decimal]
"""Input tokens, output tokens and cost."""

_ALWAYS = wire(omit="never")
_PLAIN = wire(convert=lambda value: value)
"""A JSON scalar or caller data, written as it is (no conversion to look up)."""
_AS_IS_NONE = wire(omit="none", convert=lambda value: value)
_UNWRITTEN = wire(written=False)
_NOTHING: Amounts = (0, 0, Decimal(0))


def invalid(problem: str) -> AgentError:
    """The error of a checkpoint that is corrupt or of another version."""
    return AgentError(
        f"Checkpoint is corrupt or of an unknown version: {problem}", code=INVALID_CODE
    )


def _counter(value: object) -> bool:
    return type(value) is int and value >= 0


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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Model usage charged to a budget (`usage` of a `spent` or `consumed` holder)."""

    input_tokens: int = dataclasses.field(metadata=_PLAIN)
    output_tokens: int = dataclasses.field(metadata=_PLAIN)
    cost: int | float = dataclasses.field(metadata=_PLAIN)
    """Saved as an integer when whole."""

    @classmethod
    def from_dict(cls, value: Any, problem: str) -> Usage:
        """The checked usage in `value` (`problem`: the error's text when malformed)."""
        cost = value.get("cost") if isinstance(value, dict) else None
        if not (
            isinstance(value, dict)
            and all(_counter(value.get(name)) for name in ("inputTokens", "outputTokens"))
            and isinstance(cost, (int, float))
            and not isinstance(cost, bool)
            and 0 <= cost < float("inf")
        ):
            raise invalid(problem)
        return cls(
            input_tokens=value["inputTokens"], output_tokens=value["outputTokens"], cost=cost
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)

    @property
    def amounts(self) -> Amounts:
        return self.input_tokens, self.output_tokens, Decimal(repr(self.cost))


def _usage_of(amounts: Amounts) -> Usage:
    """The usage of `amounts`, its cost an integer when whole."""
    cost = amounts[2]
    return Usage(
        input_tokens=amounts[0],
        output_tokens=amounts[1],
        cost=int(cost) if cost == cost.to_integral_value() else float(cost),
    )


def _plus(left: Amounts, right: Amounts) -> Amounts:
    return left[0] + right[0], left[1] + right[1], left[2] + right[2]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """What a budget holder charged: a node's own `spent`, or a call's `consumed` (what a
    non-durable subagent spent)."""

    calls: int = dataclasses.field(metadata=_PLAIN)
    decisions: int = dataclasses.field(metadata=_PLAIN)
    repairs: int = dataclasses.field(
        default=0, metadata=wire(omit="falsy", convert=lambda value: value)
    )
    """Absent from checkpoints made before repairs (and while none was made)."""
    usage: Usage | None = None
    """Absent in older checkpoints and while nothing was charged."""

    @classmethod
    def from_dict(cls, value: Any, where: str, *, usage_problem: str = "usage") -> Spent:
        """The checked holder in `value`; a consumed holder calls bad usage a bad budget."""
        if not isinstance(value, dict):
            raise invalid(f"{where} has no budget")
        counters = (value.get("calls"), value.get("decisions"), value.get("repairs", 0))
        if not all(_counter(counter) for counter in counters):
            raise invalid(f"{where} has a malformed budget")
        usage = value.get("usage")
        return cls(
            calls=value["calls"],
            decisions=value["decisions"],
            repairs=value.get("repairs", 0),
            usage=None
            if usage is None
            else Usage.from_dict(usage, f"{where} has a malformed {usage_problem}"),
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)

    @property
    def counts(self) -> tuple[int, int, int]:
        """`(calls, decisions, repairs)`."""
        return self.calls, self.decisions, self.repairs

    @property
    def amounts(self) -> Amounts:
        return self.usage.amounts if self.usage is not None else _NOTHING

    def plus(self, counts: tuple[int, int, int] = (0, 0, 0), amounts: Amounts = _NOTHING) -> Spent:
        """This holder with `counts` and `amounts` added (negative amounts: a refund)."""
        usage = _usage_of(_plus(self.amounts, amounts)) if any(amounts) else self.usage
        return Spent(
            calls=self.calls + counts[0],
            decisions=self.decisions + counts[1],
            repairs=self.repairs + counts[2],
            usage=usage,
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A node's saved terminal failure."""

    code: str = dataclasses.field(metadata=_PLAIN)
    message: str = dataclasses.field(metadata=_PLAIN)

    @classmethod
    def from_dict(cls, value: Any, where: str) -> Failure:
        if not (
            isinstance(value, dict)
            and all(type(value.get(name)) is str for name in ("code", "message"))
        ):
            raise invalid(f"{where} has a malformed failure")
        return cls(code=value["code"], message=value["message"])

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SavedExecution:
    """A node's last committed state: `{state, turn, stateVersion, calls}`."""

    state: Any = dataclasses.field(metadata=_PLAIN)
    """The reduced state, as saved (not copied)."""
    turn: int = dataclasses.field(metadata=_PLAIN)
    state_version: int = dataclasses.field(metadata=_PLAIN)
    calls: int = dataclasses.field(metadata=_PLAIN)

    @classmethod
    def from_dict(cls, value: Any, where: str) -> SavedExecution:
        if not (
            isinstance(value, dict)
            and all(_counter(value.get(name)) for name in ("turn", "stateVersion", "calls"))
            and "state" in value
            and value["turn"] >= 1
        ):
            raise invalid(f"{where} has a malformed execution")
        return cls(
            state=value["state"],
            turn=value["turn"],
            state_version=value["stateVersion"],
            calls=value["calls"],
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CallApproval:
    """The `approval` of a call that needed one: who stopped for it, and what was decided."""

    agent_run_id: str | None = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """The agent run that last stopped for the call."""
    decision: str | None = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """`approve`, `reject` or `edit` once decided."""

    @classmethod
    def from_dict(cls, value: Any, where: str) -> CallApproval:
        if not isinstance(value, dict):
            raise invalid(f"{where} has a malformed approval")
        run_id, decision = value.get("agentRunId"), value.get("decision")
        return cls(
            agent_run_id=None if run_id is None else str(run_id),
            decision=None if decision is None else str(decision),
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)


_STATUSES = frozenset({"pending", "running", "completed"})
CallStatus = Literal["pending", "running", "completed"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CallEntry:
    """A call of a node's current turn, as the journal saves it."""

    id: str = dataclasses.field(metadata=_PLAIN)
    """The call id the decision gave."""
    tool: str = dataclasses.field(metadata=_PLAIN)
    input: Any = dataclasses.field(metadata=_PLAIN)
    """The prepared input (an edit's validated input once edited)."""
    status: CallStatus = dataclasses.field(metadata=_PLAIN)
    """`pending`, `running` (its intent saved) or `completed` (its outcome saved)."""
    approval: CallApproval | None = None
    """Present on a call admitted to wait for a person."""
    outcome: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """A completed call's outcome (`{id, tool, ok, value | error}`)."""
    proposed_input: Any = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """An edited call's input before the edit."""
    consumed: Spent | None = None
    """What a non-durable subagent the call ran spent."""
    child: AgentNode | None = None
    """The node of the durable subagent the call started."""

    @classmethod
    def from_dict(cls, value: Any, where: str) -> CallEntry:
        if not (
            isinstance(value, dict)
            and type(value.get("id")) is str
            and type(value.get("tool")) is str
            and "input" in value
            and value.get("status") in _STATUSES
        ):
            raise invalid(f"{where} is malformed")
        outcome = value.get("outcome")
        if value["status"] == "completed" and not (
            isinstance(outcome, dict) and type(outcome.get("ok")) is bool
        ):
            raise invalid(f"{where} is completed without an outcome")
        approval = value.get("approval")
        consumed = value.get("consumed")
        child = value.get("child")
        return cls(
            id=value["id"],
            tool=value["tool"],
            input=value["input"],
            status=value["status"],
            approval=None if approval is None else CallApproval.from_dict(approval, where),
            outcome=outcome,
            proposed_input=value.get("proposedInput"),
            consumed=None
            if consumed is None
            else Spent.from_dict(consumed, where, usage_problem="budget"),
            child=None if child is None else AgentNode.from_dict(child, f"{where} child"),
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)

    @property
    def waiting(self) -> bool:
        """Whether the call waits for a decision (admitted, none recorded yet)."""
        return (
            self.approval is not None
            and self.approval.decision is None
            and self.status == "pending"
        )

    @property
    def totals(self) -> tuple[int, int, int]:
        """Calls, decisions and repairs charged below the call (its subagent's)."""
        if self.child is not None:
            return self.child.totals
        return self.consumed.counts if self.consumed is not None else (0, 0, 0)

    @property
    def usage_totals(self) -> Amounts:
        """Usage charged below the call (its subagent's)."""
        if self.child is not None:
            return self.child.usage_totals
        return self.consumed.amounts if self.consumed is not None else _NOTHING


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SavedTurn:
    """A node's current turn: reserved (its decision charged), then decided (its calls)."""

    index: int = dataclasses.field(metadata=_PLAIN)
    phase: Literal["reserved", "decided"] = dataclasses.field(metadata=_PLAIN)
    calls: tuple[CallEntry, ...] = dataclasses.field(default=(), metadata=_ALWAYS)
    rejection: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """The last rejected decision of the turn, sent to the next `decide`."""

    @classmethod
    def from_dict(cls, value: Any, where: str) -> SavedTurn:
        if not (
            isinstance(value, dict)
            and _counter(value.get("index"))
            and value.get("phase") in ("reserved", "decided")
            and isinstance(value.get("calls"), list)
        ):
            raise invalid(f"{where} has a malformed turn")
        rejection = value.get("rejection")
        if not isinstance(value.get("rejection", {}), dict):
            raise invalid(f"{where} has a malformed rejection")
        return cls(
            index=value["index"],
            phase=value["phase"],
            calls=tuple(
                CallEntry.from_dict(entry, f"{where} call {position}")
                for position, entry in enumerate(value["calls"])
            ),
            rejection=rejection,
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)


_IDENTITY_KEYS = ("agent", "definitionId", "options", "limits", "tools")
_NOT_FINISHED = object()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AgentNode:
    """One agent's node: what it is, what it spent, its state, turn and end."""

    identity: Mapping[str, Any]
    """`agent`, `definitionId`, `options`, `limits` and `tools` as saved (see
    `check_identity`)."""
    spent: Spent
    """The node's own charges (its subagents' are under their calls)."""
    execution: SavedExecution | None = None
    turn: SavedTurn | None = None
    failure: Failure | None = None
    result: Any = _NOT_FINISHED
    """The validated finish result, once saved."""

    @classmethod
    def new(cls, identity: NodeIdentity) -> AgentNode:
        """A new agent node of `identity`: nothing spent, no state, no turn."""
        return cls(identity=identity.to_dict(), spent=Spent(calls=0, decisions=0))

    @classmethod
    def from_dict(cls, value: Any, where: str) -> AgentNode:
        """The checked node in `value` and everything below it, before any callback."""
        if not isinstance(value, dict) or not isinstance(value.get("spent"), dict):
            raise invalid(f"{where} has no budget")
        spent = Spent.from_dict(value["spent"], where)
        execution = value.get("execution")
        failure = value.get("failure", None) if "failure" in value else None
        if "failure" in value and failure is None:
            raise invalid(f"{where} has a malformed failure")
        turn = value.get("turn", 0)
        return cls(
            identity={name: value[name] for name in _IDENTITY_KEYS if name in value},
            spent=spent,
            execution=None if execution is None else SavedExecution.from_dict(execution, where),
            failure=None if failure is None else Failure.from_dict(failure, where),
            turn=None if turn is None else SavedTurn.from_dict(turn, where),
            result=value.get("result", _NOT_FINISHED),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.identity,
            "spent": self.spent.to_dict(),
            "execution": None if self.execution is None else self.execution.to_dict(),
            "turn": None if self.turn is None else self.turn.to_dict(),
        }
        if self.failure is not None:
            out["failure"] = self.failure.to_dict()
        if self.finished_with_result:
            out["result"] = self.result
        return out

    @property
    def finished_with_result(self) -> bool:
        return self.result is not _NOT_FINISHED

    @property
    def finished(self) -> bool:
        """Whether the node saved its result or a terminal failure."""
        return self.finished_with_result or self.failure is not None

    @property
    def calls(self) -> tuple[CallEntry, ...]:
        """The calls of the current turn (none between turns)."""
        return self.turn.calls if self.turn is not None else ()

    @property
    def totals(self) -> tuple[int, int, int]:
        """Calls, decisions and repairs charged to this node's budget: its own and its
        subtree's."""
        calls, decisions, repairs = self.spent.counts
        for entry in self.calls:
            below = entry.totals
            calls += below[0]
            decisions += below[1]
            repairs += below[2]
        return calls, decisions, repairs

    @property
    def usage_totals(self) -> Amounts:
        """Usage charged to this node's budget: its own and its subtree's."""
        total = self.spent.amounts
        for entry in self.calls:
            total = _plus(total, entry.usage_totals)
        return total

    @property
    def path(self) -> str:
        """The agent path of a root node (its agent id)."""
        return str(self.identity.get("agent", ""))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """A decision kept in the checkpoint's log (`decided`) of every decision given."""

    agent: str | None = None
    """The agent path of the call's node (absent: read from the call itself)."""
    turn: int | None = None
    """The turn it was given in."""
    call: str
    """The call id it decided."""
    kind: str
    """`approve`, `reject` or `edit`."""
    message: Any = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """A rejection's message."""
    input: Any = dataclasses.field(default=None, metadata=_AS_IS_NONE)
    """An edit's input, as the person gave it."""
    legacy: bool = dataclasses.field(default=False, metadata=_UNWRITTEN)
    """Read from the call itself (a checkpoint saved before the log existed keeps only the
    decision's kind)."""

    @classmethod
    def from_dict(cls, value: Any) -> DecisionRecord | None:
        """The record in `value` (`None` for an entry that is not a record: skipped)."""
        if not isinstance(value, dict):
            return None
        agent, turn = value.get("agent"), value.get("turn")
        return cls(
            agent=None if agent is None else str(agent),
            turn=turn if type(turn) is int else None,
            call=str(value.get("call")),
            kind=str(value.get("kind")),
            message=value.get("message"),
            input=value.get("input"),
        )

    def to_dict(self) -> dict[str, Any]:
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A whole checkpoint document."""

    key: Any = None
    id: str
    """The execution id, saved when the execution started."""
    agent: AgentNode | None = None
    """The root agent's node (`None` before the execution started)."""
    decided: tuple[DecisionRecord, ...] = ()
    """The log of approval decisions given."""

    @classmethod
    def fresh(cls, key: str) -> Checkpoint:
        """A new execution's document (a fresh execution id, no agent node yet)."""
        return cls(key=key, id=uuid.uuid4().hex)

    @classmethod
    def from_dict(cls, value: Any) -> Checkpoint:
        """The checked document in `value`.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID`.
        """
        if not isinstance(value, dict) or value.get("format") != CHECKPOINT_FORMAT:
            raise invalid("not a tubeless agent checkpoint")
        if value.get("version") != CHECKPOINT_VERSION:
            raise invalid(f"version {quote(value.get('version'))}, expected 1")
        agent = value.get("agent")
        if type(value.get("id")) is not str or not (agent is None or isinstance(agent, dict)):
            raise invalid("missing execution id or agent node")
        log = value.get("decided")
        records = (
            DecisionRecord.from_dict(item) for item in (log if isinstance(log, list) else ())
        )
        return cls(
            key=value.get("key"),
            id=value["id"],
            agent=None if agent is None else AgentNode.from_dict(agent, "agent"),
            decided=tuple(record for record in records if record is not None),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "key": self.key,
            "id": self.id,
            "agent": None if self.agent is None else self.agent.to_dict(),
        }
        if self.decided:
            out["decided"] = [record.to_dict() for record in self.decided]
        return out

    def decisions_of(self, call_id: str) -> list[DecisionRecord]:
        """The logged decisions of calls with this id, oldest first."""
        return [record for record in self.decided if record.call == call_id]

    @property
    def finished(self) -> bool:
        """Whether the root agent saved its result or a terminal failure."""
        return self.agent is not None and self.agent.finished


def fresh_document(key: str) -> dict[str, Any]:
    """A new execution's document (a fresh execution id, no agent node yet)."""
    return Checkpoint.fresh(key).to_dict()


def parse_document(text: str) -> dict[str, Any]:
    """The checked document in `text` (checked by `Checkpoint.from_dict`).

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID`.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise invalid(f"not JSON ({str(error)[:120]})") from None
    Checkpoint.from_dict(document)
    assert isinstance(document, dict)
    return document


def read_checkpoint(text: str) -> Checkpoint:
    """The typed, checked document in `text`.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID`.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise invalid(f"not JSON ({str(error)[:120]})") from None
    return Checkpoint.from_dict(document)


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


def check_identity(node: AgentNode, identity: NodeIdentity) -> None:
    """Refuse a saved node made by another definition, options, limits or tools.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_MISMATCH`, naming what differs.
    """
    for field, value in identity.to_dict().items():
        if node.identity.get(field) != value:
            raise AgentError(
                f"Checkpoint of agent {quote(identity.agent)} has another {field}; use a "
                "new execution key",
                code=MISMATCH_CODE,
            )


def execution_id_of(document: Mapping[str, Any]) -> str:
    """The execution id of a checked document."""
    return str(document["id"])

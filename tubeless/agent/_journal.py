"""The durable journal of an agent: the receipts a crash-safe resume reads back.

A durable root invocation leases its execution key and keeps one JSON document, the
checkpoint (its shape and change log: `_journal_document`; its group-committed writes,
appends and snapshots: `_journal_writer`). This module makes the changes an agent's
invocation saves, each logged as it is made. The document holds one node
per agent: the root's, and below each call of a durable subagent, the subagent's own (a
durable child joins its parent's journal). A node records, each write acknowledged
before the agent goes on:

1. the decision reservation (the decision is charged; `decide` may run), and each repair
   of the turn (a rejected decision sent back: the repair and the next decision charged,
   the rejection kept for the next `decide`);
2. the validated decision with its prepared arguments and the batch admission, or the
   validated finish result;
3. each call's intent (`running`) right before it starts, then its outcome;
4. the reduced state (written with the next reservation, before any later work), or a
   terminal failure (never a cancellation: a cancelled execution stays resumable).

Model usage a `decide` reserves is saved before the reservation returns (so a process
killed during the request keeps it charged); settlements and reports go with the next
write. A node's `spent.usage` (absent in older checkpoints: nothing spent) holds its own.

On resume a completed call's outcome is reused, a pending one dispatched, a running one
re-run when its tool is `replay="safe"` (or is a durable subagent, which resumes its own
node) and otherwise turned into the recoverable outcome `TUBELESS_AGENT_CALL_INTERRUPTED`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tubeless._frozen import FrozenDict, freeze_json, thaw
from tubeless._quote import quote
from tubeless.agent._approvals import APPROVAL_CODES, Approval, decision_record, node_pending
from tubeless.agent._durability import KEY_CODE
from tubeless.agent._journal_changes import dumps, state_changes
from tubeless.agent._journal_document import (
    INVALID_CODE,
    MISMATCH_CODE,
    ApprovalChoice,
    NodeIdentity,
    Path,
    add_usage,
    check_identity,
    entry_totals,
    entry_usage,
    new_node,
    node_totals,
    node_usage_totals,
)
from tubeless.agent._journal_writer import Journal
from tubeless.agent._store_errors import READ_FAILED_CODE, WRITE_FAILED_CODE
from tubeless.errors import (
    AgentError,
    PendingApproval,
    PipelineExecutionError,
    TubelessError,
)

INTERRUPTED_CODE = "TUBELESS_AGENT_CALL_INTERRUPTED"
INTERRUPTED_MESSAGE = "The call may have partially run; inspect its effects before retrying"
_UNSAVED_CODES = (
    frozenset({WRITE_FAILED_CODE, READ_FAILED_CODE, MISMATCH_CODE, INVALID_CODE, KEY_CODE})
    | APPROVAL_CODES
)
"""Failures that are never saved as terminal: they belong to storage, or wait for a person
(a call waiting for approval, or a decision that did not fit: the execution stays
resumable)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ExecutionIds:
    """Ids of a tool call that stay the same when a durable execution resumes.

    Use them for business idempotency keys (trace run ids change with every attempt).
    """

    id: str
    """The execution: saved in the checkpoint when it starts (a fresh id when not durable)."""
    agent: str
    """The agent within the execution: the root agent's id, then `/<turn>/<call>` per level."""
    turn: int
    """The 1-based turn of the call."""
    call: str
    """The call id the decision gave."""


def _plain_json(value: Any, label: str) -> Any:
    """A private JSON copy of `value` for the document; refuse what JSON cannot hold."""
    try:
        return json.loads(dumps(value))
    except (TypeError, ValueError, RecursionError) as error:
        raise AgentError(
            f"{label} is not JSON data, which a durable agent must save: {str(error)[:200]}",
            code="TUBELESS_AGENT_INVALID_STATE",
        ) from None


class CallSlot:
    """Where a subagent call's child joins the journal (or reports what it spent)."""

    __slots__ = ("budget", "index", "owner")

    def __init__(self, owner: AgentJournal, index: int) -> None:
        self.owner = owner
        self.index = index
        self.budget: Any = None
        """A non-durable child's budget, set by the child (for `consumed`)."""

    def child(self, identity: NodeIdentity) -> AgentJournal:
        """The child's node below this call, created on first use."""
        owner = self.owner
        entry = owner.entries[self.index]
        path = (*owner.path, "turn", "calls", self.index, "child")
        if entry.get("child") is None:
            owner.journal.change(
                lambda: owner.put_call(self.index, "child", new_node(identity)), durable=False
            )
        node = entry["child"]
        check_identity(node, identity)
        turn = owner.node["turn"]["index"]
        agent_path = f"{owner.agent_path}/{turn}/{entry['id']}"
        return AgentJournal(owner.journal, node, agent_path, path)


class AgentJournal:
    """One agent's node in a journal, and the writes an invocation makes to it."""

    __slots__ = ("agent_path", "journal", "launched", "node", "path")

    def __init__(
        self, journal: Journal, node: dict[str, Any], agent_path: str, path: Path = ("agent",)
    ) -> None:
        self.journal = journal
        self.node = node
        self.agent_path = agent_path
        self.path = path
        """Where the node sits in the document."""
        self.launched = 0
        """How many leading calls of the current batch this process saved as running."""

    def put(self, name: str, value: Any) -> None:
        """Set the node's field `name` and log it (inside `Journal.change`)."""
        self.node[name] = value
        self.journal.record((*self.path, name), value)

    def put_call(self, index: int, name: str, value: Any) -> None:
        """Set field `name` of call `index` of the turn and log it (inside `change`)."""
        self.entries[index][name] = value
        self.journal.record((*self.path, "turn", "calls", index, name), value)

    def _log_spent(self) -> None:
        self.journal.record((*self.path, "spent"), self.node["spent"])

    @classmethod
    def root(cls, journal: Journal, identity: NodeIdentity) -> AgentJournal:
        """The root node of `journal`, created for a new execution."""
        document = journal.document
        if document["agent"] is None:
            # not logged: nothing is saved yet, and a run's first write saves it whole
            document["agent"] = new_node(identity)
        check_identity(document["agent"], identity)
        return cls(journal, document["agent"], identity.agent)

    @property
    def execution_id(self) -> str:
        return str(self.journal.document["id"])

    @property
    def entries(self) -> list[dict[str, Any]]:
        turn = self.node["turn"]
        return turn["calls"] if turn else []

    def totals(self) -> tuple[int, int, int]:
        """Calls, decisions and repairs already charged to this agent's budget."""
        return node_totals(self.node)

    def usage_totals(self) -> tuple[int, int, Decimal]:
        """Input tokens, output tokens and cost already charged to this agent's budget."""
        return node_usage_totals(self.node)

    def add_usage(self, amounts: tuple[int, int, Decimal], *, durable: bool) -> None:
        """Add usage `decide` charged (negative: a refund); `durable` saves it first."""

        def mutate() -> None:
            add_usage(self.node["spent"], amounts)
            self._log_spent()

        self.journal.change(mutate, durable=durable)

    def saved_result(self) -> tuple[bool, Any]:
        """`(True, result)` when the execution finished."""
        if "result" in self.node:
            return True, thaw(self.node["result"])
        return False, None

    def saved_failure(self) -> AgentError | None:
        """The saved terminal failure, raised again instead of re-running anything."""
        failure = self.node.get("failure")
        if failure is None:
            return None
        return AgentError(
            f"{failure['message']} (saved terminal failure of this execution)",
            code=str(failure["code"]),
        )

    def saved_execution(self) -> Mapping[str, Any] | None:
        """`{state, turn, stateVersion, calls}` of the last committed state, if any."""
        execution: Mapping[str, Any] | None = self.node["execution"]
        return execution

    def saved_turn(self, index: int) -> Mapping[str, Any] | None:
        """The journal of turn `index` when it was reserved before."""
        turn: Mapping[str, Any] | None = self.node["turn"]
        if turn is not None and turn["index"] == index:
            return turn
        return None

    def _commit_execution(self, execution: Mapping[str, Any]) -> None:
        self.launched = 0
        node = self.node
        turn = node["turn"]
        if turn is not None:
            for entry in turn["calls"]:
                calls, decisions, repairs = entry_totals(entry)
                node["spent"]["calls"] += calls
                node["spent"]["decisions"] += decisions
                add_usage(node["spent"], entry_usage(entry))
                if repairs:
                    node["spent"]["repairs"] = node["spent"].get("repairs", 0) + repairs
            self.put("turn", None)
            self._log_spent()
        previous, node["execution"] = node["execution"], dict(execution)
        changes: list[str] = []
        state_changes((*self.path, "execution"), previous, node["execution"], changes)
        self.journal.record_changes(changes)

    def reserve(self, index: int, execution: Mapping[str, Any]) -> None:
        """Save the state and the reservation of turn `index` (its decision charged)."""

        def mutate() -> None:
            self._commit_execution(execution)
            self.node["spent"]["decisions"] += 1
            self._log_spent()
            self.put("turn", {"index": index, "phase": "reserved", "calls": []})

        self.journal.change(mutate)

    def repaired(self, rejection: Mapping[str, Any]) -> None:
        """Save a repair of the reserved turn: the repair and the next decision charged,
        and the rejection the next `decide` sees (a resume sends it again, charging
        nothing)."""
        saved = _plain_json(rejection, "Agent decision rejection")

        def mutate() -> None:
            spent = self.node["spent"]
            spent["decisions"] += 1
            spent["repairs"] = spent.get("repairs", 0) + 1
            self._log_spent()
            self.node["turn"]["rejection"] = saved
            self.journal.record((*self.path, "turn", "rejection"), saved)

        self.journal.change(mutate)

    def commit_state(self, execution: Mapping[str, Any]) -> None:
        """Record the reduced state; it is saved with the next write, before later work."""
        self.journal.change(lambda: self._commit_execution(execution), durable=False)

    def decided(
        self, calls: list[dict[str, Any]], starting: int, waiting: Mapping[int, str] | None = None
    ) -> None:
        """Save the validated batch with its prepared inputs and its admission.

        The first `starting` calls start at once when the write returns, so their intents
        (`running`) share this write: each is durable before its call starts. The calls
        in `waiting` (index -> the agent's run id) wait for approval (`starting` is then 0).
        """
        waiting = waiting or {}
        entries = [
            {
                **call,
                "input": _plain_json(call["input"], f"Agent call {quote(call['id'])} input"),
                "status": "running" if index < starting else "pending",
                **({"approval": {"agentRunId": waiting[index]}} if index in waiting else {}),
            }
            for index, call in enumerate(calls)
        ]

        def mutate() -> None:
            turn = self.node["turn"]
            turn["phase"] = "decided"
            turn["calls"] = entries
            self.journal.record((*self.path, "turn"), turn)
            self.node["spent"]["calls"] += len(calls)
            self._log_spent()

        self.journal.change(mutate)
        self.launched = starting

    def pending_approvals(self) -> list[PendingApproval]:
        """The calls of this node that wait for approval (`PendingApproval`s)."""
        return node_pending(self.node, self.agent_path)

    def still_waiting(self, run_id: str) -> None:
        """Waiting calls stopped this attempt too: note its run id (saved with a flush)."""

        def mutate() -> None:
            for index, entry in enumerate(self.entries):
                if isinstance(entry.get("approval"), dict) and entry["status"] == "pending":
                    self.put_call(index, "approval", {**entry["approval"], "agentRunId": run_id})

        self.journal.change(mutate, durable=False)

    def decide_approvals(
        self, choices: Mapping[int, ApprovalChoice], given: Mapping[int, Approval]
    ) -> None:
        """Save the decisions on waiting calls, in one write before anything starts.

        `choices` maps a call index to what to save on it; `given` to the decision as the
        person gave it, kept in the checkpoint's log so that giving it again later is
        recognised (and ignored).
        """
        turn = self.node["turn"]["index"]
        records = [
            {
                "agent": self.agent_path,
                "turn": turn,
                "call": self.entries[index]["id"],
                **_plain_json(decision_record(approval), "Approval decision"),
            }
            for index, approval in given.items()
        ]
        saved = {
            index: dataclasses.replace(
                choice,
                input=None
                if choice.input is None
                else _plain_json(
                    choice.input, f"Agent call {quote(self.entries[index]['id'])} input"
                ),
                outcome=None
                if choice.outcome is None
                else _plain_json(choice.outcome, "Agent call outcome"),
            )
            for index, choice in choices.items()
        }

        def mutate() -> None:
            for index, choice in saved.items():
                entry = self.entries[index]
                self.put_call(index, "approval", {**entry["approval"], "decision": choice.kind})
                if choice.input is not None:
                    self.put_call(index, "proposedInput", entry["input"])
                    self.put_call(index, "input", choice.input)
                if choice.outcome is not None:
                    self.put_call(index, "status", "completed")
                    self.put_call(index, "outcome", choice.outcome)
            self.journal.document.setdefault("decided", []).extend(records)
            self.journal.record_add(("decided",), records)

        self.journal.change(mutate)

    def stale(self, index: int) -> bool:
        """Whether call `index` was running when an earlier process stopped."""
        return self.entries[index]["status"] == "running" and index >= self.launched

    def never_started(self, indices: list[int]) -> None:
        """Calls the decision saved as running that never started: pending again (saved
        with the next write, e.g. the flush of a cancelled execution)."""

        def mutate() -> None:
            for index in indices:
                if index < self.launched and self.entries[index]["status"] == "running":
                    self.put_call(index, "status", "pending")

        if indices:
            self.journal.change(mutate, durable=False)

    def launch(self, index: int) -> None:
        """Save call `index`'s intent before it starts (unless the decision saved it)."""
        if index >= self.launched:
            self.start(index)

    def finished(self, result: Any) -> None:
        """Save the validated finish result."""
        saved = _plain_json(result, "Agent finish result")
        self.journal.change(lambda: self.put("result", saved))

    def start(self, index: int) -> None:
        """Save call `index`'s intent."""
        self.journal.change(lambda: self.put_call(index, "status", "running"))

    def complete(self, index: int, outcome: Mapping[str, Any], slot: CallSlot | None) -> None:
        """Save call `index`'s outcome (and what a non-durable subagent spent)."""
        saved = _plain_json(outcome, f"Agent call {quote(outcome['id'])} outcome")
        entry = self.entries[index]

        def mutate() -> None:
            self.put_call(index, "status", "completed")
            self.put_call(index, "outcome", saved)
            budget = slot.budget if slot is not None else None
            if budget is not None and entry.get("child") is None:
                consumed: dict[str, Any] = {"calls": budget.calls, "decisions": budget.decisions}
                if budget.repairs:
                    consumed["repairs"] = budget.repairs
                add_usage(consumed, (budget.input_tokens, budget.output_tokens, budget.cost))
                self.put_call(index, "consumed", consumed)

        self.journal.change(mutate)

    def fail(self, error: BaseException) -> None:
        """Save a terminal failure (not for storage errors: those cannot be saved)."""
        root = root_cause(error)
        code = getattr(root, "code", None) if isinstance(root, TubelessError) else None
        if _unsaved(error) or self.journal.failed:
            return
        failure = {
            "code": code if isinstance(code, str) else "TUBELESS_STEP_FAILED",
            "message": str(error)[:4096],
        }
        self.journal.change(lambda: self.put("failure", failure))


def _unsaved(error: BaseException) -> bool:
    """Whether a link of the cause chain belongs to storage or waits for a person."""
    link: BaseException | None = error
    for _ in range(32):
        if link is None:
            return False
        if isinstance(link, TubelessError) and link.code in _UNSAVED_CODES:
            return True
        below = link.result.first_exception() if isinstance(link, PipelineExecutionError) else None
        link = link.__cause__ if link.__cause__ is not None else below
    return False


def root_cause(error: BaseException) -> BaseException:
    """The exception behind child-run and cause wrappers (a limit, a `decide` error, ...)."""
    for _ in range(32):
        below = (
            error.result.first_exception()
            if isinstance(error, PipelineExecutionError)
            else error.__cause__
        )
        if below is None:
            break
        error = below
    return error


def saved_outcome(entry: Mapping[str, Any]) -> FrozenDict:
    """A completed call's outcome, frozen again as the reducer first saw it."""
    outcome: FrozenDict = freeze_json(entry["outcome"])
    return outcome


def interrupted_outcome(entry: Mapping[str, Any]) -> FrozenDict:
    """The recoverable outcome of an unsafe call that was running when the process died."""
    return FrozenDict(
        id=entry["id"],
        tool=entry["tool"],
        ok=False,
        error=FrozenDict(code=INTERRUPTED_CODE, message=INTERRUPTED_MESSAGE),
    )

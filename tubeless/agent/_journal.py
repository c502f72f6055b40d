"""The durable journal of an agent: the receipts a crash-safe resume reads back.

A durable root invocation leases its execution key and keeps one JSON document, the
checkpoint (its typed parts: `_journal_document`; its change log: `_journal_changes`; its
group-committed writes, appends and snapshots: `_journal_writer`). This module makes the
changes an agent's invocation saves, each a typed part saved at its path and logged as it
is made. The document holds one node
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
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Protocol

from tubeless._frozen import FrozenDict, freeze_json, slot_init, thaw
from tubeless._quote import quote
from tubeless.agent._approvals import APPROVAL_CODES, Approval, node_pending
from tubeless.agent._durability import KEY_CODE
from tubeless.agent._journal_access import (
    add_at,
    node_dict,
    read_entry,
    read_execution,
    read_node,
    read_spent,
    read_turn,
    set_at,
)
from tubeless.agent._journal_changes import dumps, state_changes
from tubeless.agent._journal_document import (
    INVALID_CODE,
    MISMATCH_CODE,
    AgentNode,
    ApprovalChoice,
    CallApproval,
    CallEntry,
    DecisionRecord,
    Failure,
    NodeIdentity,
    Path,
    SavedExecution,
    SavedTurn,
    Spent,
    check_identity,
    execution_id_of,
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


@slot_init
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


class _Call(Protocol):
    """A prepared call of a decided batch (`PreparedCall`)."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def input(self) -> Any: ...


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
        entry = owner.entry(self.index)
        node = entry.child
        if node is None:
            node = AgentNode.new(identity)
            saved = node.to_dict()
            owner.journal.change(lambda: owner.put_call(self.index, "child", saved), durable=False)
        check_identity(node, identity)
        turn = owner.turn()
        assert turn is not None
        path = (*owner.path, "turn", "calls", self.index, "child")
        return AgentJournal(owner.journal, f"{owner.agent_path}/{turn.index}/{entry.id}", path)


class AgentJournal:
    """One agent's node in a journal (at `path` of its document), and the writes an
    invocation makes to it: each change is a typed part of the document (see
    `_journal_document`), saved as its `to_dict()` and logged."""

    __slots__ = ("agent_path", "journal", "launched", "path")

    def __init__(self, journal: Journal, agent_path: str, path: Path = ("agent",)) -> None:
        self.journal = journal
        self.agent_path = agent_path
        self.path = path
        """Where the node sits in the document."""
        self.launched = 0
        """How many leading calls of the current batch this process saved as running."""

    def _set(self, path: Path, value: Any) -> None:
        set_at(self.journal.document, path, value)
        self.journal.record(path, value)

    def put(self, name: str, value: Any) -> None:
        """Set the node's field `name` and log it (inside `Journal.change`)."""
        self._set((*self.path, name), value)

    def put_call(self, index: int, name: str, value: Any) -> None:
        """Set field `name` of call `index` of the turn and log it (inside `change`)."""
        self._set((*self.path, "turn", "calls", index, name), value)

    def _put_spent(self, spent: Spent) -> None:
        self.put("spent", spent.to_dict())

    @classmethod
    def root(cls, journal: Journal, identity: NodeIdentity) -> AgentJournal:
        """The root node of `journal`, created for a new execution."""
        document = journal.document
        if node_dict(document, ("agent",)) is None:
            # not logged: nothing is saved yet, and a run's first write saves it whole
            set_at(document, ("agent",), AgentNode.new(identity).to_dict())
        check_identity(read_node(document, ("agent",)), identity)
        return cls(journal, identity.agent)

    @property
    def execution_id(self) -> str:
        return execution_id_of(self.journal.document)

    def node(self) -> AgentNode:
        """The node as saved so far, typed."""
        return read_node(self.journal.document, self.path)

    def turn(self) -> SavedTurn | None:
        """The node's current turn, typed."""
        return read_turn(self.journal.document, self.path)

    def entry(self, index: int) -> CallEntry:
        """Call `index` of the current turn, typed."""
        return read_entry(self.journal.document, self.path, index)

    def totals(self) -> tuple[int, int, int]:
        """Calls, decisions and repairs already charged to this agent's budget."""
        return self.node().totals

    def usage_totals(self) -> tuple[int, int, Decimal]:
        """Input tokens, output tokens and cost already charged to this agent's budget."""
        return self.node().usage_totals

    def add_usage(self, amounts: tuple[int, int, Decimal], *, durable: bool) -> None:
        """Add usage `decide` charged (negative: a refund); `durable` saves it first."""

        def mutate() -> None:
            self._put_spent(read_spent(self.journal.document, self.path).plus(amounts=amounts))

        self.journal.change(mutate, durable=durable)

    def saved_result(self) -> tuple[bool, Any]:
        """`(True, result)` when the execution finished."""
        node = self.node()
        if node.finished_with_result:
            return True, thaw(node.result)
        return False, None

    def saved_failure(self) -> AgentError | None:
        """The saved terminal failure, raised again instead of re-running anything."""
        failure = self.node().failure
        if failure is None:
            return None
        return AgentError(
            f"{failure.message} (saved terminal failure of this execution)", code=failure.code
        )

    def saved_execution(self) -> SavedExecution | None:
        """The last committed state, if any."""
        return self.node().execution

    def saved_turn(self, index: int) -> SavedTurn | None:
        """The journal of turn `index` when it was reserved before."""
        turn = self.turn()
        if turn is not None and turn.index == index:
            return turn
        return None

    def _commit_execution(self, execution: Mapping[str, Any]) -> None:
        self.launched = 0
        document = self.journal.document
        turn = self.turn()
        if turn is not None:
            spent = read_spent(document, self.path)
            for entry in turn.calls:
                spent = spent.plus(entry.totals, entry.usage_totals)
            self.put("turn", None)
            self._put_spent(spent)
        where = (*self.path, "execution")
        previous, now = read_execution(document, self.path), dict(execution)
        set_at(document, where, now)
        changes: list[str] = []
        state_changes(where, previous, now, changes)
        self.journal.record_changes(changes)

    def reserve(self, index: int, execution: Mapping[str, Any]) -> None:
        """Save the state and the reservation of turn `index` (its decision charged)."""

        def mutate() -> None:
            self._commit_execution(execution)
            self._put_spent(read_spent(self.journal.document, self.path).plus((0, 1, 0)))
            self.put("turn", SavedTurn(index=index, phase="reserved").to_dict())

        self.journal.change(mutate)

    def repaired(self, rejection: Mapping[str, Any]) -> None:
        """Save a repair of the reserved turn: the repair and the next decision charged,
        and the rejection the next `decide` sees (a resume sends it again, charging
        nothing)."""
        saved = _plain_json(rejection, "Agent decision rejection")

        def mutate() -> None:
            self._put_spent(read_spent(self.journal.document, self.path).plus((0, 1, 1)))
            self._set((*self.path, "turn", "rejection"), saved)

        self.journal.change(mutate)

    def commit_state(self, execution: Mapping[str, Any]) -> None:
        """Record the reduced state; it is saved with the next write, before later work."""
        self.journal.change(lambda: self._commit_execution(execution), durable=False)

    def decided(
        self, calls: Sequence[_Call], starting: int, waiting: Mapping[int, str] | None = None
    ) -> None:
        """Save the validated batch with its prepared inputs and its admission.

        The first `starting` calls start at once when the write returns, so their intents
        (`running`) share this write: each is durable before its call starts. The calls
        in `waiting` (index -> the agent's run id) wait for approval (`starting` is then 0).
        """
        waiting = waiting or {}
        entries = tuple(
            CallEntry(
                id=call.id,
                tool=call.tool,
                input=_plain_json(call.input, f"Agent call {quote(call.id)} input"),
                status="running" if index < starting else "pending",
                approval=CallApproval(agent_run_id=waiting[index]) if index in waiting else None,
            )
            for index, call in enumerate(calls)
        )

        def mutate() -> None:
            turn = self.turn()
            assert turn is not None
            decided = SavedTurn(
                index=turn.index, phase="decided", calls=entries, rejection=turn.rejection
            )
            self.put("turn", decided.to_dict())
            spent = read_spent(self.journal.document, self.path)
            self._put_spent(spent.plus((len(entries), 0, 0)))

        self.journal.change(mutate)
        self.launched = starting

    def pending_approvals(self) -> list[PendingApproval]:
        """The calls of this node that wait for approval (`PendingApproval`s)."""
        return node_pending(self.node(), self.agent_path)

    def still_waiting(self, run_id: str) -> None:
        """Waiting calls stopped this attempt too: note its run id (saved with a flush)."""

        def mutate() -> None:
            turn = self.turn()
            for index, entry in enumerate(turn.calls if turn is not None else ()):
                if entry.approval is not None and entry.status == "pending":
                    approval = dataclasses.replace(entry.approval, agent_run_id=run_id)
                    self.put_call(index, "approval", approval.to_dict())

        self.journal.change(mutate, durable=False)

    def decide_approvals(
        self, choices: Mapping[int, ApprovalChoice], given: Mapping[int, Approval]
    ) -> None:
        """Save the decisions on waiting calls, in one write before anything starts.

        `choices` maps a call index to what to save on it; `given` to the decision as the
        person gave it, kept in the checkpoint's log so that giving it again later is
        recognised (and ignored).
        """
        turn = self.turn()
        assert turn is not None
        entries = turn.calls
        records = [
            DecisionRecord(
                agent=self.agent_path,
                turn=turn.index,
                call=entries[index].id,
                kind=approval.kind,
                message=approval.message if approval.kind == "reject" else None,
                input=_plain_json(approval.input, "Approval decision")
                if approval.kind == "edit"
                else None,
            ).to_dict()
            for index, approval in given.items()
        ]
        saved = {
            index: dataclasses.replace(
                choice,
                input=None
                if choice.input is None
                else _plain_json(choice.input, f"Agent call {quote(entries[index].id)} input"),
                outcome=None
                if choice.outcome is None
                else _plain_json(choice.outcome, "Agent call outcome"),
            )
            for index, choice in choices.items()
        }

        def mutate() -> None:
            for index, choice in saved.items():
                entry = entries[index]
                approval = entry.approval or CallApproval()
                decided = dataclasses.replace(approval, decision=choice.kind)
                self.put_call(index, "approval", decided.to_dict())
                if choice.input is not None:
                    self.put_call(index, "proposedInput", entry.input)
                    self.put_call(index, "input", choice.input)
                if choice.outcome is not None:
                    self.put_call(index, "status", "completed")
                    self.put_call(index, "outcome", choice.outcome)
            add_at(self.journal.document, ("decided",), records)
            self.journal.record_add(("decided",), records)

        self.journal.change(mutate)

    def stale(self, index: int) -> bool:
        """Whether call `index` was running when an earlier process stopped."""
        return index >= self.launched and self.entry(index).status == "running"

    def never_started(self, indices: list[int]) -> None:
        """Calls the decision saved as running that never started: pending again (saved
        with the next write, e.g. the flush of a cancelled execution)."""

        def mutate() -> None:
            for index in indices:
                if index < self.launched and self.entry(index).status == "running":
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
        saved = _plain_json(outcome, f"Agent call {quote(str(outcome['id']))} outcome")
        budget = slot.budget if slot is not None else None

        def mutate() -> None:
            self.put_call(index, "status", "completed")
            self.put_call(index, "outcome", saved)
            if budget is not None and self.entry(index).child is None:
                consumed = Spent(
                    calls=budget.calls, decisions=budget.decisions, repairs=budget.repairs
                )
                amounts = (budget.input_tokens, budget.output_tokens, budget.cost)
                self.put_call(index, "consumed", consumed.plus(amounts=amounts).to_dict())

        self.journal.change(mutate)

    def fail(self, error: BaseException) -> None:
        """Save a terminal failure (not for storage errors: those cannot be saved)."""
        root = root_cause(error)
        code = getattr(root, "code", None) if isinstance(root, TubelessError) else None
        if _unsaved(error) or self.journal.failed:
            return
        failure = Failure(
            code=code if isinstance(code, str) else "TUBELESS_STEP_FAILED",
            message=str(error)[:4096],
        )
        self.journal.change(lambda: self.put("failure", failure.to_dict()))


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


def saved_outcome(entry: CallEntry) -> FrozenDict:
    """A completed call's outcome, frozen again as the reducer first saw it."""
    outcome: FrozenDict = freeze_json(entry.outcome)
    return outcome


def interrupted_outcome(entry: CallEntry) -> FrozenDict:
    """The recoverable outcome of an unsafe call that was running when the process died."""
    return FrozenDict(
        id=entry.id,
        tool=entry.tool,
        ok=False,
        error=FrozenDict(code=INTERRUPTED_CODE, message=INTERRUPTED_MESSAGE),
    )

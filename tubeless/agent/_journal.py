"""The durable journal of an agent: the receipts a crash-safe resume reads back.

A durable root invocation leases its execution key and keeps one JSON document, the
checkpoint, rewritten whole (and atomically) by every write. The document holds one node
per agent: the root's, and below each call of a durable subagent, the subagent's own (a
durable child joins its parent's journal). A node records, each write acknowledged
before the agent goes on:

1. the decision reservation (the decision is charged; `decide` may run);
2. the validated decision with its prepared arguments and the batch admission, or the
   validated finish result;
3. each call's intent (`running`) right before it starts, then its outcome;
4. the reduced state (written with the next reservation, before any later work), or a
   terminal failure (never a cancellation: a cancelled execution stays resumable).

Model usage a `decide` reserves is saved before the reservation returns (so a process
killed during the request keeps it charged); settlements and reports go with the next
write. A node's `spent.usage` (absent in older checkpoints: nothing spent) holds its own.

Writes from threads that arrive together share one store write (group commit): a writer
waits only until a write that includes its own change is durable.

On resume a completed call's outcome is reused, a pending one dispatched, a running one
re-run when its tool is `replay="safe"` (or is a durable subagent, which resumes its own
node) and otherwise turned into the recoverable outcome `TUBELESS_AGENT_CALL_INTERRUPTED`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import typing
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from tubeless._frozen import FrozenDict, freeze_json, thaw
from tubeless._quote import quote, type_name
from tubeless.agent._approvals import APPROVAL_CODES, Approval, node_pending
from tubeless.agent._checkpoint_store import WRITE_FAILED_CODE, CheckpointLease, CheckpointStore
from tubeless.errors import (
    AgentDefinitionError,
    AgentError,
    PendingApproval,
    PipelineExecutionError,
    TubelessError,
)

CHECKPOINT_FORMAT = "tubeless.agent-checkpoint"
CHECKPOINT_VERSION = 1
KEY_LIMIT = 4096
KEY_CODE = "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY"
MISMATCH_CODE = "TUBELESS_AGENT_CHECKPOINT_MISMATCH"
INVALID_CODE = "TUBELESS_AGENT_CHECKPOINT_INVALID"
INTERRUPTED_CODE = "TUBELESS_AGENT_CALL_INTERRUPTED"
INTERRUPTED_MESSAGE = "The call may have partially run; inspect its effects before retrying"
_UNSAVED_CODES = (
    frozenset({WRITE_FAILED_CODE, MISMATCH_CODE, INVALID_CODE, KEY_CODE}) | APPROVAL_CODES
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


def check_key(key: object) -> str:
    """Return `key` when it is a nonblank string of at most 4096 characters.

    Raises:
        AgentError: `TUBELESS_AGENT_INVALID_CHECKPOINT_KEY`.
    """
    if type(key) is not str or not key.strip() or len(key) > KEY_LIMIT:
        raise AgentError(
            f"Checkpoint key must be a nonblank string of at most {KEY_LIMIT} characters, "
            f"got {quote(key) if type(key) is str else type_name(key)}",
            code=KEY_CODE,
        )
    return key


@typing.final
class Durability:
    """Make an agent durable: `define_agent(..., durability=Durability(store=, key=))`.

    Args:
        store: a checkpoint store (`SqliteCheckpointStore`, `MemoryCheckpointStore`, or
            anything with `acquire(key) -> lease`).
        key: the execution key, or `key(validated_options) -> str`; nonblank, at most 4096
            characters. Running again with the same key resumes the execution. A run's
            context `execution_key` (the CLI's `--execution-key`) takes its place.

    A durable agent called as a subagent of a durable agent ignores its own store and key:
    it joins the parent's journal, below the call that started it.

    Raises:
        AgentDefinitionError: when `store` has no `acquire`.
        AgentError: `TUBELESS_AGENT_INVALID_CHECKPOINT_KEY` for a bad literal key.
    """

    __slots__ = ("key", "store")

    def __init__(self, *, store: CheckpointStore, key: str | Callable[[Any], str]) -> None:
        if not callable(getattr(store, "acquire", None)):
            raise AgentDefinitionError(
                f"Durability store must have acquire(key), got {type_name(store)}"
            )
        if not callable(key):
            check_key(key)
        self.store = store
        self.key = key

    def key_for(self, options: Any, given: str | None = None) -> str:
        """The execution key: `given` (a run's `execution_key`) or this one's.

        Raises:
            AgentError: `TUBELESS_AGENT_INVALID_CHECKPOINT_KEY`.
        """
        if given is not None:
            return check_key(given)
        return check_key(self.key(options) if callable(self.key) else self.key)

    def __repr__(self) -> str:
        return f"Durability(store={self.store!r})"


def _invalid(problem: str) -> AgentError:
    return AgentError(
        f"Checkpoint is corrupt or of an unknown version: {problem}", code=INVALID_CODE
    )


def _plain_json(value: Any, label: str) -> Any:
    """A private JSON copy of `value` for the document; refuse what JSON cannot hold."""
    try:
        return json.loads(json.dumps(value, allow_nan=False, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError) as error:
        raise AgentError(
            f"{label} is not JSON data, which a durable agent must save: {str(error)[:200]}",
            code="TUBELESS_AGENT_INVALID_STATE",
        ) from None


class Journal:
    """The document of one durable root invocation and its lease (group-committed writes)."""

    def __init__(self, lease: CheckpointLease, document: dict[str, Any]) -> None:
        self._lease = lease
        self.document = document
        self._changed = threading.Condition()
        self._sequence = 0
        self._written = 0
        self._writing = False
        self._failure: BaseException | None = None
        self.writes = 0
        """Store writes made (each one transaction in a SQLite store)."""
        self.approvals: Mapping[str, Approval] = {}
        """The checked approval decisions of this run (the root run's context `approvals`)."""

    @classmethod
    def open(cls, durability: Durability, options: Any, given: str | None = None) -> Journal:
        """Lease the key and read (or start) the checkpoint, before any agent callback."""
        key = durability.key_for(options, given)
        lease = durability.store.acquire(key)
        try:
            text = lease.read()
            document = _parse(text) if text is not None else _fresh(key)
        except BaseException:
            lease.close()
            raise
        return cls(lease, document)

    def close(self) -> None:
        """Release the lease."""
        self._lease.close()

    def change(self, mutate: Callable[[], None], *, durable: bool = True) -> None:
        """Apply `mutate` to the document; with `durable`, return once it is saved.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when this or an earlier
                write failed: the run must stop (the next run reads what was saved).
        """
        with self._changed:
            self._raise_failure()
            mutate()
            self._sequence += 1
            if durable:
                self._sync(self._sequence)

    @property
    def writing(self) -> bool:
        """Whether a write is in progress (changes made meanwhile go in the next one)."""
        return self._writing

    @property
    def failed(self) -> bool:
        """Whether a write failed (nothing more is written)."""
        return self._failure is not None

    def flush(self) -> None:
        """Save every change made so far (best effort: failures stay recorded)."""
        with self._changed:
            if self._failure is None and self._written < self._sequence:
                self._sync(self._sequence)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise AgentError(
                f"Checkpoint write failed; the run stopped: {str(self._failure)[:300]}",
                code=WRITE_FAILED_CODE,
            ) from self._failure

    def _sync(self, mine: int) -> None:
        """Wait (holding `_changed`) until change `mine` is durable, writing if no one is."""
        while self._written < mine:
            self._raise_failure()
            if self._writing:
                self._changed.wait()
                continue
            self._writing = True
            target = self._sequence
            text = json.dumps(self.document, separators=(",", ":"), allow_nan=False)
            failure: BaseException | None = None
            self._changed.release()
            try:
                self._lease.write(text)
            except BaseException as error:
                failure = error
            finally:
                self._changed.acquire()
                self._writing = False
                self.writes += 1
                if failure is None:
                    self._written = target
                else:
                    self._failure = failure
                self._changed.notify_all()
        self._raise_failure()


def _fresh(key: str) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "key": key,
        "id": uuid.uuid4().hex,
        "agent": None,
    }


def _parse(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise _invalid(f"not JSON ({str(error)[:120]})") from None
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise _invalid("not a tubeless agent checkpoint")
    if document.get("version") != CHECKPOINT_VERSION:
        raise _invalid(f"version {quote(document.get('version'))}, expected 1")
    if type(document.get("id")) is not str or not (
        document.get("agent") is None or isinstance(document.get("agent"), dict)
    ):
        raise _invalid("missing execution id or agent node")
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


def _add_usage(holder: dict[str, Any], amounts: tuple[int, int, Decimal]) -> None:
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
        raise _invalid(f"{where} has no budget")
    if not all(_counter(node["spent"].get(name)) for name in ("calls", "decisions")):
        raise _invalid(f"{where} has a malformed budget")
    if not _usage_ok(node["spent"]):
        raise _invalid(f"{where} has a malformed usage")
    execution = node.get("execution")
    if execution is not None and not (
        isinstance(execution, dict)
        and all(_counter(execution.get(name)) for name in ("turn", "stateVersion", "calls"))
        and "state" in execution
        and execution["turn"] >= 1
    ):
        raise _invalid(f"{where} has a malformed execution")
    if "failure" in node and not (
        isinstance(node["failure"], dict)
        and all(type(node["failure"].get(name)) is str for name in ("code", "message"))
    ):
        raise _invalid(f"{where} has a malformed failure")
    turn = node.get("turn", 0)
    if turn is None:
        return
    if not (
        isinstance(turn, dict)
        and _counter(turn.get("index"))
        and turn.get("phase") in ("reserved", "decided")
        and isinstance(turn.get("calls"), list)
    ):
        raise _invalid(f"{where} has a malformed turn")
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
        raise _invalid(f"{where} is malformed")
    outcome = entry.get("outcome")
    if entry["status"] == "completed" and not (
        isinstance(outcome, dict) and type(outcome.get("ok")) is bool
    ):
        raise _invalid(f"{where} is completed without an outcome")
    if "approval" in entry and not isinstance(entry["approval"], dict):
        raise _invalid(f"{where} has a malformed approval")
    consumed = entry.get("consumed")
    if consumed is not None and not (
        isinstance(consumed, dict)
        and all(_counter(consumed.get(name)) for name in ("calls", "decisions"))
        and _usage_ok(consumed)
    ):
        raise _invalid(f"{where} has a malformed budget")
    if entry.get("child") is not None:
        _check_node(entry["child"], f"{where} child")


def _totals(node: Mapping[str, Any]) -> tuple[int, int]:
    """Calls and decisions charged to this node's budget: its own and its subtree's."""
    calls, decisions = node["spent"]["calls"], node["spent"]["decisions"]
    turn = node.get("turn")
    for entry in turn["calls"] if turn else ():
        below = _entry_totals(entry)
        calls += below[0]
        decisions += below[1]
    return calls, decisions


def _usage_totals(node: Mapping[str, Any]) -> tuple[int, int, Decimal]:
    """Usage charged to this node's budget: its own and its subtree's."""
    total = _usage_of(node["spent"])
    turn = node.get("turn")
    for entry in turn["calls"] if turn else ():
        below = _entry_usage(entry)
        total = (total[0] + below[0], total[1] + below[1], total[2] + below[2])
    return total


def _entry_usage(entry: Mapping[str, Any]) -> tuple[int, int, Decimal]:
    if entry.get("child") is not None:
        return _usage_totals(entry["child"])
    return _usage_of(entry.get("consumed"))


def _entry_totals(entry: Mapping[str, Any]) -> tuple[int, int]:
    if entry.get("child") is not None:
        return _totals(entry["child"])
    consumed = entry.get("consumed")
    return (consumed["calls"], consumed["decisions"]) if consumed else (0, 0)


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
        if entry.get("child") is None:
            owner.journal.change(
                lambda: entry.__setitem__("child", _new_node(identity)), durable=False
            )
        node = entry["child"]
        check_identity(node, identity)
        turn = owner.node["turn"]["index"]
        return AgentJournal(owner.journal, node, f"{owner.agent_path}/{turn}/{entry['id']}")


def _new_node(identity: NodeIdentity) -> dict[str, Any]:
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
        raise _invalid("agent node without its budget or turn")
    for field, value in identity.to_dict().items():
        if node.get(field) != value:
            raise AgentError(
                f"Checkpoint of agent {quote(identity.agent)} has another {field}; use a "
                "new execution key",
                code=MISMATCH_CODE,
            )


class AgentJournal:
    """One agent's node in a journal, and the writes an invocation makes to it."""

    __slots__ = ("agent_path", "journal", "launched", "node")

    def __init__(self, journal: Journal, node: dict[str, Any], agent_path: str) -> None:
        self.journal = journal
        self.node = node
        self.agent_path = agent_path
        self.launched = 0
        """How many leading calls of the current batch this process saved as running."""

    @classmethod
    def root(cls, journal: Journal, identity: NodeIdentity) -> AgentJournal:
        """The root node of `journal`, created for a new execution."""
        document = journal.document
        if document["agent"] is None:
            document["agent"] = _new_node(identity)
        check_identity(document["agent"], identity)
        return cls(journal, document["agent"], identity.agent)

    @property
    def execution_id(self) -> str:
        return str(self.journal.document["id"])

    @property
    def entries(self) -> list[dict[str, Any]]:
        turn = self.node["turn"]
        return turn["calls"] if turn else []

    def totals(self) -> tuple[int, int]:
        """Calls and decisions already charged to this agent's budget."""
        return _totals(self.node)

    def usage_totals(self) -> tuple[int, int, Decimal]:
        """Input tokens, output tokens and cost already charged to this agent's budget."""
        return _usage_totals(self.node)

    def add_usage(self, amounts: tuple[int, int, Decimal], *, durable: bool) -> None:
        """Add usage `decide` charged (negative: a refund); `durable` saves it first."""
        self.journal.change(lambda: _add_usage(self.node["spent"], amounts), durable=durable)

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
                calls, decisions = _entry_totals(entry)
                node["spent"]["calls"] += calls
                node["spent"]["decisions"] += decisions
                _add_usage(node["spent"], _entry_usage(entry))
            node["turn"] = None
        node["execution"] = dict(execution)

    def reserve(self, index: int, execution: Mapping[str, Any]) -> None:
        """Save the state and the reservation of turn `index` (its decision charged)."""

        def mutate() -> None:
            self._commit_execution(execution)
            self.node["spent"]["decisions"] += 1
            self.node["turn"] = {"index": index, "phase": "reserved", "calls": []}

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
            self.node["spent"]["calls"] += len(calls)

        self.journal.change(mutate)
        self.launched = starting

    def pending_approvals(self) -> list[PendingApproval]:
        """The calls of this node that wait for approval (`PendingApproval`s)."""
        return node_pending(self.node, self.agent_path)

    def still_waiting(self, run_id: str) -> None:
        """Waiting calls stopped this attempt too: note its run id (saved with a flush)."""

        def mutate() -> None:
            for entry in self.entries:
                if isinstance(entry.get("approval"), dict) and entry["status"] == "pending":
                    entry["approval"]["agentRunId"] = run_id

        self.journal.change(mutate, durable=False)

    def decide_approvals(self, decisions: Mapping[int, tuple[str, Any, Any]]) -> None:
        """Save the decisions on waiting calls, in one write before anything starts.

        `decisions` maps a call index to `(kind, validated input or None, rejected
        outcome or None)`.
        """
        saved = {
            index: (
                kind,
                None
                if value is None
                else _plain_json(value, f"Agent call {quote(self.entries[index]['id'])} input"),
                None if outcome is None else _plain_json(outcome, "Agent call outcome"),
            )
            for index, (kind, value, outcome) in decisions.items()
        }

        def mutate() -> None:
            for index, (kind, value, outcome) in saved.items():
                entry = self.entries[index]
                entry["approval"]["decision"] = kind
                if value is not None:
                    entry["proposedInput"] = entry["input"]
                    entry["input"] = value
                if outcome is not None:
                    entry["status"] = "completed"
                    entry["outcome"] = outcome

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
                    self.entries[index]["status"] = "pending"

        if indices:
            self.journal.change(mutate, durable=False)

    def launch(self, index: int) -> None:
        """Save call `index`'s intent before it starts (unless the decision saved it)."""
        if index >= self.launched:
            self.start(index)

    def finished(self, result: Any) -> None:
        """Save the validated finish result."""
        saved = _plain_json(result, "Agent finish result")
        self.journal.change(lambda: self.node.__setitem__("result", saved))

    def start(self, index: int) -> None:
        """Save call `index`'s intent."""
        self.journal.change(lambda: self.entries[index].__setitem__("status", "running"))

    def complete(self, index: int, outcome: Mapping[str, Any], slot: CallSlot | None) -> None:
        """Save call `index`'s outcome (and what a non-durable subagent spent)."""
        saved = _plain_json(outcome, f"Agent call {quote(outcome['id'])} outcome")
        entry = self.entries[index]

        def mutate() -> None:
            entry["status"] = "completed"
            entry["outcome"] = saved
            budget = slot.budget if slot is not None else None
            if budget is not None and entry.get("child") is None:
                entry["consumed"] = {"calls": budget.calls, "decisions": budget.decisions}
                _add_usage(
                    entry["consumed"], (budget.input_tokens, budget.output_tokens, budget.cost)
                )

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
        self.journal.change(lambda: self.node.__setitem__("failure", failure))


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

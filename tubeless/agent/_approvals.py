"""Human approval of tool calls: the decisions a person gives, and where calls wait.

A tool defined with `needs_approval=` makes its calls wait between admission and
dispatch. The batch is journaled as usual, but every call that needs approval carries
an `approval` entry (`{"agentRunId": ...}`) and the batch dispatches nothing: the run
ends `failed` with `TUBELESS_AGENT_APPROVAL_REQUIRED`. A resume with the same key and
`context={"approvals": {call_id: decision}}` records each decision in the journal (one
durable write, before anything starts) and then dispatches the batch: an approved call
runs, an edited one runs with its new (validated) input, a rejected one becomes the
recoverable outcome `TUBELESS_AGENT_CALL_REJECTED`.

The decisions are checked against the whole checkpoint (the root agent's node and every
durable subagent's node below it) before any callback runs: an unknown call id, a
decision for a call that needs none, an edit its tool's schema refuses, or (when any new
decision is given) a waiting call without one is an error, and nothing is dispatched.

Every recorded decision is also kept in the checkpoint's log of decisions (`decided`),
which outlives the turn it was made in. A decision given again exactly as it was recorded
is ignored, so running the same command line again (after a partial resume, or after a
kill) is harmless; a different decision for a call already decided is refused with
`TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED`, naming the decision on record.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from tubeless._frozen import FrozenDict, thaw
from tubeless._quote import quote, type_name
from tubeless.agent._journal_access import SavedCall, checkpoint_calls, node_calls
from tubeless.agent._journal_document import (
    AgentNode,
    CallEntry,
    Checkpoint,
    DecisionRecord,
    read_checkpoint,
)
from tubeless.errors import (
    AgentDefinitionError,
    AgentError,
    ApprovalRequiredError,
    PendingApproval,
)

REQUIRED_CODE = ApprovalRequiredError.CODE
INVALID_CODE = "TUBELESS_AGENT_APPROVAL_INVALID"
UNKNOWN_CODE = "TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL"
NOT_NEEDED_CODE = "TUBELESS_AGENT_APPROVAL_NOT_NEEDED"
MISSING_CODE = "TUBELESS_AGENT_APPROVAL_MISSING"
INVALID_EDIT_CODE = "TUBELESS_AGENT_APPROVAL_INVALID_EDIT"
ALREADY_DECIDED_CODE = "TUBELESS_AGENT_APPROVAL_ALREADY_DECIDED"
REJECTED_CODE = "TUBELESS_AGENT_CALL_REJECTED"
APPROVAL_CODES = frozenset(
    {
        REQUIRED_CODE,
        INVALID_CODE,
        UNKNOWN_CODE,
        NOT_NEEDED_CODE,
        MISSING_CODE,
        INVALID_EDIT_CODE,
        ALREADY_DECIDED_CODE,
    }
)
"""Failures that leave the execution resumable (never saved as terminal)."""
MESSAGE_LIMIT = 4096

NeedsApproval = bool | Callable[[Any, Any], bool]
"""`needs_approval=`: `True`, `False`, or `predicate(validated_input, context) -> bool`."""


@typing.final
@dataclasses.dataclass(frozen=True, slots=True)
class Approval:
    """A person's decision on a waiting call: made by `approve`, `reject` or `edit`."""

    kind: Literal["approve", "reject", "edit"]
    """`"approve"`, `"reject"` or `"edit"`."""
    message: str | None = None
    """The rejection's message (`reject` only)."""
    input: Any = None
    """The new raw input (`edit` only), validated like any argument on resume."""


def approve() -> Approval:
    """Approve a waiting call: it runs with the input it was proposed with."""
    return Approval("approve")


def reject(message: str) -> Approval:
    """Reject a waiting call: it becomes the recoverable outcome
    `TUBELESS_AGENT_CALL_REJECTED` with `message`, and the agent decides what next.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_INVALID` for a blank message or one longer
            than 4096 characters.
    """
    if type(message) is not str or not message.strip() or len(message) > MESSAGE_LIMIT:
        raise AgentError(
            f"reject(message) needs a nonblank string of at most {MESSAGE_LIMIT} characters, "
            f"got {quote(message) if type(message) is str else type_name(message)}",
            code=INVALID_CODE,
        )
    return Approval("reject", message=message)


def edit(new_input: Any) -> Approval:
    """Approve a waiting call with another input: `new_input` is validated by the tool's
    input schema (for a pipeline tool: mapped and validated by the child's) on resume,
    before anything of its batch starts."""
    return Approval(
        "edit", input=thaw(new_input) if isinstance(new_input, FrozenDict) else new_input
    )


def check_needs_approval(value: object, label: str) -> NeedsApproval:
    """Return `needs_approval` when it is a bool or a callable.

    Raises:
        AgentDefinitionError: otherwise.
    """
    if type(value) is bool or callable(value):
        return typing.cast(NeedsApproval, value)
    raise AgentDefinitionError(
        f"{label} needs_approval must be True, False or predicate(input, context) -> bool, "
        f"got {type_name(value)}"
    )


def needs_approval(rule: NeedsApproval, tool: str, value: Any, context: Any) -> bool:
    """Evaluate a tool's `needs_approval` for one prepared call.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_INVALID` when the predicate returns no bool.
    """
    if type(rule) is bool:
        return rule
    answer = rule(value, context)
    if type(answer) is not bool:
        raise AgentError(
            f"needs_approval of tool {tool} must return a bool, got {type_name(answer)}",
            code=INVALID_CODE,
        )
    return answer


def check_approvals(given: Mapping[str, Any] | None) -> dict[str, Approval]:
    """The decisions of a run's context `approvals`, checked for shape.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_INVALID` for a key that is not a string or a
            value not made by `approve`, `reject` or `edit`.
    """
    checked: dict[str, Approval] = {}
    for key, value in (given or {}).items():
        if type(key) is not str:
            raise AgentError(
                f"Approval keys must be call ids (strings), got {type_name(key)}",
                code=INVALID_CODE,
            )
        if not isinstance(value, Approval):
            raise AgentError(
                f"Approval of call {quote(key)} must come from tubeless.approve(), "
                f"tubeless.reject(message) or tubeless.edit(new_input), got {type_name(value)}",
                code=INVALID_CODE,
            )
        checked[key] = value
    return checked


def node_pending(node: AgentNode, path: str) -> list[PendingApproval]:
    """The waiting calls of one node."""
    return [_pending(call) for call in node_calls(node, path) if call.waiting]


def _pending(call: SavedCall) -> PendingApproval:
    return PendingApproval(
        call_id=call.id,
        tool=call.tool,
        input=call.input,
        turn=call.turn,
        agent_run_id=call.agent_run_id,
        agent=call.agent,
    )


def document_pending(checkpoint: Checkpoint) -> list[PendingApproval]:
    """Every waiting call of a checkpoint (root first, then subagents)."""
    if checkpoint.finished:
        return []
    return [_pending(call) for call in checkpoint_calls(checkpoint) if call.waiting]


def checkpoint_pending_approvals(text: str | None) -> tuple[PendingApproval, ...]:
    """The calls waiting for approval in checkpoint text (what `lease.read()` returns;
    none for `None`): a custom `CheckpointStore` can offer `pending_approvals(key)` with it.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for text that is not a checkpoint.
    """
    if text is None:
        return ()
    return tuple(document_pending(read_checkpoint(text)))


def _same(record: DecisionRecord, approval: Approval) -> bool:
    """Whether a recorded decision is `approval` again (an edit: the same input as JSON)."""
    if record.kind != approval.kind:
        return False
    if record.legacy or approval.kind == "approve":
        return True
    if approval.kind == "reject":
        return bool(record.message == approval.message)
    try:
        given = json.dumps(approval.input, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return json.dumps(record.input, sort_keys=True) == given


def _describe(record: DecisionRecord) -> str:
    if record.kind == "reject":
        return f"rejected with message {quote(record.message)}"
    if record.kind == "edit":
        shown = json.dumps(record.input, sort_keys=True, default=str)
        return f"edited to input {quote(shown)}"
    return {"approve": "approved"}.get(record.kind, quote(record.kind))


def _applied(checkpoint: Checkpoint, call_id: str, found: list[SavedCall]) -> list[DecisionRecord]:
    """The recorded decisions of calls with this id: the log's, then the live tree's own
    (a checkpoint saved before the log existed keeps only the decision's kind)."""
    records = checkpoint.decisions_of(call_id)
    for call in found:
        if call.decision is not None and not records:
            records.append(DecisionRecord(call=call_id, kind=call.decision, legacy=True))
    return records


def _check_decided(
    checkpoint: Checkpoint, call_id: str, approval: Approval, found: list[SavedCall]
) -> None:
    """Refuse a decision for a call that waits nowhere, unless it repeats the recorded one."""
    records = _applied(checkpoint, call_id, found)
    if any(_same(record, approval) for record in records):
        return
    if found and not any(call.needs_approval for call in found):
        raise AgentError(
            f"Call {quote(call_id)} ({found[0].tool}) needs no approval",
            code=NOT_NEEDED_CODE,
        )
    if records:
        raise AgentError(
            f"Call {quote(call_id)} was already decided: {_describe(records[-1])}; a recorded "
            "decision cannot change (give the same decision again, or none)",
            code=ALREADY_DECIDED_CODE,
        )
    raise AgentError(
        f"No call {quote(call_id)} waits for approval in this execution (unknown call id); "
        f"{_waiting_ids(checkpoint)}",
        code=UNKNOWN_CODE,
    )


def check_against(checkpoint: Checkpoint, approvals: Mapping[str, Approval]) -> dict[str, Approval]:
    """Refuse decisions that do not fit the calls waiting in `checkpoint`, before any
    callback.

    Returns:
        The decisions for calls that wait now; decisions already recorded identically
        (a command line run again) are left out.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL`, `..._NOT_NEEDED`,
            `..._ALREADY_DECIDED`, `..._MISSING`, or `..._INVALID` for a call id waiting
            in several agents.
    """
    if not approvals:
        return {}
    by_id: dict[str, list[SavedCall]] = {}
    for call in checkpoint_calls(checkpoint):
        by_id.setdefault(call.id, []).append(call)
    fresh: dict[str, Approval] = {}
    for call_id, approval in approvals.items():
        found = by_id.get(call_id, [])
        paths = [call.agent for call in found if call.waiting]
        if len(paths) > 1:
            raise AgentError(
                f"Call id {quote(call_id)} waits in several agents ({', '.join(paths)[:300]}); "
                "it cannot be decided by id",
                code=INVALID_CODE,
            )
        if paths:
            fresh[call_id] = approval
        else:
            _check_decided(checkpoint, call_id, approval, found)
    missing = [p.call_id for p in document_pending(checkpoint) if p.call_id not in fresh]
    if fresh and missing:
        shown = ", ".join(quote(call_id) for call_id in missing[:8])
        raise AgentError(
            f"No decision for waiting call(s) {shown}: decide every waiting call "
            "(approve, reject or edit) or none",
            code=MISSING_CODE,
        )
    return fresh


def _waiting_ids(checkpoint: Checkpoint) -> str:
    """`waiting: 'a' (tool), ...`, or `none waits`, for an error about an unknown call id."""
    pending = document_pending(checkpoint)
    if not pending:
        return "none waits"
    shown = ", ".join(f"{quote(p.call_id)} ({quote(p.tool)})" for p in pending[:8])
    more = f" and {len(pending) - 8} more" if len(pending) > 8 else ""
    return f"waiting: {shown}{more}"


def unused_decisions(approvals: Mapping[str, Any]) -> str | None:
    """What to tell a person whose decisions reach an execution that already finished.

    The run returns the saved result as before (deciding twice changes nothing); the
    decisions are not silently dropped: this warning says they were not used.
    """
    if not approvals:
        return None
    shown = ", ".join(quote(call_id) for call_id in list(approvals)[:8])
    return (
        f"This execution already finished: no call waits for approval, so the decisions "
        f"for {shown} were not used"
    )


def rejected_outcome(entry: CallEntry, message: str) -> FrozenDict:
    """The recoverable outcome of a rejected call."""
    return FrozenDict(
        id=entry.id,
        tool=entry.tool,
        ok=False,
        error=FrozenDict(code=REJECTED_CODE, message=message),
    )

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
decision for a call that needs none, or (when any decision is given) a waiting call
without one is an error, and nothing is dispatched. A decision for a call whose approval
was already recorded is ignored (running the same command line again is harmless).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from tubeless._frozen import FrozenDict, thaw
from tubeless._quote import quote, type_name
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
REJECTED_CODE = "TUBELESS_AGENT_CALL_REJECTED"
APPROVAL_CODES = frozenset(
    {REQUIRED_CODE, INVALID_CODE, UNKNOWN_CODE, NOT_NEEDED_CODE, MISSING_CODE, INVALID_EDIT_CODE}
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


def waiting(entry: Mapping[str, Any]) -> bool:
    """Whether a journaled call waits for a decision (admitted, none recorded yet)."""
    approval = entry.get("approval")
    return (
        isinstance(approval, dict) and "decision" not in approval and entry["status"] == "pending"
    )


def _nodes(node: Mapping[str, Any], path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every agent node of a checkpoint with its agent path, parents first."""
    yield node, path
    turn: Any = node.get("turn")
    for entry in turn["calls"] if turn else ():
        if entry.get("child") is not None:
            yield from _nodes(entry["child"], f"{path}/{turn['index']}/{entry['id']}")


def node_pending(node: Mapping[str, Any], path: str) -> list[PendingApproval]:
    """The waiting calls of one node."""
    turn: Any = node.get("turn")
    return [
        PendingApproval(
            call_id=entry["id"],
            tool=entry["tool"],
            input=entry["input"],
            turn=turn["index"],
            agent_run_id=str(entry["approval"].get("agentRunId", "")),
            agent=path,
        )
        for entry in (turn["calls"] if turn else ())
        if waiting(entry)
    ]


def document_pending(document: Mapping[str, Any]) -> list[PendingApproval]:
    """Every waiting call of a checkpoint document (root first, then subagents)."""
    root = document.get("agent")
    if not isinstance(root, dict) or "result" in root or "failure" in root:
        return []
    found: list[PendingApproval] = []
    for node, path in _nodes(root, str(root.get("agent", ""))):
        found += node_pending(node, path)
    return found


def checkpoint_pending_approvals(text: str | None) -> tuple[PendingApproval, ...]:
    """The calls waiting for approval in checkpoint text (what `lease.read()` returns;
    none for `None`): a custom `CheckpointStore` can offer `pending_approvals(key)` with it.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for text that is not a checkpoint.
    """
    if text is None:
        return ()
    try:
        document = json.loads(text)
        if document.get("format") != "tubeless.agent-checkpoint":
            raise ValueError("not a tubeless agent checkpoint")
        return tuple(document_pending(document))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise AgentError(
            f"Checkpoint is corrupt or of an unknown version: {str(error)[:200]}",
            code="TUBELESS_AGENT_CHECKPOINT_INVALID",
        ) from None


def check_against(document: Mapping[str, Any], approvals: Mapping[str, Approval]) -> None:
    """Refuse decisions that do not fit the calls waiting in `document`, before any callback.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_UNKNOWN_CALL`, `..._NOT_NEEDED`,
            `..._MISSING`, or `..._INVALID` for a call id waiting in several agents.
    """
    if not approvals:
        return
    root = document.get("agent")
    nodes = list(_nodes(root, str(root.get("agent", "")))) if isinstance(root, dict) else []
    by_id: dict[str, list[tuple[Mapping[str, Any], str]]] = {}
    for node, path in nodes:
        turn = node.get("turn")
        for entry in turn["calls"] if turn else ():
            by_id.setdefault(entry["id"], []).append((entry, path))
    for call_id in approvals:
        found = by_id.get(call_id)
        if not found:
            raise AgentError(
                f"No call {quote(call_id)} waits for approval in this execution (unknown call "
                f"id); {_waiting_ids(document)}",
                code=UNKNOWN_CODE,
            )
        if not any(isinstance(entry.get("approval"), dict) for entry, _ in found):
            raise AgentError(
                f"Call {quote(call_id)} ({found[0][0]['tool']}) needs no approval",
                code=NOT_NEEDED_CODE,
            )
        paths = [path for entry, path in found if waiting(entry)]
        if len(paths) > 1:
            raise AgentError(
                f"Call id {quote(call_id)} waits in several agents ({', '.join(paths)[:300]}); "
                "it cannot be decided by id",
                code=INVALID_CODE,
            )
    missing = [p.call_id for p in document_pending(document) if p.call_id not in approvals]
    if missing:
        shown = ", ".join(quote(call_id) for call_id in missing[:8])
        raise AgentError(
            f"No decision for waiting call(s) {shown}: decide every waiting call "
            "(approve, reject or edit) or none",
            code=MISSING_CODE,
        )


def _waiting_ids(document: Mapping[str, Any]) -> str:
    """`waiting: 'a' (tool), ...`, or `none waits`, for an error about an unknown call id."""
    pending = document_pending(document)
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


def rejected_outcome(entry: Mapping[str, Any], message: str) -> FrozenDict:
    """The recoverable outcome of a rejected call."""
    return FrozenDict(
        id=entry["id"],
        tool=entry["tool"],
        ok=False,
        error=FrozenDict(code=REJECTED_CODE, message=message),
    )

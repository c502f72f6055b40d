"""Where the parts of a checkpoint sit in the document's dictionaries, and its calls.

The writer (`_journal_writer`) keeps the document as JSON dictionaries: these functions
read a part at a path as its typed form from `_journal_document`, and put or extend a
value at a path. `SavedCall` is the flat view of a call that approvals read, with where
it sits in the agent tree (`node_calls`, `tree_calls`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from tubeless.agent._journal_document import (
    AgentNode,
    CallEntry,
    Checkpoint,
    Path,
    SavedTurn,
    Spent,
)

# -- the writer's side: where the parts sit in the document's dictionaries --------------


def node_dict(document: Mapping[str, Any], path: Path) -> dict[str, Any] | None:
    """The node dictionary at `path` of the document (`None`: not made yet)."""
    value: Any = document
    for step in path:
        value = value[step]
    assert value is None or isinstance(value, dict)
    return value


@functools.lru_cache(maxsize=256)
def _where(path: Path) -> str:
    """How errors name the node at `path` (`agent`, `agent.turn.calls.0.child`, ...)."""
    return ".".join(map(str, path))


def read_node(document: Mapping[str, Any], path: Path) -> AgentNode:
    """The node at `path`, typed (it was checked when the document was read)."""
    return AgentNode.from_dict(node_dict(document, path), _where(path))


def read_turn(document: Mapping[str, Any], path: Path) -> SavedTurn | None:
    """The current turn of the node at `path`, typed."""
    node = node_dict(document, path)
    assert node is not None
    turn = node["turn"]
    return None if turn is None else SavedTurn.from_dict(turn, _where(path))


def read_entry(document: Mapping[str, Any], path: Path, index: int) -> CallEntry:
    """Call `index` of the current turn of the node at `path`, typed."""
    node = node_dict(document, path)
    assert node is not None
    return CallEntry.from_dict(node["turn"]["calls"][index], f"{_where(path)} call {index}")


def read_spent(document: Mapping[str, Any], path: Path) -> Spent:
    """The own budget of the node at `path`, typed."""
    node = node_dict(document, path)
    assert node is not None
    return Spent.from_dict(node["spent"], _where(path))


def read_execution(document: Mapping[str, Any], path: Path) -> dict[str, Any] | None:
    """The execution dictionary of the node at `path`, as saved (the diff of the next
    commit compares against it)."""
    node = node_dict(document, path)
    assert node is not None
    execution: dict[str, Any] | None = node["execution"]
    return execution


def set_at(document: dict[str, Any], path: Path, value: Any) -> None:
    """Put `value` at `path` of the document (the parent must exist)."""
    container: Any = document
    for step in path[:-1]:
        container = container[step]
    container[path[-1]] = value


def add_at(document: dict[str, Any], path: Path, items: list[Any]) -> None:
    """Extend the list at `path` (made when missing) with `items`."""
    container: Any = document
    for step in path[:-1]:
        container = container[step]
    container.setdefault(path[-1], []).extend(items)


# -- reading the calls of a checkpoint (for approvals) ---------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SavedCall:
    """A call of an agent's current turn, with where it sits in the tree."""

    agent: str
    """The agent path of the node the call belongs to."""
    turn: int
    """The node's current turn."""
    entry: CallEntry
    """The call as saved."""

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def tool(self) -> str:
        return self.entry.tool

    @property
    def input(self) -> Any:
        return self.entry.input

    @property
    def needs_approval(self) -> bool:
        """Whether the call was admitted waiting for a person."""
        return self.entry.approval is not None

    @property
    def agent_run_id(self) -> str:
        """The agent run that last stopped for it (waiting calls; else empty)."""
        approval = self.entry.approval
        return "" if approval is None or approval.agent_run_id is None else approval.agent_run_id

    @property
    def decision(self) -> str | None:
        """The kind of the decision recorded on it (`approve`, `reject`, `edit`), if any."""
        approval = self.entry.approval
        return None if approval is None else approval.decision

    @property
    def child(self) -> AgentNode | None:
        """The node of the durable subagent the call started, if any."""
        return self.entry.child

    @property
    def waiting(self) -> bool:
        """Whether the call waits for a decision (admitted, none recorded yet)."""
        return self.entry.waiting

    @property
    def child_path(self) -> str:
        """The agent path of the subagent the call started."""
        return f"{self.agent}/{self.turn}/{self.id}"


def node_calls(node: AgentNode, path: str) -> list[SavedCall]:
    """The calls of `node`'s current turn (`path`: its agent path)."""
    turn = node.turn
    if turn is None:
        return []
    return [SavedCall(agent=path, turn=turn.index, entry=entry) for entry in turn.calls]


def tree_calls(node: AgentNode, path: str) -> list[SavedCall]:
    """The calls of `node` and of every subagent node below it, each node's before its
    subagents'."""
    own = node_calls(node, path)
    found = list(own)
    for call in own:
        if call.child is not None:
            found += tree_calls(call.child, call.child_path)
    return found


def checkpoint_calls(checkpoint: Checkpoint) -> list[SavedCall]:
    """Every call of the root node and of the subagent nodes below it (none before the
    execution started)."""
    root = checkpoint.agent
    return [] if root is None else tree_calls(root, root.path)

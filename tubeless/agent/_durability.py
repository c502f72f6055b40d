"""Durability: the store and execution key that make an agent's invocation resumable."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from tubeless._quote import quote, type_name
from tubeless.agent._checkpoint_lease import CheckpointStore
from tubeless.errors import AgentDefinitionError, AgentError

KEY_LIMIT = 4096
KEY_CODE = "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY"


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

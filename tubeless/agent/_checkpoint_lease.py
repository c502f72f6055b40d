"""The checkpoint store protocol: where a durable agent's journal lives between processes.

A store hands out one lease per execution key. `lease.read()` returns the saved
checkpoint text (or `None`), `lease.write(text)` replaces it atomically and returns only
once it is durable, `lease.close()` gives the key up and deletes nothing. A lease may also
`append(change)`: log a change (see `tubeless.agent._journal_changes`) after the
snapshot its last `write` saved, durably; `write` then drops the log in the same
transaction, and `read` returns the snapshot with the log replayed. The journal appends
when the lease can, and otherwise writes the whole checkpoint every time. One live lease
per key, across processes: a second owner gets `TUBELESS_AGENT_EXECUTION_BUSY`, and a
lease whose process died is released by the operating system.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tubeless._quote import quote
from tubeless.errors import AgentError

BUSY_CODE = "TUBELESS_AGENT_EXECUTION_BUSY"


@runtime_checkable
class CheckpointLease(Protocol):
    """Ownership of one execution key, from `CheckpointStore.acquire` until `close()`."""

    def read(self) -> str | None:
        """The saved checkpoint text, or `None` when the key has none yet."""
        ...

    def write(self, text: str) -> None:
        """Replace the checkpoint atomically; return only once it is durable.

        A lease that can expire raises `AgentError` with `TUBELESS_AGENT_LEASE_LOST` once
        another owner took the key over: the run then stops before its next dispatch.
        """
        ...

    def close(self) -> None:
        """Release the key; the checkpoint stays."""
        ...


@runtime_checkable
class CheckpointStore(Protocol):
    """Anything with `acquire(key) -> CheckpointLease` can hold a durable agent's journal."""

    def acquire(self, key: str) -> CheckpointLease:
        """Own `key` until the lease is closed.

        Raises:
            AgentError: `TUBELESS_AGENT_EXECUTION_BUSY` when another lease holds `key`.
            CheckpointStoreError: when the store cannot be opened.
        """
        ...


def busy_error(key: str) -> AgentError:
    """The error of a second owner of `key`."""
    return AgentError(
        f"Execution {quote(key)} is running elsewhere (its checkpoint is leased)", code=BUSY_CODE
    )

"""The writer of a durable journal: group-committed writes of the checkpoint document.

The writer owns the lease and the document's pending changes. Changes from threads that
arrive together share one store write (group commit): a caller waits only until a write
that includes its own change is durable. A write is one of two kinds:

- a *snapshot*, the whole document (`lease.write`), which also drops the changes logged
  before it, in one transaction;
- an *append* of the changes made since the last write (`lease.append`), when the lease
  can append and the log since the last snapshot is still small: a change log longer than
  twice the snapshot (and `COMPACT_SLACK` bytes) is folded into a new snapshot instead,
  so reading a checkpoint back costs what its state holds, not its history.

The first write of every run is a snapshot (which folds whatever an earlier process
logged), and so is every write to a lease without `append`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tubeless.agent._approvals import Approval
from tubeless.agent._journal_changes import dumps, encode_add, encode_set
from tubeless.agent._journal_document import (
    INVALID_CODE,
    Path,
    fresh_document,
    parse_document,
)
from tubeless.agent._store_errors import WRITE_FAILED_CODE, damaged
from tubeless.errors import AgentError, CheckpointStoreError

if TYPE_CHECKING:
    from tubeless.agent._checkpoint_lease import CheckpointLease
    from tubeless.agent._durability import Durability

COMPACT_SLACK = 64 * 1024
"""Bytes of change log always allowed before a snapshot, so small documents are not
rewritten on every other write."""


def store_name(store: object) -> str:
    """How errors name a store: a SQLite file's path, or the store's `repr`."""
    return str(getattr(store, "path", None) or repr(store))


class Journal:
    """The document of one durable root invocation and its lease (group-committed writes)."""

    def __init__(
        self, lease: CheckpointLease, document: dict[str, Any], store: str = "", key: str = ""
    ) -> None:
        self._lease = lease
        self._append: Callable[[str], None] | None = getattr(lease, "append", None)
        self._store = store
        self._key = key
        self.document = document
        self._changed = threading.Condition()
        self._sequence = 0
        self._written = 0
        self._writing = False
        self._failure: BaseException | None = None
        self._changes: list[str] = []
        self._snapshot_size: int | None = None
        self._logged = 0
        self.writes = 0
        """Store writes made (each one transaction in a SQLite store)."""
        self.snapshots = 0
        """How many of the writes saved the whole document."""
        self.approvals: Mapping[str, Approval] = {}
        """The checked approval decisions of this run (the root run's context `approvals`)
        for the calls that wait now."""
        self.edits: Mapping[tuple[str, str], Any] = {}
        """The validated inputs of this run's edits, by (agent path, call id)."""

    @classmethod
    def open(cls, durability: Durability, options: Any, given: str | None = None) -> Journal:
        """Lease the key and read (or start) the checkpoint, before any agent callback."""
        key = durability.key_for(options, given)
        store = durability.store
        lease = store.acquire(key)
        try:
            text = lease.read()
            document = parse_document(text) if text is not None else fresh_document(key)
        except AgentError as error:
            lease.close()
            if error.code != INVALID_CODE or isinstance(error, CheckpointStoreError):
                raise
            raise damaged(store_name(store), key, error.message) from error
        except BaseException:
            lease.close()
            raise
        return cls(lease, document, store_name(store), key)

    def close(self) -> None:
        """Release the lease."""
        self._lease.close()

    def change(self, mutate: Callable[[], None], *, durable: bool = True) -> None:
        """Apply `mutate` to the document; with `durable`, return once it is saved.

        `mutate` runs under the journal's lock and logs what it changes with `record`,
        `record_add` or `record_changes`.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` (or the store's own code,
                such as `TUBELESS_AGENT_LEASE_LOST`) when this or an earlier write failed:
                the run must stop (the next run reads what was saved).
        """
        with self._changed:
            self._raise_failure()
            mutate()
            self._sequence += 1
            if durable:
                self._sync(self._sequence)

    def record(self, path: Path, value: Any) -> None:
        """Log that the document now holds `value` at `path` (inside `change`)."""
        self._changes.append(encode_set(path, value))

    def record_add(self, path: Path, items: Sequence[Any]) -> None:
        """Log that the list at `path` was extended with `items` (inside `change`)."""
        self._changes.append(encode_add(path, items))

    def record_changes(self, changes: Sequence[str]) -> None:
        """Log changes already encoded (see `state_changes`; inside `change`)."""
        self._changes.extend(changes)

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
        failure = self._failure
        if failure is None:
            return
        message = f"Checkpoint write failed; the run stopped: {str(failure)[:600]}"
        if isinstance(failure, CheckpointStoreError):
            raise CheckpointStoreError(
                message, code=failure.code, store=failure.store, key=failure.key
            ) from failure
        raise CheckpointStoreError(
            message, code=WRITE_FAILED_CODE, store=self._store, key=self._key
        ) from failure

    def _next_write(self) -> tuple[str, bool]:
        """The text of the next write and whether it is a snapshot (holding `_changed`)."""
        changes, self._changes = self._changes, []
        if self._append is not None and self._snapshot_size is not None:
            size = sum(len(change) for change in changes) + len(changes) + 1
            if self._logged + size <= 2 * self._snapshot_size + COMPACT_SLACK:
                return "[" + ",".join(changes) + "]", False
        return dumps(self.document), True

    def _sync(self, mine: int) -> None:
        """Wait (holding `_changed`) until change `mine` is durable, writing if no one is."""
        while self._written < mine:
            self._raise_failure()
            if self._writing:
                self._changed.wait()
                continue
            self._writing = True
            target = self._sequence
            text, snapshot = self._next_write()
            failure: BaseException | None = None
            self._changed.release()
            try:
                if snapshot or self._append is None:
                    self._lease.write(text)
                else:
                    self._append(text)
            except BaseException as error:
                failure = error
            finally:
                self._changed.acquire()
                self._writing = False
                self.writes += 1
                if failure is None:
                    self._written = target
                    self._saved(len(text), snapshot=snapshot)
                else:
                    self._failure = failure
                self._changed.notify_all()
        self._raise_failure()

    def _saved(self, size: int, *, snapshot: bool) -> None:
        if snapshot:
            self.snapshots += 1
            self._snapshot_size = size
            self._logged = 0
        else:
            self._logged += size

"""A checkpoint store in PostgreSQL: one database for a fleet, with fenced leases.

Three tables, each keyed by `id`, the SHA-256 of the execution key (a key may be longer than
an index entry may be). `agent_leases (id, key, owner, epoch, expires_at, released)` says
who owns each execution key: taking a key over (when its lease expired or was released)
raises its `epoch`, and the owner renews `expires_at` from a thread of the lease while the
run lives. `agent_checkpoints (id, key, checkpoint, writes, epoch)` holds the journal's
snapshot and `agent_checkpoint_changes (id, seq, change)` the changes logged since. Every
write or append is one statement that changes them only while the lease row still carries
the writer's epoch (renewing the lease in the same transaction); a snapshot drops the
change log in the same statement, and a read takes both in one statement. An owner that
was paused or cut off past its lease and taken over finds its epoch gone: its next write
raises `TUBELESS_AGENT_LEASE_LOST`, and since the journal writes each call's intent before
the call starts, it dispatches nothing more. Expiry is measured by the database's clock, so
workers' clocks need not agree.
"""

from __future__ import annotations

import hashlib
import threading
import typing
import uuid
from typing import TYPE_CHECKING

from tubeless._quote import quote
from tubeless.agent._approvals import checkpoint_pending_approvals
from tubeless.agent._checkpoint_lease import busy_error
from tubeless.agent._durability import KEY_CODE
from tubeless.agent._journal_changes import fold_changes
from tubeless.agent._journal_document import read_checkpoint
from tubeless.agent._store_errors import WRITE_FAILED_CODE
from tubeless.errors import AgentDefinitionError, AgentError, CheckpointStoreError

if TYPE_CHECKING:
    from tubeless._postgres import Session
    from tubeless.errors import PendingApproval

LEASE_LOST_CODE = "TUBELESS_AGENT_LEASE_LOST"
"""A lease was taken over: its owner's writes fail, so it dispatches nothing more."""
_SCHEMA = (
    "SELECT pg_advisory_xact_lock(7470766)",  # processes creating the tables take turns
    "CREATE TABLE IF NOT EXISTS agent_leases ("
    "id TEXT PRIMARY KEY, key TEXT NOT NULL, owner TEXT, epoch BIGINT NOT NULL, "
    "expires_at TIMESTAMPTZ NOT NULL, released BOOLEAN NOT NULL DEFAULT FALSE)",
    "CREATE TABLE IF NOT EXISTS agent_checkpoints ("
    "id TEXT PRIMARY KEY, key TEXT NOT NULL, checkpoint TEXT NOT NULL, writes BIGINT NOT NULL, "
    "epoch BIGINT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS agent_checkpoint_changes ("
    "id TEXT NOT NULL, seq BIGINT NOT NULL, change TEXT NOT NULL, PRIMARY KEY (id, seq))",
)
_TTL = "now() + %(ttl)s * interval '1 second'"
_TAKE = (
    "INSERT INTO agent_leases AS lease (id, key, owner, epoch, expires_at) "
    f"VALUES (%(id)s, %(key)s, %(owner)s, 1, {_TTL}) "
    "ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, epoch = lease.epoch + 1, "
    "expires_at = excluded.expires_at, released = FALSE "
    # the owner's own row: a take-over whose reply was lost is run again on reconnect
    "WHERE lease.released OR lease.expires_at < now() OR lease.owner = excluded.owner "
    "RETURNING epoch"
)
_RENEW = (
    f"UPDATE agent_leases SET expires_at = {_TTL} "
    "WHERE id = %(id)s AND epoch = %(epoch)s AND NOT released RETURNING epoch"
)
_WRITE = (
    f"WITH held AS ({_RENEW}), "
    "written AS (INSERT INTO agent_checkpoints AS saved (id, key, checkpoint, writes, epoch) "
    "SELECT %(id)s, %(key)s, %(text)s, 1, epoch FROM held "
    "ON CONFLICT (id) DO UPDATE SET checkpoint = excluded.checkpoint, "
    "writes = saved.writes + 1, epoch = excluded.epoch, updated_at = now() "
    "RETURNING writes), "
    "dropped AS (DELETE FROM agent_checkpoint_changes "
    "WHERE id = %(id)s AND EXISTS (SELECT 1 FROM held)) "
    "SELECT writes FROM written"
)
_APPEND = (
    f"WITH held AS ({_RENEW}) "
    "INSERT INTO agent_checkpoint_changes AS logged (id, seq, change) "
    "SELECT %(id)s, %(seq)s, %(text)s FROM held "
    # the same change again: an append whose reply was lost is run again on reconnect
    "ON CONFLICT (id, seq) DO UPDATE SET change = excluded.change RETURNING seq"
)
_RELEASE = (
    "UPDATE agent_leases SET released = TRUE, owner = NULL WHERE id = %(id)s AND epoch = %(epoch)s"
)
_TABLES_EXIST = (
    "SELECT to_regclass('agent_leases') IS NOT NULL, "
    "to_regclass('agent_checkpoint_changes') IS NOT NULL"
)
_CHANGES = (
    "ARRAY(SELECT change FROM agent_checkpoint_changes AS logged "
    "WHERE logged.id = saved.id ORDER BY seq)"
)
_NO_CHANGES = "NULL::text[]"
"""In place of `_CHANGES` when inspecting a database no lease of this release opened yet
(it has no change log)."""
_READ = "SELECT checkpoint, {changes} FROM agent_checkpoints AS saved WHERE id = %s"
_KEYS = 'SELECT key FROM agent_checkpoints ORDER BY key COLLATE "C"'
"""Sorted as Python sorts strings (by code point, which is UTF-8 byte order)."""
_EXPIRED = (
    "SELECT lease.key, saved.checkpoint, {changes} FROM agent_leases AS lease "
    "LEFT JOIN agent_checkpoints AS saved ON saved.id = lease.id "
    "WHERE NOT lease.released AND lease.expires_at < now() - %s * interval '1 second' "
    'ORDER BY lease.key COLLATE "C"'
)


def _seconds(value: object, name: str) -> float:
    if type(value) not in (int, float) or not 0 < value < 86_400:  # type: ignore[operator]
        raise AgentDefinitionError(f"{name} must be a number of seconds in (0, 86400)")
    return float(value)  # type: ignore[arg-type]


def _write_failed(message: str) -> AgentError:
    return AgentError(f"Checkpoint store: {message}", code=WRITE_FAILED_CODE)


def lease_lost(key: str, store: str) -> CheckpointStoreError:
    """The error of an owner whose lease of `key` was taken over."""
    return CheckpointStoreError(
        f"The lease of execution {quote(key)} was taken over by another worker; "
        "this one stops and dispatches nothing more",
        code=LEASE_LOST_CODE,
        store=store,
        key=key,
    )


def _id(key: str) -> str:
    """The row id of an execution key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _folded(row: tuple[object, ...]) -> str:
    """The checkpoint of a `(snapshot, changes)` row with its change log replayed.

    Raises:
        AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a damaged change log.
    """
    snapshot, changes = row
    logged = changes if isinstance(changes, list) else []
    return fold_changes(str(snapshot), [str(change) for change in logged])


def _finished(row: tuple[object, ...]) -> bool:
    """Whether a checkpoint's root agent saved a result or a terminal failure."""
    try:
        return row[0] is not None and read_checkpoint(_folded(row)).finished
    except AgentError:
        return False  # a corrupt checkpoint is listed: someone must look at it


@typing.final
class PostgresCheckpointStore:
    """Checkpoints in PostgreSQL, leased per key with fenced leases, for a fleet of workers.

    Args:
        dsn: a libpq connection string or `postgresql://` URL. The tables
            `agent_leases` and `agent_checkpoints` are created on first use.
        lease_seconds: the lease's time to live; a worker that neither writes nor renews
            for this long (it died, froze or lost the network) can be taken over.
        renew_seconds: how often a live lease is renewed (default: a third of
            `lease_seconds`, so two renewals may fail before it runs out).

    Each lease holds one connection and one renewal thread, both ended by `close()`. A
    connection that drops is opened again (for up to 10 seconds) and the statement run
    again against what the database holds.

    Raises:
        AgentDefinitionError: for a lease or renewal time that is not a positive number
            of seconds, or a renewal not shorter than the lease.
        MissingExtraError: `TUBELESS_EXTRA_MISSING` without the `postgres` extra.
    """

    def __init__(
        self, dsn: str, *, lease_seconds: float = 30.0, renew_seconds: float | None = None
    ) -> None:
        from tubeless._postgres import load_psycopg

        load_psycopg("PostgresCheckpointStore")
        self.lease_seconds = _seconds(lease_seconds, "lease_seconds")
        self.renew_seconds = (
            self.lease_seconds / 3
            if renew_seconds is None
            else _seconds(renew_seconds, "renew_seconds")
        )
        if self.renew_seconds >= self.lease_seconds:
            raise AgentDefinitionError("renew_seconds must be shorter than lease_seconds")
        self._dsn = dsn
        self._ready = False
        self._ready_lock = threading.Lock()

    def __repr__(self) -> str:
        from tubeless._postgres import redact

        return f"PostgresCheckpointStore({redact(self._dsn)!r})"

    def _session(self) -> Session:
        from tubeless._postgres import Session

        session = Session(self._dsn, name="tubeless-checkpoints", fail=_write_failed)
        with self._ready_lock:
            if not self._ready:
                try:
                    session.transaction([(statement, None) for statement in _SCHEMA])
                except BaseException:
                    session.close()
                    raise
                self._ready = True
        return session

    def acquire(self, key: str) -> PostgresLease:
        """Lease `key`: take it when it is new, released, or its lease expired.

        Raises:
            AgentError: `TUBELESS_AGENT_EXECUTION_BUSY` while another live lease holds
                `key`; `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when the database cannot
                be reached; `TUBELESS_AGENT_INVALID_CHECKPOINT_KEY` for a key holding NUL.
        """
        if "\x00" in key:
            raise AgentError(
                f"Checkpoint key {quote(key)} holds NUL, which PostgreSQL text cannot store",
                code=KEY_CODE,
            )
        session = self._session()
        owner = uuid.uuid4().hex
        try:
            rows = session.execute(
                _TAKE, {"id": _id(key), "key": key, "owner": owner, "ttl": self.lease_seconds}
            )
        except BaseException:
            session.close()
            raise
        if not rows:
            session.close()
            raise busy_error(key)
        return PostgresLease(self, session, key, int(rows[0][0]))

    def _query(self, sql: str, parameters: tuple[object, ...]) -> list[tuple[object, ...]]:
        """Run an inspection query; a database without the tables has no rows (and gets
        none: inspecting creates nothing)."""
        from tubeless._postgres import Session

        session = Session(self._dsn, name="tubeless-checkpoints", fail=_write_failed)
        try:
            tables, logs = session.execute(_TABLES_EXIST)[0]
            if not tables:
                return []
            return session.execute(
                sql.format(changes=_CHANGES if logs else _NO_CHANGES), parameters
            )
        finally:
            session.close()

    def keys(self) -> list[str]:
        """Every key with a saved checkpoint, sorted."""
        rows = self._query(_KEYS, ())
        return [str(row[0]) for row in rows]

    def read(self, key: str) -> str | None:
        """The checkpoint saved under `key`, read without leasing it (for inspection)."""
        if "\x00" in key:
            return None  # no key holds NUL (see `acquire`)
        rows = self._query(_READ, (_id(key),))
        return _folded(rows[0]) if rows else None

    def recoverable(self, *, older_than: float = 0.0) -> list[str]:
        """Keys whose lease expired at least `older_than` seconds ago before they finished.

        Such an execution's worker died or froze: acquiring the key (running the agent
        again with it) resumes it. A key whose run ended, or whose lease was released (a
        run that was cancelled or waits for approval), is not listed.
        """
        rows = self._query(_EXPIRED, (float(older_than),))
        return [str(row[0]) for row in rows if not _finished(row[1:])]

    def pending_approvals(self, key: str) -> tuple[PendingApproval, ...]:
        """The calls of execution `key` waiting for approval, read without leasing it.

        Raises:
            AgentError: `TUBELESS_AGENT_CHECKPOINT_INVALID` for a corrupt checkpoint.
        """
        return checkpoint_pending_approvals(self.read(key))


class PostgresLease:
    """One key's fenced lease: a connection, an epoch and a renewal thread."""

    def __init__(self, store: PostgresCheckpointStore, session: Session, key: str, epoch: int):
        self._store = store
        self._session = session
        self._key = key
        self.epoch = epoch
        """The lease's fencing token: raised by every take-over of the key."""
        self._lost = False
        self._logged: int | None = None
        """Changes this lease logged since its last snapshot (`None` before its first)."""
        self._stop = threading.Event()
        self._closed = False
        self._renewer = threading.Thread(
            target=self._renew_while_open, name="tubeless-lease", daemon=True
        )
        self._renewer.start()

    def _parameters(self, **more: object) -> dict[str, object]:
        return {
            "id": _id(self._key),
            "key": self._key,
            "epoch": self.epoch,
            "ttl": self._store.lease_seconds,
            **more,
        }

    def _renew_while_open(self) -> None:
        while not self._stop.wait(self._store.renew_seconds):
            try:
                if not self._session.execute(_RENEW, self._parameters()):
                    self._lost = True
                    return
            except AgentError:
                continue  # unreachable for now; a write finds out for sure

    def read(self) -> str | None:
        """The saved checkpoint text, or `None`."""
        rows = self._session.execute(_READ.format(changes=_CHANGES), (_id(self._key),))
        return _folded(rows[0]) if rows else None

    def write(self, text: str) -> None:
        """Replace the checkpoint, only while this lease's epoch still holds the key.

        Raises:
            AgentError: `TUBELESS_AGENT_LEASE_LOST` when another owner took the key over;
                `TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED` when the database refuses or
                cannot be reached.
        """
        self._fenced(_WRITE, text)
        self._logged = 0

    def append(self, change: str) -> None:
        """Add `change` to the checkpoint's change log, only while this lease holds the key.

        Called only after this lease's first `write` (whose snapshot it follows).

        Raises:
            AgentError: as `write`.
        """
        if self._logged is None:
            raise _write_failed("a change was logged before the lease's first snapshot")
        self._fenced(_APPEND, change, seq=self._logged + 1)
        self._logged += 1

    def _fenced(self, sql: str, text: str, **more: object) -> None:
        if self._closed:
            raise _write_failed("the lease is closed")
        if self._lost or not self._session.execute(sql, self._parameters(text=text, **more)):
            self._lost = True
            raise lease_lost(self._key, repr(self._store))

    def close(self) -> None:
        """Stop renewing, release the key (if still ours) and close the connection."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._renewer.join()
        try:
            if not self._lost:
                self._session.execute(_RELEASE, self._parameters())
        except AgentError:
            pass  # the lease runs out by itself
        finally:
            self._session.close()

"""The journal's change log: appends instead of rewrites, folded back into the same checkpoint.

A store that can `append` keeps a snapshot and the changes logged since; every read
replays them. These tests hold that to the whole-document journal (the same runs on a
store without `append`, at every write a process could have died after), to a bounded
log in a real SQLite file, and to the damage and upgrade cases of the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tubeless
from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool
from tubeless.agent._journal_changes import fold_changes, state_changes
from tubeless.agent._journal_writer import COMPACT_SLACK, Journal
from tubeless.errors import AgentError, CheckpointStoreError
from tubeless.pipeline import Pipeline, PipelineRun
from tubeless.testing import MemoryCheckpointStore

sys.path.insert(0, str(Path(__file__).parent))

import journal_growth_agent

KEY = "job-1"
INVALID = "TUBELESS_AGENT_CHECKPOINT_INVALID"
TWO_CALLS = {
    "kind": "continue",
    "calls": [
        {"id": "a", "tool": "add", "input": {"x": 1}},
        {"id": "b", "tool": "send", "input": {"x": 2}},
    ],
}


class Ran:
    """The inputs of every handler that ran, across runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[int] = []

    def handler(self, value: Any, context: Any) -> str:
        with self.lock:
            self.calls.append(value["x"])
        return "v" * 100 * int(value["x"])


def build(store: Any, ran: Ran, *, turns: int = 3, approval: bool = False) -> Pipeline:
    """An agent whose state accumulates every outcome, `turns` turns of two calls."""

    def decide(state: Any, context: Any) -> dict[str, Any]:
        if context.turn > turns:
            return {"kind": "finish", "result": {"seen": len(state["seen"])}}
        return TWO_CALLS

    def tool(needs_approval: bool) -> Any:
        return define_tool(
            description="Use x",
            input_schema={"type": "object"},
            output_schema={"type": "string"},
            run=ran.handler,
            needs_approval=needs_approval,
        )

    return define_agent(
        id="changes",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"seen": [], "turns": 0},
        decide=decide,
        reduce=lambda state, outcomes: {
            "seen": [*state["seen"], *outcomes],
            "turns": state["turns"] + 1,
        },
        tools={"add": tool(False), "send": tool(approval)},
        limits={
            "max_concurrency": 1,
            "max_turns": turns + 1,
            "max_calls": 2 * turns,
            "max_decisions": turns + 1,
        },
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


def document(text: str | None) -> dict[str, Any]:
    """A saved checkpoint without its execution id and run ids (fresh ones per run)."""
    assert text is not None
    saved: dict[str, Any] = json.loads(text, object_hook=_without_run_ids)
    saved.pop("id")
    return saved


def _without_run_ids(value: dict[str, Any]) -> dict[str, Any]:
    return {name: "<run>" if name == "agentRunId" else item for name, item in value.items()}


def codes(run: PipelineRun) -> list[str]:
    found: list[str] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        found += [link[key] for key in ("code", "sourceCode") if isinstance(link.get(key), str)]
        link = link.get("cause")
    return found


# -- the document's changes -------------------------------------------------------------


def test_a_state_that_grows_logs_only_its_new_items() -> None:
    """A list that only grew is logged as an `add` of its new items, nothing else."""
    old = {"seen": (1, 2), "n": 1, "deep": {"same": [1]}}
    new = {"seen": (1, 2, 3), "n": 2, "deep": old["deep"]}
    changes: list[str] = []
    state_changes(("s",), old, new, changes)
    assert [json.loads(change) for change in changes] == [
        ["add", ["s", "seen"], [3]],
        ["set", ["s", "n"], 2],
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"a": 1, "b": 2}, {"a": 1}),  # a key removed
        ([1, 2], [1, 3, 4]),  # an item changed
        ([1], [True, 2]),  # equal in Python, not in JSON
        ([1.0], [1]),
        ({"a": 1}, [1]),
    ],
)
def test_anything_but_growth_is_set_whole(old: Any, new: Any) -> None:
    """A change that is not growth sets the value whole, and replays to the new value."""
    changes: list[str] = []
    state_changes(("s",), old, new, changes)
    assert [json.loads(change)[0] for change in changes] == ["set"]
    folded = fold_changes(json.dumps({"s": old}), [f"[{change}]" for change in changes])
    assert json.loads(folded) == {"s": new} and folded == json.dumps(
        {"s": new}, separators=(",", ":")
    )


@pytest.mark.parametrize(
    "change",
    [
        "not json",
        '{"set": 1}',
        '[["set", [], 1]]',
        '[["drop", ["a"], 1]]',
        '[["set", ["missing", "x"], 1]]',
        '[["set", ["list", 5], 1]]',
        '[["add", ["a"], [1]]]',
        '[["add", ["list"], 1]]',
    ],
)
def test_a_change_that_does_not_fit_is_invalid(change: str) -> None:
    """Malformed changes, or ones whose path the checkpoint lacks, are `..._INVALID`."""
    with pytest.raises(AgentError) as raised:
        fold_changes('{"a": 1, "list": [0]}', [change])
    assert raised.value.code == INVALID


# -- the same checkpoint as a whole-document journal, at every write --------------------


def run_to_the_end(store: Any, *, approval: bool) -> list[int]:
    """Run (approving what waits) until the execution finishes; the handlers' inputs."""
    ran = Ran()
    agent = build(store, ran, approval=approval)
    run = agent.run({})
    for _ in range(5):
        if run.status == "completed":
            break
        decisions = {p.call_id: tubeless.edit({"x": 3}) for p in run.pending_approvals}
        run = agent.run({}, context={"approvals": decisions})
    assert run.status == "completed", run.errors
    return ran.calls


@pytest.mark.parametrize("approval", [False, True])
def test_every_saved_point_equals_the_whole_document_journal(approval: bool) -> None:
    """Killed after any write, a store with a change log holds exactly the checkpoint the
    whole-document journal holds at that write, and the resumed runs end the same."""
    whole_store = MemoryCheckpointStore(changes=False)
    assert run_to_the_end(whole_store, approval=approval)
    total = whole_store.writes
    assert total > 10
    for writes in range(1, total):
        stores = [MemoryCheckpointStore(fail_after=writes, changes=flag) for flag in (False, True)]
        for store in stores:
            run = build(store, Ran(), approval=approval).run({})
            assert run.status == "failed"
        whole, logged = (document(store.checkpoint(KEY)) for store in stores)
        assert logged == whole, f"after write {writes}"
        ends = []
        for store in stores:
            store.fail_after = None
            run_to_the_end(store, approval=approval)
            ends.append(document(store.checkpoint(KEY)))
        assert ends[0] == ends[1]


# -- a real SQLite file -----------------------------------------------------------------


def test_a_long_run_appends_and_its_log_stays_bounded(tmp_path: Path) -> None:
    """Most writes of a growing run are appends; the log never outgrows its snapshot by
    more than the compaction rule, and the file reads back as the whole journal does."""
    path = tmp_path / "checkpoints.db"
    run = build(SqliteCheckpointStore(path), Ran(), turns=40).run({})
    assert run.status == "completed", run.errors
    whole_store = MemoryCheckpointStore(changes=False)
    assert build(whole_store, Ran(), turns=40).run({}).status == "completed"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        snapshots, snapshot_bytes = connection.execute(
            "SELECT writes, length(checkpoint) FROM agent_checkpoints"
        ).fetchone()
        logged, logged_bytes = connection.execute(
            "SELECT count(*), coalesce(sum(length(change)), 0) FROM agent_checkpoint_changes"
        ).fetchone()
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 2
    assert snapshots + logged < whole_store.writes  # appends since the last snapshot
    assert snapshots <= whole_store.writes // 10
    assert logged_bytes <= 2 * snapshot_bytes + COMPACT_SLACK
    assert document(SqliteCheckpointStore(path).read(KEY)) == document(whole_store.checkpoint(KEY))


def waiting_file(path: Path) -> tuple[SqliteCheckpointStore, Ran]:
    """A store whose execution waits for approval of call `b`, with a change log."""
    store, ran = SqliteCheckpointStore(path), Ran()
    run = build(store, ran, approval=True).run({})
    assert [p.call_id for p in run.pending_approvals] == ["b"]
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT count(*) FROM agent_checkpoint_changes").fetchone()[0]
    return store, ran


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("UPDATE agent_checkpoint_changes SET change = 'not json'", "is not JSON"),
        ('UPDATE agent_checkpoint_changes SET change = \'[["set", ["nowhere", 1], 2]]\'', "fit"),
        ("UPDATE agent_checkpoint_changes SET change = CAST(X'5BC328FF5D' AS TEXT)", "UTF-8"),
        ("DELETE FROM agent_checkpoints", "without its checkpoint"),
    ],
)
def test_a_damaged_change_log_is_a_coded_error_and_runs_nothing(
    tmp_path: Path, statement: str, problem: str
) -> None:
    """A change log that does not replay gives `..._CHECKPOINT_INVALID` naming the store
    and the key, from a run (before any callback), `read` and `pending_approvals`."""
    path = tmp_path / "checkpoints.db"
    store, ran = waiting_file(path)
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(statement)
    before = list(ran.calls)
    run = build(store, ran, approval=True).run({}, context={"approvals": {"b": tubeless.approve()}})
    assert run.status == "failed"
    assert INVALID in codes(run)
    assert ran.calls == before
    for read in (store.read, store.pending_approvals):
        with pytest.raises(CheckpointStoreError) as raised:
            read(KEY)
        assert (raised.value.code, raised.value.store, raised.value.key) == (
            INVALID,
            str(path),
            KEY,
        )
        assert problem in str(raised.value)


def test_a_file_of_the_first_layout_is_read_as_is_and_upgraded_by_a_lease(tmp_path: Path) -> None:
    """A version 1 file (snapshots only) is inspected without change, and the first lease
    adds the change log and resumes the execution."""
    whole_store = MemoryCheckpointStore(changes=False)
    ran = Ran()
    waiting = build(whole_store, ran, approval=True).run({})
    assert [p.call_id for p in waiting.pending_approvals] == ["b"]
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "CREATE TABLE agent_checkpoints (key TEXT PRIMARY KEY NOT NULL, "
            "checkpoint TEXT NOT NULL, writes INTEGER NOT NULL)"
        )
        connection.execute(
            "INSERT INTO agent_checkpoints VALUES (?, ?, 1)", (KEY, whole_store.checkpoint(KEY))
        )
        connection.execute("PRAGMA user_version = 1")
    store = SqliteCheckpointStore(path)
    assert store.read(KEY) == whole_store.checkpoint(KEY)
    assert [p.call_id for p in store.pending_approvals(KEY)] == ["b"]
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 1
    run_to_the_end(store, approval=True)
    run_to_the_end(whole_store, approval=True)
    assert document(store.read(KEY)) == document(whole_store.checkpoint(KEY))
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_file_of_a_later_layout_is_refused(tmp_path: Path) -> None:
    """A file whose layout is newer than this release is `..._INVALID`, left as it is."""
    path = tmp_path / "new.db"
    waiting_file(path)
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("PRAGMA user_version = 3")
    with pytest.raises(CheckpointStoreError) as raised:
        SqliteCheckpointStore(path).read(KEY)
    assert raised.value.code == INVALID
    assert "version 3, expected 2" in str(raised.value)


# -- PostgreSQL -------------------------------------------------------------------------

EXPIRE = "UPDATE agent_leases SET expires_at = now() - interval '1 second' WHERE key = %s"


def test_a_postgres_lease_taken_over_can_no_longer_append(
    postgres_url: str, postgres_server: Any
) -> None:
    """An append is fenced as a write is: after a take-over the old owner's append raises
    `TUBELESS_AGENT_LEASE_LOST`, and the new owner's snapshot drops the old log."""
    from tubeless import PostgresCheckpointStore

    store = PostgresCheckpointStore(postgres_url)
    old = store.acquire("k")
    old.write('{"log": []}')
    old.append('[["add", ["log"], [1]]]')
    old.append('[["add", ["log"], [2]]]')
    assert store.read("k") == '{"log":[1,2]}'
    postgres_server.execute(postgres_url, EXPIRE, ("k",))
    new = store.acquire("k")
    with pytest.raises(AgentError) as raised:
        old.append('[["add", ["log"], [3]]]')
    assert raised.value.code == "TUBELESS_AGENT_LEASE_LOST"
    old.close()
    assert new.read() == '{"log":[1,2]}'
    with pytest.raises(AgentError) as raised:
        new.append('[["add", ["log"], [4]]]')  # before its own snapshot
    assert raised.value.code == "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"
    new.write('{"log": [9]}')
    new.append('[["add", ["log"], [10]]]')
    new.close()
    assert store.read("k") == '{"log":[9,10]}'
    assert postgres_server.execute(
        postgres_url, "SELECT count(*) FROM agent_checkpoint_changes", ()
    ) == [(1,)]


def test_a_durable_agent_on_postgres_saves_what_the_whole_journal_saves(postgres_url: str) -> None:
    """A run with approvals on PostgreSQL ends with the checkpoint the whole-document
    journal ends with."""
    from tubeless import PostgresCheckpointStore

    store = PostgresCheckpointStore(postgres_url)
    whole_store = MemoryCheckpointStore(changes=False)
    for each in (store, whole_store):
        run_to_the_end(each, approval=True)
    assert document(store.read(KEY)) == document(whole_store.checkpoint(KEY))


# -- killed at any moment ---------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_again_and_again_resumes_from_snapshots_and_logs(tmp_path: Path) -> None:
    """SIGKILLed at arbitrary moments (appends and snapshot folds alike), each resume reads
    an intact checkpoint: the run ends with every turn's outcomes, no unsafe call ran
    twice, and the log stays within the compaction bound."""
    store, effects = tmp_path / "checkpoints.db", tmp_path / "effects.txt"
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    script = str(Path(__file__).parent / "journal_growth_agent.py")
    chance = random.Random(7)
    kills = 0
    for _ in range(8):
        done = len(effects.read_text("utf-8").splitlines()) if effects.exists() else 0
        target = done + chance.randint(1, 8)
        worker = subprocess.Popen(
            [sys.executable, script, str(store), str(effects)],
            env=environment,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120  # a guard against a hung worker, not a timing
        while worker.poll() is None and time.monotonic() < deadline:
            if effects.exists() and len(effects.read_text("utf-8").splitlines()) >= target:
                break
            time.sleep(0.002)
        time.sleep(chance.uniform(0, 0.03))  # somewhere in the writes that follow
        if worker.poll() is not None:
            break
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        kills += 1
    assert kills >= 2
    assert effects.read_text("utf-8")  # the killed workers got somewhere
    run = journal_growth_agent.build(str(store), str(effects)).run({})
    assert run.status == "completed", run.errors
    turns, calls = journal_growth_agent.TURNS, journal_growth_agent.CALLS
    assert run.value == turns * calls
    lines = effects.read_text("utf-8").splitlines()
    assert len(lines) == len(set(lines))  # an unsafe call never runs twice
    saved = json.loads(SqliteCheckpointStore(store).read("growth") or "")
    seen = saved["agent"]["execution"]["state"]["seen"]
    assert [(o["id"]) for o in seen] == [f"c{i}" for _ in range(turns) for i in range(calls)]
    for outcome in seen:
        assert outcome["ok"] or outcome["error"]["code"] == "TUBELESS_AGENT_CALL_INTERRUPTED"
    with contextlib.closing(sqlite3.connect(store)) as connection:
        snapshot = connection.execute("SELECT length(checkpoint) FROM agent_checkpoints").fetchone()
        logged = connection.execute(
            "SELECT coalesce(sum(length(change)), 0) FROM agent_checkpoint_changes"
        ).fetchone()
    assert logged[0] <= 2 * snapshot[0] + COMPACT_SLACK


def test_the_writer_saves_a_snapshot_first_and_folds_the_log_when_it_outgrows_it(
    tmp_path: Path,
) -> None:
    """The first write is a snapshot, later ones appends; a log past twice its snapshot
    (plus the slack) becomes a new snapshot, and the file always reads as the document."""
    path = tmp_path / "checkpoints.db"
    lease = SqliteCheckpointStore(path).acquire(KEY)
    journal = Journal(lease, {"log": []}, str(path), KEY)
    item = "x" * 1500

    def grow() -> None:
        journal.document["log"].append(item)
        journal.record_add(("log",), [item])

    reader = sqlite3.connect(path)
    try:
        for number in range(1, 201):
            journal.change(grow)
            assert journal.writes == number
            assert lease.read() == json.dumps(journal.document, separators=(",", ":"))
            snapshot = reader.execute("SELECT length(checkpoint) FROM agent_checkpoints")
            logged = reader.execute(
                "SELECT coalesce(sum(length(change) + 1), 0) FROM agent_checkpoint_changes"
            )
            sizes = (snapshot.fetchone()[0], logged.fetchone()[0])
            assert sizes[1] <= 2 * sizes[0] + COMPACT_SLACK
            if number == 1:
                assert (journal.snapshots, sizes[1]) == (1, 0)
    finally:
        reader.close()
        journal.close()
    assert 2 <= journal.snapshots < 30


def test_a_postgres_database_of_the_first_layout_is_inspected_and_upgraded(
    postgres_url: str, postgres_server: Any
) -> None:
    """A database made before the change log is read as it is (no table is created by
    inspecting it), and the first lease adds the log and resumes the execution."""
    from tubeless import PostgresCheckpointStore
    from tubeless.agent._postgres_checkpoints import _SCHEMA, _id

    whole_store, ran = MemoryCheckpointStore(changes=False), Ran()
    assert build(whole_store, ran, approval=True).run({}).pending_approvals
    text = whole_store.checkpoint(KEY)
    for statement in _SCHEMA[1:3]:  # the leases and snapshots of the first layout
        postgres_server.execute(postgres_url, statement)
    postgres_server.execute(
        postgres_url,
        "INSERT INTO agent_checkpoints (id, key, checkpoint, writes, epoch) "
        "VALUES (%s, %s, %s, 1, 1)",
        (_id(KEY), KEY, text),
    )
    store = PostgresCheckpointStore(postgres_url)
    assert (store.keys(), store.read(KEY)) == ([KEY], text)
    assert [p.call_id for p in store.pending_approvals(KEY)] == ["b"]
    assert store.recoverable() == []
    exists = "SELECT to_regclass('agent_checkpoint_changes') IS NOT NULL"
    assert postgres_server.execute(postgres_url, exists) == [(False,)]
    run_to_the_end(store, approval=True)
    run_to_the_end(whole_store, approval=True)
    assert document(store.read(KEY)) == document(whole_store.checkpoint(KEY))
    assert postgres_server.execute(postgres_url, exists) == [(True,)]

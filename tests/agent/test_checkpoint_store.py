"""`SqliteCheckpointStore`: its own private file, durable writes, one live lease per key."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool
from tubeless.agent import CheckpointStore
from tubeless.errors import AgentError
from tubeless.testing import MemoryCheckpointStore, scripted_decide


def test_a_lease_reads_what_it_wrote_and_a_new_lease_reads_it_back(tmp_path: Path) -> None:
    store = SqliteCheckpointStore(tmp_path / "sub" / "checkpoints.db")
    assert (store.keys(), store.read("k")) == ([], None)
    assert not (tmp_path / "sub").exists()  # inspecting creates nothing
    lease = store.acquire("k")
    assert lease.read() is None
    lease.write("one")
    lease.write("two")
    lease.close()
    lease.close()  # closing twice is harmless
    again = SqliteCheckpointStore(tmp_path / "sub" / "checkpoints.db").acquire("k")
    try:
        assert again.read() == "two"
    finally:
        again.close()
    assert store.keys() == ["k"]
    assert store.read("k") == "two"


def test_the_file_is_private_in_wal_mode_with_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    lease = SqliteCheckpointStore(path).acquire("k")
    lease.write("text")
    for sidecar in ("-wal", "-shm"):
        assert stat.S_IMODE(path.with_name(path.name + sidecar).stat().st_mode) == 0o600
    lease.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
    assert "agent_checkpoints" in tables and "pipeline_run_events" not in tables
    locks = list((tmp_path / "checkpoints.db-locks").iterdir())
    assert [stat.S_IMODE(lock.stat().st_mode) for lock in locks] == [0o600]


@pytest.mark.parametrize("make", [MemoryCheckpointStore, None])
def test_a_second_lease_of_a_key_is_busy_until_the_first_closes(
    tmp_path: Path, make: object
) -> None:
    store: CheckpointStore = (
        MemoryCheckpointStore() if make else SqliteCheckpointStore(tmp_path / "c.db")
    )
    first = store.acquire("k")
    other = store.acquire("other")  # other keys stay free
    with pytest.raises(AgentError) as raised:
        store.acquire("k")
    assert raised.value.code == "TUBELESS_AGENT_EXECUTION_BUSY"
    first.close()
    other.close()
    store.acquire("k").close()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from tubeless import SqliteCheckpointStore
    lease = SqliteCheckpointStore(sys.argv[1]).acquire("shared")
    lease.write("from the holder")
    print("held", flush=True)
    time.sleep(120)
    """
)


def test_a_key_held_by_another_process_is_busy_and_free_once_it_is_killed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        store = SqliteCheckpointStore(path)
        with pytest.raises(AgentError) as raised:
            store.acquire("shared")
        assert raised.value.code == "TUBELESS_AGENT_EXECUTION_BUSY"
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        lease = store.acquire("shared")  # at once: the kernel dropped the dead lock
        try:
            assert lease.read() == "from the holder"
        finally:
            lease.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_durable_agent_resumes_from_a_sqlite_store(tmp_path: Path) -> None:
    ran: list[int] = []

    def add(value: dict[str, int], context: object) -> int:
        ran.append(value["x"])
        return value["x"]

    def agent(store: SqliteCheckpointStore) -> object:
        return define_agent(
            id="sq",
            input_schema={"type": "object"},
            result_schema={"type": "object"},
            initial_state=lambda options: {"n": 0},
            decide=scripted_decide(
                [
                    {
                        "kind": "continue",
                        "calls": [{"id": "a", "tool": "add", "input": {"x": 4}}],
                    },
                    lambda state, context: {"kind": "finish", "result": dict(state)},
                ]
            ),
            reduce=lambda state, outcomes: {"n": state["n"] + outcomes[0]["value"]},
            tools={
                "add": define_tool(
                    description="Add",
                    input_schema={"type": "object"},
                    output_schema={"type": "integer"},
                    run=add,
                )
            },
            implementation_version="1",
            durability=Durability(store=store, key="job"),
        )

    store = SqliteCheckpointStore(tmp_path / "c.db")
    first = agent(store).run({})  # type: ignore[attr-defined]
    assert first.value == {"n": 4}
    second = agent(SqliteCheckpointStore(tmp_path / "c.db")).run({})  # type: ignore[attr-defined]
    assert second.value == {"n": 4}
    assert ran == [4]

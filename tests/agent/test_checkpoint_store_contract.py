"""The checkpoint-store contract, run against every real store: SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tubeless import (
    Durability,
    PostgresCheckpointStore,
    SqliteCheckpointStore,
    approve,
    define_agent,
    define_tool,
)
from tubeless.agent import CheckpointStore
from tubeless.errors import AgentError
from tubeless.testing import scripted_decide

MakeStore = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    """A factory of store objects over one fresh database (each call: another handle)."""
    if request.param == "sqlite":
        return lambda: SqliteCheckpointStore(tmp_path / "checkpoints.db")
    url = request.getfixturevalue("postgres_url")
    return lambda: PostgresCheckpointStore(url)


def test_a_lease_reads_what_it_wrote_and_a_new_lease_reads_it_back(make_store: MakeStore) -> None:
    """A lease's writes replace the text, and a later lease from another handle reads it."""
    store = make_store()
    assert isinstance(store, CheckpointStore)
    lease = store.acquire("k")
    assert lease.read() is None
    lease.write("one")
    lease.write("two")
    lease.close()
    lease.close()  # closing twice is harmless
    again = make_store().acquire("k")
    try:
        assert again.read() == "two"
    finally:
        again.close()
    assert store.keys() == ["k"]
    assert (store.read("k"), store.read("missing")) == ("two", None)


def test_a_second_lease_of_a_key_is_busy_until_the_first_closes(make_store: MakeStore) -> None:
    """One live lease per key, whichever handle asks; other keys stay free."""
    first = make_store().acquire("k")
    other = make_store().acquire("other")
    with pytest.raises(AgentError) as raised:
        make_store().acquire("k")
    assert raised.value.code == "TUBELESS_AGENT_EXECUTION_BUSY"
    first.close()
    other.close()
    make_store().acquire("k").close()


def test_a_closed_lease_refuses_to_write(make_store: MakeStore) -> None:
    """Writing through a closed lease is a coded write failure, and nothing is saved."""
    store = make_store()
    lease = store.acquire("k")
    lease.close()
    with pytest.raises(AgentError) as raised:
        lease.write("late")
    assert raised.value.code == "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"
    assert store.read("k") is None


def test_threads_racing_for_one_key_get_exactly_one_lease(make_store: MakeStore) -> None:
    """Of eight threads acquiring one key at once, one leases it and seven are busy."""
    barrier = threading.Barrier(8)
    outcomes: list[object] = []
    lock = threading.Lock()

    def contend() -> None:
        store = make_store()
        barrier.wait()
        try:
            lease: object = store.acquire("race")
        except AgentError as error:
            lease = error.code
        with lock:
            outcomes.append(lease)

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    leases = [outcome for outcome in outcomes if not isinstance(outcome, str)]
    assert len(leases) == 1
    assert sorted(map(str, set(outcomes) - set(leases))) == ["TUBELESS_AGENT_EXECUTION_BUSY"]
    leases[0].close()  # type: ignore[attr-defined]


def _agent(store: Any, ran: list[int], *, needs_approval: bool = False) -> Any:
    def add(value: dict[str, int], context: object) -> int:
        ran.append(value["x"])
        return value["x"]

    return define_agent(
        id="contract",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"n": 0},
        decide=scripted_decide(
            [
                {"kind": "continue", "calls": [{"id": "a", "tool": "add", "input": {"x": 4}}]},
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
                needs_approval=needs_approval,
            )
        },
        implementation_version="1",
        durability=Durability(store=store, key="job"),
    )


def test_a_durable_agent_resumes_from_the_store(make_store: MakeStore) -> None:
    """A finished execution is read back by the next run with its key: the tool runs once."""
    ran: list[int] = []
    assert _agent(make_store(), ran).run({}).value == {"n": 4}
    assert _agent(make_store(), ran).run({}).value == {"n": 4}
    assert ran == [4]


def test_pending_approvals_are_listed_without_a_lease_and_decided_later(
    make_store: MakeStore,
) -> None:
    """A call waiting for approval is listed from any handle, and an approval runs it."""
    ran: list[int] = []
    waiting = _agent(make_store(), ran, needs_approval=True).run({})
    assert waiting.status == "failed"
    store = make_store()
    pending = store.pending_approvals("job")
    assert [(call.call_id, call.tool) for call in pending] == [("a", "add")]
    assert store.pending_approvals("missing") == ()
    done = _agent(make_store(), ran, needs_approval=True).run(
        {}, context={"approvals": {"a": approve()}}
    )
    assert (done.value, ran, store.pending_approvals("job")) == ({"n": 4}, [4], ())


def test_the_longest_keys_lease_write_and_list(make_store: MakeStore) -> None:
    """Keys of 4096 characters, multibyte ones too, work like short ones and sort by code point."""
    import random

    rng = random.Random(7)
    keys = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(4096)),
        "".join(rng.choice("äöüßσπ漢字😀") for _ in range(4096)),
        "Z",
    ]
    store = make_store()
    for key in keys:
        lease = store.acquire(key)
        lease.write(f"for {key[:3]}")
        with pytest.raises(AgentError):
            make_store().acquire(key)
        lease.close()
    assert store.keys() == sorted(keys)
    assert [store.read(key) for key in keys] == [f"for {key[:3]}" for key in keys]


def test_a_durable_run_leaves_no_thread_behind(make_store: MakeStore) -> None:
    """After a durable run the live thread count is what it was (lease threads included)."""
    baseline = threading.active_count()
    assert _agent(make_store(), []).run({}).value == {"n": 4}
    assert threading.active_count() == baseline

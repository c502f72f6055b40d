"""`PostgresCheckpointStore`: fenced leases, take-overs, dropped connections, a fleet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tubeless import PostgresCheckpointStore
from tubeless.errors import AgentDefinitionError, AgentError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import postgres_worker  # noqa: E402

WORKER = str(HERE / "postgres_worker.py")
EXPIRE = "UPDATE agent_leases SET expires_at = now() - interval '1 second' WHERE key = %s"


def _wait_until(ready: Callable[[], bool], what: str) -> None:
    """Poll `ready` until it holds (a guard against a hung test, not a timed assertion)."""
    deadline = time.monotonic() + 120
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


def _first_agent_code(codes: list[str]) -> str:
    """The outermost agent code of a run's error chain (the one the run reports)."""
    return next(code for code in codes if code.startswith("TUBELESS_AGENT_"))


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8").splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("lease", "renew"), [(0, None), (-1.0, None), (True, None), (10.0, 10.0), (10.0, "1")]
)
def test_bad_lease_times_are_definition_errors(lease: Any, renew: Any) -> None:
    """Lease and renewal times must be positive seconds, the renewal shorter than the lease."""
    with pytest.raises(AgentDefinitionError):
        PostgresCheckpointStore("postgresql://nowhere", lease_seconds=lease, renew_seconds=renew)


def test_without_psycopg_the_stores_name_the_missing_extra(tmp_path: Path) -> None:
    """Constructing either Postgres store without psycopg raises `TUBELESS_EXTRA_MISSING`."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import tubeless\n"
        "import tubeless.trace\n"
        "for make in (tubeless.PostgresCheckpointStore, tubeless.trace.PostgresTraceStore):\n"
        "    try:\n"
        "        make('postgresql://nowhere')\n"
        "    except tubeless.errors.MissingExtraError as error:\n"
        "        print(error.code, error.extra, isinstance(error, ImportError))\n"
        "        print(str(error).split()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        check=True,
    )
    assert done.stdout.split() == [
        *("TUBELESS_EXTRA_MISSING", "postgres", "True", "PostgresCheckpointStore"),
        *("TUBELESS_EXTRA_MISSING", "postgres", "True", "PostgresTraceStore"),
    ]


def test_an_expired_lease_taken_over_can_no_longer_write(
    postgres_url: str, postgres_server: Any
) -> None:
    """After a take-over the old owner's writes raise `TUBELESS_AGENT_LEASE_LOST`."""
    store = PostgresCheckpointStore(postgres_url)
    old = store.acquire("k")
    old.write("old")
    postgres_server.execute(postgres_url, EXPIRE, ("k",))
    new = store.acquire("k")
    with pytest.raises(AgentError) as raised:
        old.write("stale")
    assert raised.value.code == "TUBELESS_AGENT_LEASE_LOST"
    old.close()  # releases nothing: the key is the new owner's
    with pytest.raises(AgentError):
        store.acquire("k")
    new.write("new")
    new.close()
    assert store.read("k") == "new"


def test_a_live_lease_is_renewed_past_its_time_to_live(
    postgres_url: str, postgres_server: Any
) -> None:
    """The lease's thread pushes its expiry on, so the key stays busy while the run lives."""
    store = PostgresCheckpointStore(postgres_url, lease_seconds=0.6)
    lease = store.acquire("k")
    expiry = "SELECT expires_at FROM agent_leases WHERE key = 'k'"
    first = postgres_server.execute(postgres_url, expiry)
    try:
        _wait_until(lambda: postgres_server.execute(postgres_url, expiry) != first, "a renewal")
        _wait_until(
            lambda: postgres_server.execute(postgres_url, expiry + " AND expires_at < now()") == [],
            "a live expiry",
        )
        with pytest.raises(AgentError) as raised:
            store.acquire("k")
        assert raised.value.code == "TUBELESS_AGENT_EXECUTION_BUSY"
    finally:
        lease.close()
    store.acquire("k").close()  # released at once by close


def test_recoverable_lists_expired_unfinished_executions(
    postgres_url: str, postgres_server: Any, tmp_path: Path
) -> None:
    """Expired and unfinished keys are listed; finished, released and live ones are not."""
    store = PostgresCheckpointStore(postgres_url)
    agent = postgres_worker.build(postgres_url, "done", str(tmp_path / "log"), "x", 30.0, 0.0)
    assert agent.run({}).status == "completed"
    held = {key: store.acquire(key) for key in ("done", "cut", "fresh", "live")}
    held["cut"].write('{"agent": {"turn": null}}')
    held["fresh"].write('{"agent": null}')
    held["live"].write("{}")
    for key in ("done", "cut", "fresh"):
        postgres_server.execute(postgres_url, EXPIRE, (key,))
    released = store.acquire("released")
    released.close()
    try:
        assert store.recoverable() == ["cut", "fresh"]
        assert store.recoverable(older_than=3600) == []
    finally:
        for lease in held.values():
            lease.close()


def test_an_agent_taken_over_mid_call_stops_with_lease_lost(
    postgres_url: str, postgres_server: Any, tmp_path: Path
) -> None:
    """A worker taken over during a call fails with `LEASE_LOST` and dispatches nothing more."""
    log = tmp_path / "log"
    taken: list[Any] = []

    def take_over() -> None:
        _wait_until(lambda: _lines(log) == ["first a"], "call a")
        postgres_server.execute(postgres_url, EXPIRE, ("job",))
        taken.append(PostgresCheckpointStore(postgres_url).acquire("job"))

    watcher = threading.Thread(target=take_over)
    watcher.start()
    slow = postgres_worker.build(postgres_url, "job", str(log), "first", 30.0, 2.0)
    run = slow.run({})
    watcher.join()
    assert run.status == "failed"
    assert _first_agent_code(postgres_worker.codes(run)) == "TUBELESS_AGENT_LEASE_LOST"
    assert _lines(log) == ["first a"]  # call b was never dispatched
    saved = json.loads(PostgresCheckpointStore(postgres_url).read("job") or "null")
    assert "failure" not in saved["agent"]  # a lost lease is not a terminal failure
    taken[0].close()
    resumed = postgres_worker.build(postgres_url, "job", str(log), "second", 30.0, 0.0).run({})
    assert resumed.value == {"done": ("a", "b")}
    assert _lines(log) == ["first a", "second a", "second b"]


def test_a_terminated_connection_is_reopened_mid_run(
    postgres_url: str, postgres_server: Any, tmp_path: Path
) -> None:
    """`pg_terminate_backend` on the lease's connection mid-run: the run reconnects and ends."""
    terminate = (
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'tubeless-checkpoints' AND datname = current_database()) t"
    )
    killed: list[int] = []
    log = tmp_path / "log"

    def cut() -> None:
        _wait_until(lambda: _lines(log) == ["w a"], "call a")
        killed.append(postgres_server.execute(postgres_url, terminate)[0][0])

    watcher = threading.Thread(target=cut)
    watcher.start()
    run = postgres_worker.build(postgres_url, "job", str(log), "w", 30.0, 1.0).run({})
    watcher.join()
    assert killed and killed[0] >= 1
    assert run.status == "completed", postgres_worker.codes(run)
    assert run.value == {"done": ("a", "b")}
    assert _lines(log) == ["w a", "w b"]


@pytest.fixture
def workers() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start worker processes; every one still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(*arguments: object, go: Path | None = None) -> subprocess.Popen[str]:
        prefix = [] if go is None else ["-c", _GATED, str(go)]
        process = subprocess.Popen(
            [sys.executable, *(prefix or [WORKER]), *map(str, arguments)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), str(HERE)])},
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        process.communicate(timeout=60)


_GATED = textwrap.dedent(
    """
    import os, sys, time
    import postgres_worker
    go = sys.argv[1]
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    postgres_worker.main(sys.argv[2:])
    """
)


def _result(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=120)
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.slow
def test_two_processes_racing_one_key_run_it_once(
    postgres_url: str, tmp_path: Path, workers: Callable[..., subprocess.Popen[str]]
) -> None:
    """Two workers released at once on one key: one runs it, the other is busy."""
    go, log = tmp_path / "go", tmp_path / "log"
    first = workers(postgres_url, "job", log, "one", 30.0, 3.0, go=go)
    second = workers(postgres_url, "job", log, "two", 30.0, 3.0, go=go)
    for process in (first, second):
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"  # both wait at the gate
    go.touch()
    results = sorted([_result(first), _result(second)], key=lambda r: r["status"])
    assert results[0]["status"] == "completed"
    assert results[1]["status"] == "failed"
    assert "TUBELESS_AGENT_EXECUTION_BUSY" in results[1]["codes"]
    assert sorted(line.split()[1] for line in _lines(log)) == ["a", "b"]


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_dispatches_nothing_after_a_take_over(
    postgres_url: str, tmp_path: Path, workers: Callable[..., subprocess.Popen[str]]
) -> None:
    """SIGSTOP past the lease, another worker takes over, SIGCONT: the first dispatches nothing."""
    log = tmp_path / "log"
    store = PostgresCheckpointStore(postgres_url)
    paused = workers(postgres_url, "job", log, "paused", 1.0, 1.0)
    assert paused.stdout is not None
    assert paused.stdout.readline().strip() == "in a"
    paused.send_signal(signal.SIGSTOP)
    _wait_until(lambda: store.recoverable() == ["job"], "the paused lease to expire")
    taker = _result(workers(postgres_url, "job", log, "taker", 30.0, 0.0))
    assert taker["status"] == "completed"
    assert taker["value"] == {"done": ["a", "b"]}
    paused.send_signal(signal.SIGCONT)
    resumed = _result(paused)
    assert resumed["status"] == "failed"
    assert _first_agent_code(resumed["codes"]) == "TUBELESS_AGENT_LEASE_LOST"
    assert _lines(log) == ["paused a", "taker a", "taker b"]
    assert json.loads(store.read("job") or "null")["agent"]["result"] == {"done": ["a", "b"]}


@pytest.mark.slow
def test_a_killed_worker_is_listed_recoverable_and_resumed_by_another(
    postgres_url: str, tmp_path: Path, workers: Callable[..., subprocess.Popen[str]]
) -> None:
    """SIGKILL mid-call: the key turns recoverable once its lease runs out; a resume ends it."""
    log = tmp_path / "log"
    store = PostgresCheckpointStore(postgres_url)
    killed = workers(postgres_url, "job", log, "killed", 1.0, 60.0)
    assert killed.stdout is not None
    assert killed.stdout.readline().strip() == "in a"
    killed.send_signal(signal.SIGKILL)
    killed.wait(60)
    _wait_until(lambda: store.recoverable() == ["job"], "the dead lease to expire")
    resumed = _result(workers(postgres_url, "job", log, "resumer", 30.0, 0.0))
    assert resumed["value"] == {"done": ["a", "b"]}
    assert _lines(log) == ["killed a", "resumer a", "resumer b"]
    assert store.recoverable() == []


def test_a_key_holding_nul_is_refused_as_an_invalid_key(postgres_url: str) -> None:
    """PostgreSQL text cannot hold NUL: such a key is a coded key error, never a lease."""
    store = PostgresCheckpointStore(postgres_url)
    with pytest.raises(AgentError) as raised:
        store.acquire("a\x00b")
    assert raised.value.code == "TUBELESS_AGENT_INVALID_CHECKPOINT_KEY"
    assert (store.read("a\x00b"), store.keys(), store.pending_approvals("a\x00b")) == (
        None,
        [],
        (),
    )

"""A SQLite checkpoint store under damage: corrupt bytes, full files, read-only files, races.

Every damaged file here is made for real: bytes written through `sqlite3`, a page zeroed at
the offset `dbstat` gives, a file-size limit set with `setrlimit` in a child process, a
file opened by a user who may not write it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tubeless import Durability, SqliteCheckpointStore, define_agent, define_tool
from tubeless.agent._store_errors import write_error
from tubeless.errors import AgentError, CheckpointStoreError
from tubeless.pipeline import Pipeline, PipelineRun

ROOT = Path(__file__).resolve().parents[2]
KEY = "job-1"
INVALID = "TUBELESS_AGENT_CHECKPOINT_INVALID"
READ_FAILED = "TUBELESS_AGENT_CHECKPOINT_READ_FAILED"
WRITE_FAILED = "TUBELESS_AGENT_CHECKPOINT_WRITE_FAILED"


class Counted:
    """Counts `decide` calls, so "no callback ran on a corrupt checkpoint" is checked."""

    def __init__(self, pad: int = 0) -> None:
        self.decisions = 0
        self.pad = pad

    def decide(self, state: Any, context: Any) -> dict[str, Any]:
        self.decisions += 1
        if state["turn"] == 0:
            call = {"id": "a", "tool": "send", "input": {"x": 1}}
            return {"kind": "continue", "calls": [call]}
        return {"kind": "finish", "result": {"done": True}}


def agent_on(store: SqliteCheckpointStore, counted: Counted, approval: bool = True) -> Pipeline:
    tool = define_tool(
        description="Send x",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        output_schema={"type": "integer"},
        run=lambda value, context: int(value["x"]),
        needs_approval=approval,
    )
    return define_agent(
        id="damaged",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"turn": 0, "pad": "p" * counted.pad},
        decide=counted.decide,
        reduce=lambda state, outcomes: {**state, "turn": state["turn"] + 1},
        tools={"send": tool},
        implementation_version="1",
        durability=Durability(store=store, key=KEY),
    )


def chain(run: PipelineRun) -> list[tuple[str, str]]:
    """Every (code, message) of the run's first error and its causes."""
    found: list[tuple[str, str]] = []
    link: Any = run.errors[0].to_dict()
    while link is not None:
        for field in ("code", "sourceCode"):
            if isinstance(link.get(field), str):
                found.append((link[field], str(link.get("message", ""))))
        link = link.get("cause")
    return found


def waiting_store(path: Path, pad: int = 0) -> SqliteCheckpointStore:
    """A store whose one execution waits for approval of call `a`."""
    store = SqliteCheckpointStore(path)
    run = agent_on(store, Counted(pad)).run({})
    assert [p.call_id for p in run.pending_approvals] == ["a"]
    return store


def pages(path: Path, name: str, kind: str) -> list[int]:
    """The page numbers `dbstat` gives for `name`'s pages of `kind` (after a checkpoint)."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = connection.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ?", (name, kind)
        )
        return [row[0] for row in rows]


def zero_page(path: Path, number: int) -> None:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as file:
        file.seek((number - 1) * size)
        file.write(bytes(size))
        file.flush()
        os.fsync(file.fileno())


# -- damage SQLite notices only when it reads the row ----------------------------------


def test_invalid_utf8_in_the_checkpoint_is_a_coded_error_everywhere(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in the checkpoint column give `..._CHECKPOINT_INVALID`
    naming the store and the key, from a run, `read`, `pending_approvals` and the CLI."""
    path = tmp_path / "checkpoints.db"
    store = waiting_store(path)
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "UPDATE agent_checkpoints SET checkpoint = CAST(X'7B22C328FF' AS TEXT) WHERE key = ?",
            (KEY,),
        )
    counted = Counted()
    run = agent_on(store, counted).run({})
    assert run.status == "failed"
    codes = [code for code, _ in chain(run)]
    assert INVALID in codes and "TUBELESS_STEP_FAILED" not in codes[1:]
    assert any(str(path) in message and KEY in message for _, message in chain(run))
    assert counted.decisions == 0
    for read in (store.read, store.pending_approvals):
        with pytest.raises(CheckpointStoreError) as raised:
            read(KEY)
        assert (raised.value.code, raised.value.store, raised.value.key) == (
            INVALID,
            str(path),
            KEY,
        )
        assert "not UTF-8" in str(raised.value)
    assert store.keys() == [KEY]
    listed = subprocess.run(
        [sys.executable, "-m", "tubeless", "approvals", "--store", str(path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 2
    assert f"({INVALID}): Checkpoint store {path} is damaged (key 'job-1')" in listed.stderr


def test_a_zeroed_overflow_page_is_a_coded_error_and_runs_nothing(tmp_path: Path) -> None:
    """A checkpoint whose overflow page was zeroed gives `..._CHECKPOINT_INVALID`, never
    a raw `sqlite3.DatabaseError`, and no callback runs."""
    path = tmp_path / "checkpoints.db"
    store = waiting_store(path, pad=30_000)
    overflow = pages(path, "agent_checkpoints", "overflow")
    assert overflow, "a 30 kB checkpoint spills into overflow pages"
    zero_page(path, overflow[len(overflow) // 2])
    counted = Counted(pad=30_000)
    run = agent_on(store, counted).run({})
    assert run.status == "failed"
    assert INVALID in [code for code, _ in chain(run)]
    assert counted.decisions == 0
    for read in (store.read, store.pending_approvals):
        with pytest.raises(CheckpointStoreError) as raised:
            read(KEY)
        assert raised.value.code == INVALID
        assert (raised.value.store, raised.value.key) == (str(path), KEY)
        assert "malformed" in str(raised.value)


def test_a_zeroed_index_page_makes_listing_keys_a_coded_error(tmp_path: Path) -> None:
    """`keys()` over a zeroed index page gives `..._CHECKPOINT_INVALID` naming the store."""
    path = tmp_path / "checkpoints.db"
    waiting_store(path)
    (index,) = pages(path, "sqlite_autoindex_agent_checkpoints_1", "leaf")
    zero_page(path, index)
    with pytest.raises(CheckpointStoreError) as raised:
        SqliteCheckpointStore(path).keys()
    assert (raised.value.code, raised.value.store, raised.value.key) == (INVALID, str(path), None)


def test_a_file_that_is_no_checkpoint_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Inspecting another SQLite file is `..._CHECKPOINT_INVALID` and adds no table to it."""
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("CREATE TABLE runs (id TEXT)")
    store = SqliteCheckpointStore(path)
    for inspect in (store.keys, lambda: store.read(KEY), lambda: store.pending_approvals(KEY)):
        with pytest.raises(CheckpointStoreError) as raised:
            inspect()
        assert raised.value.code == INVALID
        assert str(raised.value).startswith(f"{path} is not a checkpoint store")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert [row[0] for row in connection.execute("SELECT name FROM sqlite_master")] == ["runs"]


def test_a_text_that_is_no_checkpoint_names_the_store_and_the_key(tmp_path: Path) -> None:
    """A row holding JSON that is no checkpoint fails the run with the store and key named."""
    path = tmp_path / "checkpoints.db"
    store = waiting_store(path)
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE agent_checkpoints SET checkpoint = '[1, 2]'")
    counted = Counted()
    run = agent_on(store, counted).run({})
    error = run.first_exception()
    while error is not None and not isinstance(error, CheckpointStoreError):
        error = error.__cause__
    assert isinstance(error, CheckpointStoreError)
    assert (error.code, error.store, error.key) == (INVALID, str(path), KEY)
    assert counted.decisions == 0


# -- failures to open or read are not write failures -----------------------------------


def test_a_store_that_cannot_be_opened_is_a_read_failure(tmp_path: Path) -> None:
    """A checkpoint path that is a directory fails with `..._CHECKPOINT_READ_FAILED`."""
    path = tmp_path / "checkpoints.db"
    path.mkdir()
    store = SqliteCheckpointStore(path)
    with pytest.raises(CheckpointStoreError) as raised:
        store.acquire(KEY)
    assert (raised.value.code, raised.value.store, raised.value.key) == (
        READ_FAILED,
        str(path),
        KEY,
    )
    run = agent_on(store, Counted()).run({})
    assert READ_FAILED in [code for code, _ in chain(run)]
    assert WRITE_FAILED not in [code for code, _ in chain(run)]


def test_sqlite_full_is_reported_as_no_space_left(tmp_path: Path) -> None:
    """A write SQLite refuses with `SQLITE_FULL` says `No space left on device`."""
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    coded = write_error(error, store="s.db", key=KEY, files=(tmp_path / "s.db",), size=10)
    assert coded.code == WRITE_FAILED
    assert "No space left on device (ENOSPC" in str(coded)
    assert "database or disk is full" in str(coded)


_FSIZE_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from tubeless import SqliteCheckpointStore
    from tubeless.errors import CheckpointStoreError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write with EFBIG, not die
    path = Path(sys.argv[1])
    lease = SqliteCheckpointStore(path).acquire("job-1")
    lease.write("small")
    files = [path, path.with_name(path.name + "-wal")]
    limit = max(file.stat().st_size for file in files if file.exists()) + 64 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        lease.write("x" * 1_000_000)
        print(json.dumps({"wrote": True}))
    except CheckpointStoreError as error:
        print(json.dumps({"code": error.code, "message": str(error), "key": error.key}))
    lease.write("small again")  # a write that fits still works
    print(json.dumps({"after": lease.read()}))
    lease.close()
    """
)


def test_a_write_past_the_file_size_limit_says_file_too_large(tmp_path: Path) -> None:
    """A checkpoint write that hits `RLIMIT_FSIZE` says `File too large`, not `disk I/O
    error`, and the store stays usable."""
    path = tmp_path / "checkpoints.db"
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, str(path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failed, after = (json.loads(line) for line in done.stdout.splitlines())
    assert failed["code"] == WRITE_FAILED and failed["key"] == KEY
    assert "File too large (EFBIG" in failed["message"]
    assert "disk I/O error" in failed["message"]  # what SQLite said, kept after the reason
    assert after == {"after": "small again"}
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- a read-only file can be inspected --------------------------------------------------


_READER = textwrap.dedent(
    """
    import json, sys
    from tubeless import SqliteCheckpointStore
    store = SqliteCheckpointStore(sys.argv[1])
    print(json.dumps({
        "keys": store.keys(),
        "pending": [p.call_id for p in store.pending_approvals("job-1")],
        "read": store.read("job-1") is not None,
    }))
    """
)


def _interpreter_for(user: str, environment: dict[str, str]) -> str | None:
    """A Python that `user` may run and that imports tubeless (`None` when there is none)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(version, path="/usr/bin:/usr/local/bin")):
        if candidate is None:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            probe = subprocess.run(
                [candidate, "-c", "import tubeless.agent"],
                user=user,
                env=environment,
                cwd="/",
                capture_output=True,
                timeout=60,
            )
            if probe.returncode == 0:
                return candidate
    return None


_IMPORTED = (
    "tubeless",
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attr",
    "attrs",
    "typing_extensions",
)
"""What the reader imports: tubeless and its runtime dependencies, top-level names."""


def _readable_site(directory: Path) -> Path:
    """Copies of tubeless and its dependencies where any user may read them.

    The test environment may be one only its owner can enter (tox makes `.tox` private),
    so the unprivileged reader gets copies in `directory`.
    """
    site = directory / "site"
    site.mkdir(mode=0o755)
    for name in _IMPORTED:
        source = Path(importlib.import_module(name).__file__ or "")
        if source.name == "__init__.py":
            shutil.copytree(source.parent, site / source.parent.name)
        else:
            shutil.copy2(source, site / source.name)
    for path in [site, *site.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return site


@contextlib.contextmanager
def shared_directory() -> Iterator[Path]:
    """A directory every user may enter and read but only its owner may write."""
    directory = Path(tempfile.mkdtemp(prefix="tubeless-ro-", dir="/tmp"))
    try:
        yield directory
    finally:
        directory.chmod(0o700)
        shutil.rmtree(directory)


def test_a_read_only_checkpoint_file_can_be_inspected(tmp_path: Path) -> None:
    """A user who may read the file but write neither it nor its directory can list keys
    and pending approvals, with the store and the CLI's `approvals`."""
    with shared_directory() as directory, shared_directory() as libraries:
        path = directory / "checkpoints.db"
        waiting_store(path)
        assert not path.with_name(path.name + "-wal").exists()
        if os.geteuid() == 0:
            path.chmod(0o644)
            directory.chmod(0o755)
            libraries.chmod(0o755)
            environment = {
                "PYTHONPATH": os.pathsep.join(
                    [str(_readable_site(libraries)), str(ROOT), sysconfig.get_paths()["purelib"]]
                ),
                "PATH": "/usr/bin:/bin",
            }
            python = _interpreter_for("nobody", environment)
            if python is None:
                pytest.skip("no Python the user nobody may run")
            user: str | None = "nobody"
        else:
            path.chmod(0o444)
            directory.chmod(0o555)
            environment = {**os.environ, "PYTHONPATH": str(ROOT)}
            python, user = sys.executable, None
        try:
            inspected = subprocess.run(
                [python, "-c", _READER, str(path)],
                user=user,
                env=environment,
                cwd="/",
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert inspected.returncode == 0, inspected.stderr
            assert json.loads(inspected.stdout) == {"keys": [KEY], "pending": ["a"], "read": True}
            listed = subprocess.run(
                [python, "-m", "tubeless", "approvals", "--store", str(path), "--json"],
                user=user,
                env=environment,
                cwd="/",
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert listed.returncode == 0, listed.stderr
            (row,) = json.loads(listed.stdout)["pendingApprovals"]
            assert (row["key"], row["callId"]) == (KEY, "a")
        finally:
            directory.chmod(0o700)
        assert sorted(p.name for p in directory.iterdir()) == [
            "checkpoints.db",
            "checkpoints.db-locks",
        ]


# -- creating a new store at the same moment --------------------------------------------


def test_threads_creating_one_new_store_with_their_own_keys_never_collide(
    tmp_path: Path,
) -> None:
    """Two threads leasing their own keys on a file that does not exist yet both succeed,
    every time (each with its own store object, as two executions have; before the fix
    about 6 pairs in 100 failed with `database is locked`)."""
    failures: list[str] = []
    for attempt in range(100):
        path = tmp_path / f"new-{attempt}.db"
        barrier = threading.Barrier(2)

        def lease(key: str, path: Path = path, barrier: threading.Barrier = barrier) -> None:
            store = SqliteCheckpointStore(path)
            barrier.wait()
            try:
                held = store.acquire(key)
                try:
                    held.write(key)
                finally:
                    held.close()
            except AgentError as error:
                failures.append(f"{error.code}: {error}")

        threads = [threading.Thread(target=lease, args=(key,)) for key in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert SqliteCheckpointStore(path).keys() == ["a", "b"]
    assert failures == []


_CREATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tubeless import SqliteCheckpointStore
    path, key, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    store = SqliteCheckpointStore(path)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.0005)
    lease = store.acquire(key)
    lease.write(key)
    lease.close()
    print("ok", flush=True)
    """
)


@pytest.mark.slow
def test_processes_creating_one_new_store_with_their_own_keys_never_collide(
    tmp_path: Path,
) -> None:
    """Three processes released at once onto a file that does not exist yet all lease
    their keys, every time."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    keys = ["a", "b", "c"]
    for attempt in range(10):
        path, go = tmp_path / f"new-{attempt}.db", tmp_path / f"go-{attempt}"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _CREATOR, str(path), key, str(go)],
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for key in keys
        ]
        try:
            for child in children:
                assert child.stdout is not None
                assert child.stdout.readline().strip() == "ready"
            go.touch()
            results = [child.communicate(timeout=120) for child in children]
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.communicate()
        assert [child.returncode for child in children] == [0, 0, 0], results
        assert SqliteCheckpointStore(path).keys() == keys

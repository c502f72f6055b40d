"""A throwaway PostgreSQL server for the tests: Debian's binaries, a temporary directory.

`PostgresServer.start()` runs `initdb` and `pg_ctl start` in a fresh directory under the
system temporary directory, listening on 127.0.0.1 at a free port and on a socket in that
directory, with trust authentication for local connections and `fsync` on. As root it runs
the server as the `postgres` user (the server refuses root). `stop()` stops it at once
(`pg_ctl stop -m immediate`) and removes the directory. `database()` creates an empty
database and returns its URL, so tests do not see each other's tables.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def binaries() -> Path | None:
    """The newest `/usr/lib/postgresql/*/bin` that has `initdb`, or `None`."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parent.parent.name),
    )
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One PostgreSQL server in a temporary directory, for one test session."""

    def __init__(self) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL server binaries are missing: apt-get install -y postgresql"
            )
        self.bin = bin_dir
        self.port = _free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="tubeless-pg-"))
        self.data = self.directory / "data"
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
            self._user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self._names = itertools.count(1)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        subprocess.run(
            command,
            check=True,
            capture_output=True,
            timeout=120,
            cwd=self.directory,
            **self._user,
        )

    def start(self) -> PostgresServer:
        """Initialise the cluster and start the server; return once it accepts connections."""
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-instructions",
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} "
            "-c fsync=on -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.directory / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        """Stop the server at once and delete its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def database(self) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def execute(self, url: str, sql: str, parameters: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on `url` (autocommit) and return its rows."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            cursor = connection.execute(sql, parameters)
            return list(cursor.fetchall()) if cursor.description is not None else []

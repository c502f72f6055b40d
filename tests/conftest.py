"""Fixtures every test directory may use: a throwaway PostgreSQL server (see
`postgres_server.py`), started once per session and only when a test asks for it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from postgres_server import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on loopback for the whole session, stopped at its end."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the session's server."""
    return postgres_server.database()

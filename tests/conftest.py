"""Fixtures every test directory may use: a throwaway PostgreSQL server (see
`postgres_server.py`), started once per session and only when a test asks for it, and the
source of an agent tree that charges usage."""

from __future__ import annotations

import os
import sys
import textwrap
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


_METERED_AGENTS = textwrap.dedent(
    """
    from tubeless import define_agent, define_pipeline_command, pipeline_tool

    def child_decide(state, context):
        context.reserve_usage(input_tokens=50, output_tokens=50).settle(
            input_tokens=30, output_tokens=5, cost=0.25
        )
        return {"kind": "finish", "result": "child done"}

    child = define_agent(
        id="child", input_schema={}, result_schema={}, initial_state=lambda o: {},
        decide=child_decide,
    )

    def decide(state, context):
        context.report_usage(input_tokens=100, output_tokens=20, cost=1)
        if context.turn == 1:
            return {"kind": "continue", "calls": [{"id": "k", "tool": "child", "input": {}}]}
        return {"kind": "finish", "result": "done"}

    agent = define_agent(
        id="parent", input_schema={"type": "object"}, result_schema={},
        initial_state=lambda o: {},
        decide=decide, tools={"child": pipeline_tool(child, description="Delegate")},
    )
    command = define_pipeline_command(agent)
    """
)


@pytest.fixture
def metered_agents_source() -> str:
    """A module's source: agent `parent` (usage 100 in, 20 out, cost 1 per turn, two turns)
    delegating once to agent `child` (30 in, 5 out, cost 0.25), and `command` for `run`."""
    return _METERED_AGENTS

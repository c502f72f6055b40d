"""The example project: the agents, addressable by id from the CLI.

    python -m tubeless plan openai-agent -p examples/tubeless_project.py
    python -m tubeless inspect scripted-agent -p examples/tubeless_project.py
    python -m tubeless run planner -p examples/tubeless_project.py -- --topic agents

Importing it makes no request and needs no credentials.
"""

from __future__ import annotations

import agent as scripted
import agent_approval
import agent_delegation
import agent_durable
import agent_openai

from tubeless import define_project

project = define_project(
    "examples",
    [
        scripted.agent,
        agent_openai.agent,
        agent_delegation.planner,
        agent_durable.agent,
        agent_approval.agent,
    ],
)
"""The example project."""

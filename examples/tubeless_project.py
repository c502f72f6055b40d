"""The example project: both agents, addressable by id from the CLI.

    python -m tubeless plan openai-agent -p examples/tubeless_project.py
    python -m tubeless inspect scripted-agent -p examples/tubeless_project.py

Importing it makes no request and needs no credentials.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The CLI loads this file by its path, so make the sibling example modules importable.
_EXAMPLES = str(Path(__file__).resolve().parent)
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

import agent as scripted  # noqa: E402
import agent_openai  # noqa: E402

from tubeless.cli import define_project  # noqa: E402

project = define_project("examples", [scripted.agent, agent_openai.agent])
"""The example project."""

"""The README's Python examples run as written."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run() -> None:
    """Each fenced Python block of README.md runs without error and prints what it claims."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)
    assert blocks
    outputs = [
        subprocess.run(
            [sys.executable, "-c", block], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        for block in blocks
    ]
    assert outputs[0].strip() == "HELLO"
    assert "completed 10" in outputs[1]

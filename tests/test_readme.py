"""The README's Python examples run as written."""

from __future__ import annotations

import json
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
    typed = outputs[1].splitlines()
    assert json.loads(typed[0]) == {"id": "leg-0", "tool": "distance", "ok": True, "value": 200}
    assert json.loads(typed[1])["error"]["code"] == "SAME_CITY"
    assert typed[2] == "cancelled"
    assert "completed 10" in outputs[2]

"""The repairs guide's Python blocks run as written and print what their comments say."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "repairs.md"


def test_each_block_prints_its_comment() -> None:
    """Each ```python block's trailing `# ...` lines are exactly what it prints."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text("utf-8"), re.S)
    assert len(blocks) == 2
    for block in blocks:
        lines = block.rstrip("\n").splitlines()
        claimed = []
        while lines and lines[-1].startswith("# "):
            claimed.insert(0, lines.pop()[2:])
        printed = subprocess.run(
            [sys.executable, "-c", block],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        assert printed.splitlines() == claimed

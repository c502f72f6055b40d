"""Every Python block of the guides and the README runs as written and prints what it shows."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
BLOCK = re.compile(r"```python\n(.*?)```(?:\s*```output\n(.*?)```)?", re.S)
"""A Python block, and the `output` block right after it when the page shows one."""


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for number, match in enumerate(BLOCK.finditer(text), 1):
            found.append((f"{page.relative_to(ROOT)}#{number}", match[1], match[2]))
    return found


def _matches(expected: str, printed: str) -> bool:
    """Each shown line equals the printed one; a shown line ending in `...` is a prefix."""
    shown, lines = expected.strip().splitlines(), printed.strip().splitlines()
    if len(shown) != len(lines):
        return False
    return all(
        line.startswith(want[:-3]) if want.endswith("...") else line == want
        for want, line in zip(shown, lines, strict=True)
    )


BLOCKS = _blocks()


def test_the_pages_have_python_blocks() -> None:
    """The collector finds blocks in the README and in the guides (a broken pattern would not)."""
    pages = {name.split("#")[0] for name, _, _ in BLOCKS}
    assert "README.md" in pages
    assert any(page.startswith("docs/") for page in pages)


@pytest.mark.parametrize(("name", "code", "output"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_block_runs(name: str, code: str, output: str | None, tmp_path: pathlib.Path) -> None:
    """The block runs in a fresh interpreter in an empty directory; its output is as shown."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stderr[-3000:]}"
    if output is not None:
        assert _matches(output, done.stdout), f"{name} printed:\n{done.stdout}"


_NOT_ERROR_CODES = {"TUBELESS_TRACEBACK"}
"""`TUBELESS_*` names in the source that are environment variables, not error codes."""


def test_every_error_code_has_an_entry() -> None:
    """docs/errors.md has a `### CODE` entry for each code the package can raise or record."""
    source = "\n".join(
        path.read_text("utf-8")
        for path in (ROOT / "tubeless").rglob("*")
        if path.suffix in {".py", ".json"}
    )
    codes = set(re.findall(r"\bTUBELESS_[A-Z0-9_]*[A-Z0-9]\b", source)) - _NOT_ERROR_CODES
    page = (ROOT / "docs" / "errors.md").read_text("utf-8")
    documented = set(re.findall(r"^### `(TUBELESS_[A-Z0-9_]+)`$", page, re.M))
    assert sorted(codes - documented) == []
    assert sorted(documented - codes) == []

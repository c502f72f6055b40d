"""Docstrings speak for this library: none points a reader at "the reference"."""

from __future__ import annotations

import ast
import pathlib

import tubeless

PACKAGE = pathlib.Path(tubeless.__file__).parent


def test_no_docstring_mentions_the_reference() -> None:
    """A reader of `help()` has no reference implementation at hand."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node) or ""
                if "the reference" in text.lower() or "reference's" in text.lower():
                    found.append(f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 1)}")
    assert found == []

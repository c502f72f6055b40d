"""Imports flow one way: definitions -> execution -> records -> sinks -> progress -> CLI."""

from __future__ import annotations

import ast
import pathlib

import pytest

import tubeless

PACKAGE = pathlib.Path(tubeless.__file__).parent

# What each part of the package may import from tubeless (besides itself).
ALLOWED = {
    "_diagnostics": set(),
    "errors": {"_diagnostics"},
    "_frozen": set(),
    "_fingerprint": set(),
    "_version": set(),
    "schema": {"errors", "_frozen"},
    "trace": {"errors", "schema", "_frozen", "_fingerprint"},
    "pipeline": {"errors", "_diagnostics", "schema", "_frozen", "_fingerprint", "trace"},
    "agent": {"errors", "schema", "_frozen", "pipeline"},
    "testing": {"errors", "_frozen", "trace", "agent", "pipeline"},
    "progress": {"errors", "_frozen", "trace"},
    "cli": {"errors", "schema", "_frozen", "trace", "pipeline", "agent", "progress"},
    "__init__": {
        "errors",
        "schema",
        "_frozen",
        "trace",
        "pipeline",
        "agent",
        "cli",
        "testing",
        "_version",
    },
    "__main__": {"cli"},
}
# Third-party imports that must stay in one place.
CONFINED = {
    "jsonschema": "schema",
    "referencing": "schema",
    "sqlite3": "trace/_sqlite.py",
    "argparse": "cli",
    "requests": None,
    "pydantic": "agent/_function_tools.py",
}


def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _part(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _runtime_imports(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        names += _imports_in(node)
    return names


def _imports_in(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        return []
    found: list[str] = []
    for child in ast.walk(node):
        if isinstance(child, ast.Import):
            found += [alias.name for alias in child.names]
        elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
            found.append(child.module)
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_lower_layers(path: pathlib.Path) -> None:
    """Each module imports tubeless parts only from the layers below its own."""
    part = _part(path)
    tree = ast.parse(path.read_text("utf-8"))
    for name in _runtime_imports(tree):
        if not name.startswith("tubeless."):
            continue
        target = name.split(".")[1]
        assert target == part or target in ALLOWED[part], f"{part} must not import {name}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_third_party_imports_stay_in_their_place(path: pathlib.Path) -> None:
    """jsonschema/referencing, sqlite3, argparse and requests are each imported in one place."""
    relative = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text("utf-8"))
    for name in _runtime_imports(tree):
        root = name.split(".")[0]
        if root not in CONFINED:
            continue
        home = CONFINED[root]
        assert home is not None, f"{relative} must not import {root}"
        assert relative.startswith(home), f"{relative} must not import {root} ({home} owns it)"

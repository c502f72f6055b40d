"""Imports flow one way: definitions -> execution -> records -> sinks -> progress -> CLI."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

import tubeless

PACKAGE = pathlib.Path(tubeless.__file__).parent

# What each part of the package may import from tubeless (besides itself and LEAVES).
ALLOWED = {
    "_public": set(),
    "_types": set(),
    "_diagnostics": set(),
    "errors": {"_diagnostics"},
    "_frozen": set(),
    "_fingerprint": set(),
    "_version": set(),
    "_postgres": {"errors"},
    "schema": {"errors", "_frozen"},
    "trace": {"errors", "schema", "_frozen", "_fingerprint", "_postgres"},
    "pipeline": {"errors", "_diagnostics", "schema", "_frozen", "_fingerprint", "trace"},
    "agent": {"errors", "schema", "_frozen", "pipeline", "_postgres"},
    "testing": {"errors", "_frozen", "trace", "agent", "pipeline"},
    "mcp": {"errors", "_frozen", "_fingerprint", "pipeline", "agent"},
    "progress": {"errors", "_frozen", "trace"},
    "cli": {
        "errors",
        "schema",
        "_frozen",
        "trace",
        "pipeline",
        "agent",
        "progress",
        "_version",
        "mcp",
    },
    "__init__": {
        "errors",
        "schema",
        "_frozen",
        "trace",
        "pipeline",
        "agent",
        "cli",
        "mcp",
        "testing",
        "_version",
    },
    "__main__": {"cli"},
    "pytest_plugin": {"testing"},
}
# Modules every part may import: they import nothing of tubeless at run time.
# `_quote` bounds the outside values every message quotes; `_usage` is the `Usage` a run
# report carries, metered by the agent layer above the pipeline core; `_fields` builds the
# wire form of every layer's frozen records.
LEAVES = {"_public", "_types", "_quote", "_usage", "_fields"}
ALLOWED["_quote"] = set()
ALLOWED["_usage"] = set()
ALLOWED["_fields"] = set()
# Third-party imports that must stay in one place.
CONFINED: dict[str, str | tuple[str, ...] | None] = {
    "jsonschema": "schema",
    "referencing": "schema",
    "sqlite3": ("trace/_sqlite.py", "agent/_checkpoint_store.py"),
    "psycopg": "_postgres.py",
    "argparse": "cli",
    "opentelemetry": "trace/otel/",
    "requests": None,
    "pydantic": "agent/_function_tools.py",
    "pytest": "pytest_plugin.py",
    "mcp": "mcp/",
    "anyio": "mcp/",
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
        allowed = target == part or target in ALLOWED[part] or target in LEAVES
        assert allowed, f"{part} must not import {name}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_third_party_imports_stay_in_their_place(path: pathlib.Path) -> None:
    """jsonschema/referencing, sqlite3, argparse, opentelemetry, requests: each in one place."""
    relative = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text("utf-8"))
    for name in _runtime_imports(tree):
        root = name.split(".")[0]
        if root not in CONFINED:
            continue
        home = CONFINED[root]
        assert home is not None, f"{relative} must not import {root}"
        assert relative.startswith(home), f"{relative} must not import {root} ({home} owns it)"


# -- seams and cycles ------------------------------------------------------------------
#
# A package (a directory of tubeless) shows other parts its public `__init__` and, at most,
# one seam module: internal API for the tubeless packages above it, documented in its own
# docstring. Everything else in it is private to it.
SEAM = "lowlevel"


def _module_name(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = [PACKAGE.name, *relative.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _known_modules() -> dict[str, pathlib.Path]:
    return {_module_name(path): path for path in _modules()}


def _absolute(node: ast.ImportFrom, path: pathlib.Path) -> str:
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(path: pathlib.Path, *, type_checking: bool) -> list[tuple[str, int]]:
    """Every tubeless module `path` imports (`(name, line)`), inside functions too.

    `from a import b` counts `a`, and `a.b` when that is a module; imports under
    `if TYPE_CHECKING:` count only when `type_checking` is true.
    """
    known = _known_modules()
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child) and not type_checking:
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = _absolute(child, path)
                found.append((module, child.lineno))
                for alias in child.names:
                    if f"{module}.{alias.name}" in known:
                        found.append((f"{module}.{alias.name}", child.lineno))
            visit(child)

    visit(ast.parse(path.read_text("utf-8")))
    return [(name, line) for name, line in found if name.split(".")[0] == PACKAGE.name]


def _subpackages() -> list[pathlib.Path]:
    return sorted(path.parent for path in PACKAGE.glob("*/__init__.py"))


def _private_reach(importer: str, imported: str) -> str | None:
    """The private module `imported` reaches into, when it belongs to another package."""
    parts = imported.split(".")
    if len(parts) < 3 or not (PACKAGE / parts[1] / "__init__.py").exists():
        return None
    if importer == ".".join(parts[:2]) or importer.startswith(".".join(parts[:2]) + "."):
        return None
    if parts[2] == SEAM and all(not part.startswith("_") for part in parts[3:]):
        return None
    # A public subpackage (`tubeless.trace.otel`) is reached through its own `__init__`.
    subpackage = PACKAGE.joinpath(*parts[1:], "__init__.py")
    if subpackage.exists() and all(not part.startswith("_") for part in parts[2:]):
        return None
    return imported


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_other_packages_are_reached_only_through_their_seam(path: pathlib.Path) -> None:
    """A module imports another package only through its `__init__` or its seam module."""
    importer = _module_name(path)
    for name, line in _imported(path, type_checking=True):
        reach = _private_reach(importer, name)
        assert reach is None, (
            f"{path.relative_to(PACKAGE)}:{line} imports {reach}: use "
            f"{'.'.join(name.split('.')[:2])} or its {SEAM} module"
        )


@pytest.mark.parametrize("package", _subpackages(), ids=lambda p: p.name)
def test_a_package_shows_at_most_one_seam_module(package: pathlib.Path) -> None:
    """Besides `__init__`, a package's only module without a leading underscore is its seam."""
    public = sorted(
        path.name
        for path in package.rglob("*.py")
        if path.name != "__init__.py" and not path.name.startswith("_")
    )
    assert public in ([], [f"{SEAM}.py"]), f"{package.name} shows {public}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` as a path that ends where it starts, or `None`."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.mark.parametrize("package", _subpackages(), ids=lambda p: p.name)
def test_no_import_cycle_inside_a_package(package: pathlib.Path) -> None:
    """The modules of a package import each other without a cycle, even inside functions.

    Only imports under `if TYPE_CHECKING:` are exempt: a cycle held together by imports
    inside functions is still a cycle.
    """
    inside = {_module_name(path): path for path in package.rglob("*.py")}
    graph = {
        name: {
            target
            for target, _ in _imported(path, type_checking=False)
            if target in inside and target != name
        }
        for name, path in inside.items()
    }
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# -- no agent concept in the pipeline core ---------------------------------------------
#
# The core gives layers above it one typed slot (`RunExtension`, see
# `tubeless.pipeline.lowlevel`); it names none of their concepts. Words are matched on the
# parts of identifiers (snake_case and CamelCase), so `release` is no `lease`.
AGENT_WORDS = (
    "agent",
    "approval",
    "cassette",
    "journal",
    "checkpoint",
    "durab",
    "delegat",
    "lease",
    "resum",
)
# Public names that predate the slot; the core carries or forwards them without reading them.
AGENT_WORD_ALLOWED: dict[str, frozenset[str]] = {
    # `RunContext(execution_key=, approvals=, cassette=)`: public fields, carried as
    # extensions the agent layer binds (`bind_context_field`); the core never reads them.
    "_controls.py": frozenset({"execution_key", "approvals", "cassette"}),
    # `PipelineRun.pending_approvals`: public; read from the run's exceptions through
    # `tubeless.errors.pending_approvals_of`.
    "_run_result.py": frozenset({"pending_approvals", "PendingApproval", "pending_approvals_of"}),
    # The public `approval.pending` run event is made from `PipelineRun.pending_approvals`.
    "_stream.py": frozenset({"pending_approvals", "agent_run_id"}),
}
_WORD_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _identifiers(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.update(part for part in (node.name, node.asname) if part)
    return names


def _names_an_agent_concept(identifier: str) -> bool:
    if "execution_key" in identifier.lower():
        return True
    parts = [part.lower() for part in _WORD_PARTS.findall(identifier)]
    return any(part.startswith(AGENT_WORDS) for part in parts)


@pytest.mark.parametrize("path", sorted((PACKAGE / "pipeline").rglob("*.py")), ids=lambda p: p.name)
def test_the_pipeline_core_names_no_agent_concept(path: pathlib.Path) -> None:
    """No identifier in `tubeless/pipeline/` names an agent concept (beyond the allow-list)."""
    tree = ast.parse(path.read_text("utf-8"))
    allowed = AGENT_WORD_ALLOWED.get(path.name, frozenset())
    found = sorted(
        name for name in _identifiers(tree) if _names_an_agent_concept(name) and name not in allowed
    )
    assert found == [], f"{path.name} names agent concepts: {found}"


def test_the_agent_word_check_can_fail() -> None:
    """The word check finds agent concepts in identifiers and ignores look-alikes."""
    assert _names_an_agent_concept("approvals_of")
    assert _names_an_agent_concept("CassetteSession")
    assert _names_an_agent_concept("execution_key")
    assert _names_an_agent_concept("AGENT_DEFINITIONS")
    assert not _names_an_agent_concept("release")
    assert not _names_an_agent_concept("ExecutionContext")

"""The error families: the tree drawn in `tubeless.errors` is the class tree, and a family
catches the real errors tubeless raises for it."""

from __future__ import annotations

import builtins
import pathlib
import re
from typing import Any

import pytest

import tubeless
from tubeless import errors
from tubeless.agent import SqliteCheckpointStore
from tubeless.cli import get_parser, main
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.schema import validator
from tubeless.trace import read_ndjson

FAMILIES = ("DefinitionError", "RunError", "TraceError", "StoreError", "CliError", "McpError")
_ROW = re.compile(r"^    ([│ ]*)[├└]── (\w+)")


def _drawn_edges() -> list[tuple[str, str]]:
    """(parent, child) for every row of the module docstring's exception tree."""
    doc = errors.__doc__ or ""
    tree = doc[doc.index("    Exception\n") : doc.index("Warnings (")]
    stack: list[str] = ["Exception"]
    edges: list[tuple[str, str]] = []
    for line in tree.splitlines():
        found = _ROW.match(line)
        if found is None:
            continue
        depth = len(found.group(1)) // 4 + 1
        del stack[depth:]
        edges.append((stack[-1], found.group(2)))
        stack.append(found.group(2))
    return edges


def _named(name: str) -> type:
    found = getattr(errors, name, None) or getattr(builtins, name)
    assert isinstance(found, type)
    return found


def _exception_names() -> set[str]:
    return {
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), Exception)
        and not issubclass(getattr(errors, name), Warning)
    }


def test_the_drawn_tree_is_the_class_tree() -> None:
    """Every exception class is drawn, and every drawn child is a subclass of its parent."""
    edges = _drawn_edges()
    drawn = {child for _, child in edges}
    assert drawn == _exception_names() | {"TubelessError", "ValueError"}
    for parent, child in edges:
        assert issubclass(_named(child), _named(parent)), (parent, child)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_catches_exactly_what_the_tree_puts_under_it(family: str) -> None:
    """The classes drawn under a family are the tubeless exceptions that subclass it."""
    edges = _drawn_edges()
    below: set[str] = set()
    frontier = {family}
    while frontier:
        frontier = {child for parent, child in edges if parent in frontier} - below
        below |= frontier
    family_class = getattr(errors, family)
    subclasses = {
        name
        for name in _exception_names() - {family}
        if issubclass(getattr(errors, name), family_class)
    }
    assert below == subclasses
    assert family in errors.__all__
    assert family_class.__init__ is errors.TubelessError.__init__
    if family in ("DefinitionError", "RunError"):
        assert getattr(tubeless, family) is family_class


def test_families_catch_the_errors_tubeless_raises(tmp_path: pathlib.Path, capsys: Any) -> None:
    """A bad definition, a failed run, a bad trace file and a bad store are caught by family."""
    step = create_steps()
    with pytest.raises(errors.DefinitionError):
        define_pipeline(id=" ", steps=[step("a", run=lambda _: 1)])

    def fail(_: Any) -> None:
        raise RuntimeError("no")

    with pytest.raises(errors.RunError):
        define_pipeline(id="p", steps=[step("a", run=fail)]).run_or_raise()

    with pytest.raises(errors.DefinitionError):
        validator(object())  # type: ignore[arg-type]

    broken = tmp_path / "trace.ndjson"
    broken.write_text("not json\n")
    with pytest.raises(errors.TraceError) as trace_error:
        read_ndjson(broken)
    assert isinstance(trace_error.value, errors.StoreError)

    not_sqlite = tmp_path / "store.db"
    not_sqlite.write_bytes(b"this is not a database file" * 100)
    with pytest.raises(errors.StoreError) as store_error:
        SqliteCheckpointStore(not_sqlite).keys()
    assert isinstance(store_error.value, errors.RunError)

    with pytest.raises(errors.CliError):
        get_parser().parse_args(["--no-such-flag"])
    assert main(["--no-such-flag"]) == 1
    assert "--no-such-flag" in capsys.readouterr().err


def test_old_except_clauses_still_catch() -> None:
    """Every class keeps the bases it had: `except TubelessError`/`ValueError` still catch."""
    assert issubclass(errors.CheckpointStoreError, errors.AgentError)
    assert issubclass(errors.PipelineCancelledError, errors.PipelineExecutionError)
    assert issubclass(errors.SchemaDefinitionError, TypeError)
    assert issubclass(errors.TraceRecordError, ValueError)
    for name in _exception_names() - {"SchemaValidationError"}:
        assert issubclass(getattr(errors, name), errors.TubelessError), name

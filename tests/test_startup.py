"""Start-up: `import tubeless` loads the core alone; the CLI and SQLite load on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# What `import tubeless` may load of its own: everything but the command line, the live
# progress renderer and the SQLite store.
CORE_PARTS = ("errors", "schema", "pipeline", "agent", "trace")


def _python(code: str, cwd: Path) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def _is_core(module: str) -> bool:
    parts = module.split(".")
    if module == "tubeless.trace._sqlite":
        return False
    return len(parts) == 1 or parts[1].startswith("_") or parts[1] in CORE_PARTS


def test_import_tubeless_loads_neither_the_cli_nor_argparse_nor_sqlite(tmp_path: Path) -> None:
    """`import tubeless` (and `tubeless.trace`) leaves argparse, sqlite3 and the CLI unloaded."""
    loaded = _python(
        "import json, sys, tubeless, tubeless.trace\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m in ('argparse', 'sqlite3', 'psycopg') or m.startswith('tubeless'))))",
        tmp_path,
    )

    assert "argparse" not in loaded
    assert "sqlite3" not in loaded
    assert "psycopg" not in loaded
    assert "tubeless.cli" not in loaded
    assert [module for module in loaded if not _is_core(module)] == []


def test_lazy_names_load_on_first_use_and_stay_listed(tmp_path: Path) -> None:
    """The CLI names and `SqliteTraceStore` are in `__all__` and `dir()`, and load when read."""
    seen = _python(
        "import json, sys, tubeless, tubeless.trace\n"
        "import tubeless.cli as cli\n"
        "from tubeless.trace._sqlite import SqliteTraceStore\n"
        "names = ['PipelineCommand', 'Project', 'define_pipeline_command', 'define_project']\n"
        "print(json.dumps({\n"
        "  'listed': [n in tubeless.__all__ and n in dir(tubeless) for n in names],\n"
        "  'same': [getattr(tubeless, n) is getattr(cli, n) for n in names],\n"
        "  'store_listed': 'SqliteTraceStore' in tubeless.trace.__all__"
        " and 'SqliteTraceStore' in dir(tubeless.trace),\n"
        "  'store_same': tubeless.trace.SqliteTraceStore is SqliteTraceStore,\n"
        "  'loaded': 'argparse' in sys.modules and 'sqlite3' in sys.modules,\n"
        "}))",
        tmp_path,
    )

    assert seen == {
        "listed": [True] * 4,
        "same": [True] * 4,
        "store_listed": True,
        "store_same": True,
        "loaded": True,
    }


def test_reading_a_lazy_name_imports_it_and_unknown_names_still_fail() -> None:
    """A lazy name read through the package is the real object; a typo is an AttributeError."""
    import tubeless
    import tubeless.trace
    from tubeless.cli import define_project
    from tubeless.trace._sqlite import SqliteTraceStore

    assert tubeless.define_project is define_project
    assert tubeless.trace.SqliteTraceStore is SqliteTraceStore
    for module in (tubeless, tubeless.trace):
        with pytest.raises(AttributeError, match="no_such_name"):
            getattr(module, "no_such_name")  # noqa: B009

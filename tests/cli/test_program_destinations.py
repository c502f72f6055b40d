"""Tests for refusing `--store` and `--trace` on one file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tubeless.cli._program import _destinations as _destinations
from tubeless.cli._program._destinations import destinations_conflict


def test_distinct_files_do_not_conflict(tmp_path: Path) -> None:
    """Different names in one directory, existing or not, are different files."""
    (tmp_path / "runs.sqlite").write_text("")
    assert not destinations_conflict(tmp_path / "runs.sqlite", tmp_path / "trace.ndjson")
    assert not destinations_conflict(tmp_path / "new.sqlite", tmp_path / "new.sqlite.ndjson")


def test_same_paths_sidecars_and_links_conflict(tmp_path: Path) -> None:
    """Equal paths, `-journal`/`-wal`/`-shm` files, symlinks and hard links conflict."""
    store = tmp_path / "runs.sqlite"
    store.write_text("")
    (tmp_path / "link.sqlite").symlink_to(store)
    (tmp_path / "dangling").symlink_to(tmp_path / "later.sqlite")
    os.link(store, tmp_path / "hard.sqlite")
    for trace in ("runs.sqlite", "runs.sqlite-journal", "runs.sqlite-wal", "runs.sqlite-shm",
                  "link.sqlite", "hard.sqlite", "x/../runs.sqlite"):  # fmt: skip
        assert destinations_conflict(store, tmp_path / trace), trace
    assert destinations_conflict(tmp_path / "link.sqlite", tmp_path / "runs.sqlite-wal")
    assert destinations_conflict(tmp_path / "later.sqlite", tmp_path / "dangling")


def test_case_differences_conflict_only_on_case_insensitive_filesystems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names differing in case conflict when the directory ignores case, and only then."""
    store, trace = tmp_path / "Runs.sqlite", tmp_path / "runs.SQLITE"
    real = _destinations._ignores_case(str(tmp_path))
    assert destinations_conflict(store, trace) is real
    assert not any(name.startswith(".tubeless-case-") for name in os.listdir(tmp_path))
    monkeypatch.setattr(_destinations, "_ignores_case", lambda directory: True)
    assert destinations_conflict(store, trace)
    monkeypatch.setattr(_destinations, "_ignores_case", lambda directory: False)
    assert not destinations_conflict(store, trace)

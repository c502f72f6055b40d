"""Tests for the run-control flags and how parsed values split into options and controls."""

from __future__ import annotations

import dataclasses

from tubeless.cli._commands._options import (
    CONTROL_KEYS,
    control_parameters,
    domain_values,
    run_controls,
)
from tubeless.pipeline import RunControls


def test_builtins_add_target_only_with_declared_targets() -> None:
    """The run controls are dry_run, step_ids, [targets], continue_on_error, max_concurrency."""
    with_targets = [p.key for p in control_parameters(("a", "b"), ("b",))]
    without = [p.key for p in control_parameters(("a",), ())]
    assert with_targets == [
        "dry_run",
        "step_ids",
        "targets",
        "continue_on_error",
        "max_concurrency",
    ]
    assert without == ["dry_run", "step_ids", "continue_on_error", "max_concurrency"]


def test_every_control_key_is_a_run_controls_field() -> None:
    """Each run-control flag fills the `RunControls` field of the same name."""
    fields = {field.name for field in dataclasses.fields(RunControls)}
    assert set(CONTROL_KEYS) <= fields


def test_parsed_values_split_into_domain_options_and_controls() -> None:
    """Control keys become `RunControls`; every other key stays a domain option."""
    values = {
        "question": "hi",
        "dry_run": True,
        "step_ids": ["a"],
        "targets": [],
        "continue_on_error": False,
        "max_concurrency": 3,
    }
    assert domain_values(values) == {"question": "hi"}
    assert run_controls(values) == RunControls(
        dry_run=True, step_ids=["a"], targets=None, continue_on_error=False, max_concurrency=3
    )


def test_absent_controls_keep_their_defaults() -> None:
    """Values without control keys (a `tubeless plan` without flags) give default controls."""
    assert run_controls({"dry_run": False, "step_ids": None, "targets": None}) == RunControls()

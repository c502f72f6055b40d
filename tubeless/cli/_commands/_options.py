"""From flags to a run: the run-control flags, and parsed values split into options and controls.

Every pipeline command has the same run-control flags (`--dry-run`, `--step`, `--target`,
`--continue-on-error`, `--max-concurrency`). `CONTROL_FLAGS` is their one list; each
flag's value key is the `RunControls` field it fills, so `run_controls` needs no table of
its own and every other key of the parsed values is a domain option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tubeless.cli._commands._flags import CliParameter
from tubeless.pipeline import RunControls

__all__ = [
    "CONTROL_FLAGS",
    "CONTROL_KEYS",
    "EXECUTION_KEY_FLAG",
    "agent_controls_note",
    "control_parameters",
    "domain_values",
    "run_controls",
]

CONTROL_FLAGS: tuple[CliParameter, ...] = (
    CliParameter(
        key="dry_run",
        flag="dry-run",
        type="boolean",
        description="Preview the run: each step sees dry_run and its dry-run policy decides "
        "what runs",
    ),
    CliParameter(
        key="step_ids",
        flag="step",
        type="string",
        multiple=True,
        optional=True,
        group="execution",
        exclusive=True,
        metavar="STEP",
        description="Run exactly this step, without its prerequisites",
    ),
    CliParameter(
        key="targets",
        flag="target",
        type="string",
        multiple=True,
        optional=True,
        group="execution",
        exclusive=True,
        metavar="TARGET",
        description="Run this declared target and its prerequisites",
    ),
    CliParameter(
        key="continue_on_error",
        flag="continue-on-error",
        type="boolean",
        group="execution",
        description="Keep running independent steps after a step fails",
    ),
    CliParameter(
        key="max_concurrency",
        flag="max-concurrency",
        type="number",
        integer=True,
        minimum=1,
        default=1,
        group="execution",
        metavar="N",
        description="Run at most this many steps at once",
    ),
)
"""The run-control flags of every pipeline command; each key is a `RunControls` field."""

CONTROL_KEYS: tuple[str, ...] = tuple(parameter.key for parameter in CONTROL_FLAGS)
"""Value keys of the run controls; they never reach the domain options."""

EXECUTION_KEY_FLAG = CliParameter(
    key="execution_key",
    flag="execution-key",
    type="string",
    optional=True,
    metavar="KEY",
    description="Start, or resume after a crash, the durable execution with this key",
)
"""`--execution-key KEY`, on commands that declare it: the run context's `execution_key`."""


def control_parameters(
    step_ids: tuple[str, ...], target_ids: tuple[str, ...]
) -> tuple[CliParameter, ...]:
    """The run-control flags of one pipeline (`--target` only with declared targets).

    `--step` and `--target` accept only the pipeline's own step ids and targets, and
    their help lists them.
    """
    listed = {"step_ids": (step_ids, "steps"), "targets": (target_ids, "targets")}
    flags = []
    for parameter in CONTROL_FLAGS:
        if parameter.key not in listed:
            flags.append(parameter)
            continue
        ids, noun = listed[parameter.key]
        if parameter.key == "targets" and not ids:
            continue
        description = f"{parameter.description}; {noun}: {', '.join(ids) or 'none'}"
        flags.append(dataclasses.replace(parameter, choices=ids, description=description))
    return tuple(flags)


def agent_controls_note(pipeline: Any) -> str | None:
    """What the run controls mean for an agent, or `None` when `pipeline` is not one.

    An agent is one pipeline step, `agent`, so the controls act on the whole agent; its
    own `max_concurrency` limit, not `--max-concurrency`, bounds its tool calls.
    """
    try:
        steps = pipeline.definition.to_dict()["steps"]
    except (AttributeError, KeyError, TypeError):
        return None
    if len(steps) != 1 or not isinstance(steps[0].get("agent"), Mapping):
        return None
    limits = steps[0]["agent"].get("limits", {})
    calls = limits.get("maxConcurrency", 1)
    preview = (
        "previews it with its dry_run= decision source"
        if steps[0].get("dryRun") != "skip"
        else "skips it, as it has no dry_run= preview, so the run fails"
    )
    return (
        f"This command runs an agent: one step, {steps[0]['id']}, that loops decide, calls "
        f"and reduce. --dry-run {preview}; --step and --target can only name that step, "
        "so they run the whole agent; --continue-on-error has no other step to go on with; "
        "--max-concurrency bounds pipeline steps, not tool calls: the agent runs at most "
        f"{calls} tool call(s) at once (its max_concurrency limit)."
    )


def domain_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed values without the run controls: what becomes the domain options."""
    return {
        key: value
        for key, value in values.items()
        if key not in CONTROL_KEYS and key != EXECUTION_KEY_FLAG.key
    }


def run_controls(values: Mapping[str, Any]) -> RunControls:
    """The `RunControls` that parsed values ask for (absent or empty controls keep defaults).

    Also used by `tubeless plan`, whose `--step`, `--target` and `--dry-run` fill the
    same keys.
    """
    given: dict[str, Any] = {}
    for key in CONTROL_KEYS:
        value = values.get(key)
        if value is None:
            continue
        if key in ("step_ids", "targets"):
            if value:
                given[key] = list(value)
        elif key == "max_concurrency":
            given[key] = value
        else:
            given[key] = bool(value)
    return RunControls(**given)

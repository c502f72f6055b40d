"""Pipeline hooks: the `PipelineHooks` protocol and turning what users pass into hook sets.

A run calls hooks with its trace records, one at a time, in emission order, on the thread
delivering records. A hook that raises is logged once per hook set and never fails the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tubeless._types import Hook


class PipelineHooks(Protocol):
    """A hook set: subclass it and override the hooks you want; the rest do nothing.

    Each hook receives one `tubeless.trace.TraceRecord`: a read-only wire-form dict.
    `on_record` sees every record; the others see the records named in their docstring;
    `on_step_status` sees every `step.*` record except `step.attempted`. A mapping of hook
    name to callable is a hook set too, and `context={"hooks": ...}` takes a list of hook
    sets (`HooksLike`). At run time any object with some `on_*` methods also works; type
    checkers want a subclass.
    """

    def on_record(self, record: dict[str, Any]) -> None:
        """Every record of the run."""
        return

    def on_pipeline_start(self, record: dict[str, Any]) -> None:
        """`pipeline.started`: the run began (its plan and definition identity)."""
        return

    def on_step_plan(self, record: dict[str, Any]) -> None:
        """`step.planned`: one per step of the plan, before any step runs."""
        return

    def on_step_start(self, record: dict[str, Any]) -> None:
        """`step.running` without progress: a step attempt started."""
        return

    def on_step_progress(self, record: dict[str, Any]) -> None:
        """`step.running` with `progress`: a running step reported progress."""
        return

    def on_step_attempt(self, record: dict[str, Any]) -> None:
        """`step.attempted`: a handler reported a logical attempt (a retry inside it)."""
        return

    def on_log(self, record: dict[str, Any]) -> None:
        """`pipeline.log`: a step logged a message."""
        return

    def on_step_complete(self, record: dict[str, Any]) -> None:
        """`step.complete`: a step published its output."""
        return

    def on_step_skip(self, record: dict[str, Any]) -> None:
        """`step.skipped`: a step was skipped (dry run, policy, selection or a failed gate)."""
        return

    def on_step_cancel(self, record: dict[str, Any]) -> None:
        """`step.cancelled`: a step was cancelled."""
        return

    def on_step_fail(self, record: dict[str, Any]) -> None:
        """`step.failed`: a step failed; the record carries its error."""
        return

    def on_step_status(self, record: dict[str, Any]) -> None:
        """Every change of a step's status (`step.*` except `step.attempted`)."""
        return

    def on_finalize_start(self, record: dict[str, Any]) -> None:
        """`pipeline.finalize.started`: finalization began."""
        return

    def on_finalize_complete(self, record: dict[str, Any]) -> None:
        """`pipeline.finalize.completed`: the run has its value."""
        return

    def on_finalize_error(self, record: dict[str, Any]) -> None:
        """`pipeline.finalize.failed`: finalization failed; the record carries its error."""
        return

    def on_pipeline_complete(self, record: dict[str, Any]) -> None:
        """`pipeline.completed`: the run ended (completed, failed or cancelled)."""
        return


HOOK_NAMES = (
    "on_record",
    "on_pipeline_start",
    "on_step_plan",
    "on_step_start",
    "on_step_progress",
    "on_step_attempt",
    "on_log",
    "on_step_complete",
    "on_step_skip",
    "on_step_cancel",
    "on_step_fail",
    "on_step_status",
    "on_finalize_start",
    "on_finalize_complete",
    "on_finalize_error",
    "on_pipeline_complete",
)
"""Every hook name, in the order `PipelineHooks` declares them."""


def _object_hooks(hooks: object) -> dict[str, Hook]:
    kind = type(hooks)
    return {
        name: getattr(hooks, name)
        for name in HOOK_NAMES
        # A hook a `PipelineHooks` subclass inherits does nothing: it is not called.
        if hasattr(hooks, name) and getattr(kind, name, None) is not getattr(PipelineHooks, name)
    }


def normalize_hooks(hooks: object) -> tuple[dict[str, Hook], ...]:
    """Turn a hook set, an object with `on_*` methods, or a list of them into dicts.

    Raises:
        TypeError: for an unknown hook name in a mapping or a non-callable hook.
    """
    if hooks is None:
        return ()
    if isinstance(hooks, (list, tuple)):
        return tuple(hook_set for item in hooks for hook_set in normalize_hooks(item))
    if isinstance(hooks, Mapping):
        unknown = sorted(str(name) for name in hooks if name not in HOOK_NAMES)
        if unknown:
            raise TypeError(f"Unknown hook names: {', '.join(unknown)}")
        found = {name: hooks[name] for name in HOOK_NAMES if hooks.get(name) is not None}
    else:
        found = _object_hooks(hooks)
    for name, hook in found.items():
        if not callable(hook):
            raise TypeError(f"Hook {name} must be callable")
    return (found,) if found else ()

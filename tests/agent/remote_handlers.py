"""Module-level tool handlers for the executor tests: worker processes import them by name.

The tests put this directory on `sys.path` before any pool or cluster starts, so spawned
workers (which inherit the parent's `sys.path`) import this module as `remote_handlers`.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import uuid
from typing import Any

from tubeless.errors import ToolError

WAIT = 30
"""Seconds a handler waits for a cancellation that should come (never reached)."""


def days_between(start: datetime.date, end: datetime.date) -> dict[str, Any]:
    """Count the days from one date to another (a typed function tool).

    Args:
        start: the first day.
        end: the last day.
    """
    return {"days": (end - start).days, "pid": os.getpid()}


def echo(value: Any, context: Any) -> Any:
    """Return the input's `x`."""
    return value["x"]


def token(value: Any, context: Any) -> str:
    """Return a fresh random token: two calls that both ran return different tokens."""
    return f"{os.getpid()}-{uuid.uuid4().hex}"


def refuse(value: Any, context: Any) -> Any:
    """Fail the way an expected domain failure does."""
    raise ToolError("E_REFUSED", f"refused {value['x']}")


def explode(value: Any, context: Any) -> Any:
    """Fail unexpectedly, with a local that must never travel back."""
    secret = "hunter2-local-value"
    raise ValueError(f"exploded on {value['x']} ({len(secret)})")


def wait_for_cancel(value: Any, context: Any) -> Any:
    """Mark the start, wait on the remote signal, then mark what it saw and the end."""
    folder = pathlib.Path(value["folder"])
    (folder / f"started-{value['x']}").touch()
    seen = context.signal.wait(WAIT)
    (folder / f"finished-{value['x']}-{seen}").touch()
    return value["x"]


def sleeper(value: Any, context: Any) -> Any:
    """Mark the start, then sleep through the context (raises when cancelled)."""
    folder = pathlib.Path(value["folder"])
    (folder / f"started-{value['x']}").touch()
    try:
        context.sleep(WAIT)
    finally:
        (folder / f"finished-{value['x']}").touch()
    return value["x"]


def overlap_probe(value: Any, context: Any) -> bool:
    """Mark the start; call 0 reports whether call 1 started while it ran (it waits up to
    `seconds` for that)."""
    folder = pathlib.Path(value["folder"])
    (folder / f"started-{value['x']}").touch()
    if value["x"] != 0:
        return False
    return bool(_appears(folder / "started-1", value["seconds"]))


def _appears(path: pathlib.Path, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


def time_left(value: Any, context: Any) -> Any:
    """Return the seconds the worker's context says are left (`None` without a deadline)."""
    return context.time_left()


def nap_until_deadline(value: Any, context: Any) -> str:
    """Sleep through the context: it raises the timed-out `ToolError` at the deadline."""
    context.sleep(WAIT)
    return "woke"

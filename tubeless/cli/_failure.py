"""How the CLI prints a failure: the root cause once, with its code and step path.

A failed agent run nests: the agent's step failed because a turn's child run failed
because a tool's child run failed. Each level repeats the message below it, so the CLI
walks down to the errors that started it (the root causes) and prints each once, as
`Error: <phase> at step <agent > calls > tool> [<its own code>]: <message>`. A root
cause raised by user code (not by tubeless) gets a second line naming the file, line and
function that raised it. With `--traceback` (or `TUBELESS_TRACEBACK=1`) the original
exception's traceback follows; otherwise the CLI never prints a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import traceback
from collections.abc import Mapping
from typing import Any, TextIO

from tubeless._quote import quote
from tubeless.cli._exit import error_named, one_line, waiting_calls
from tubeless.errors import format_diagnostic

__all__ = [
    "TRACEBACK_ENV",
    "failure_lines",
    "print_failure",
    "print_rejected",
    "run_root_causes",
    "want_traceback",
]

TRACEBACK_ENV = "TUBELESS_TRACEBACK"
"""Set to `1` to print the root cause's traceback after a failed run."""

_MAX_DEPTH = 32
_CHILD_CODE = "TUBELESS_CHILD_FAILED"


@dataclasses.dataclass(frozen=True, slots=True)
class _Root:
    diagnostic: Any
    exception: BaseException | None
    path: tuple[str, ...]


def want_traceback(flag: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Whether to print tracebacks: the `--traceback` flag, or `TUBELESS_TRACEBACK=1`."""
    value = (os.environ if env is None else env).get(TRACEBACK_ENV, "")
    return flag or value.strip().lower() in ("1", "true", "yes", "on")


def _pairs(run: Any) -> list[tuple[Any, BaseException | None]]:
    causal = getattr(run, "causal_errors", None)
    errors = list(causal() if callable(causal) else getattr(run, "errors", None) or ())
    everything = list(getattr(run, "errors", None) or ())
    exceptions = list(getattr(run, "exceptions", None) or ())
    found = []
    for diagnostic in errors:
        index = next((i for i, item in enumerate(everything) if item is diagnostic), None)
        exception = exceptions[index] if index is not None and index < len(exceptions) else None
        found.append((diagnostic, exception))
    return found


def _children(exception: BaseException | None) -> list[BaseException]:
    """The failed child runs (or fan-out items) behind a child step's exception."""
    if exception is None:
        return []
    if getattr(exception, "result", None) is not None:
        return [exception]
    items = getattr(exception, "item_errors", None)
    if isinstance(items, tuple) and items:
        return [item for item in items if isinstance(item, BaseException)]
    return []


def _roots(run: Any, path: tuple[str, ...], depth: int) -> list[_Root]:
    roots: list[_Root] = []
    for diagnostic, exception in _pairs(run):
        step = getattr(diagnostic, "step_id", None)
        here = (*path, step) if step else path
        children = _children(exception) if diagnostic.code == _CHILD_CODE else []
        nested: list[_Root] = []
        if depth < _MAX_DEPTH:
            for child in children:
                result = getattr(child, "result", None)
                if result is not None:
                    nested += _roots(result, _child_path(here, run, child), depth + 1)
                else:
                    nested += _item_roots(child, here, depth + 1)
        roots += nested or [_Root(diagnostic, exception, here)]
    return roots


def _child_path(path: tuple[str, ...], run: Any, child: BaseException) -> tuple[str, ...]:
    """The path into a child run: the call (or item) it ran for, and another pipeline's id.

    A tool's or a turn's run belongs to its agent (`planner/turn`); a subagent or a
    pipeline tool does not (`researcher`), so its id is named: `agent > calls > ask-1 >
    researcher > agent > decide`.
    """
    item = getattr(child, "item_key", None)
    if isinstance(item, str) and item:
        path = (*path, item)
    parent = str(getattr(run, "pipeline_id", "")).split("/")[0]
    pipeline = str(getattr(getattr(child, "result", None), "pipeline_id", ""))
    if pipeline and pipeline.split("/")[0] != parent:
        path = (*path, pipeline)
    return path


def _item_roots(exception: BaseException, path: tuple[str, ...], depth: int) -> list[_Root]:
    """A fan-out item failed with a plain exception: it is its own root cause."""
    if depth < _MAX_DEPTH and getattr(exception, "item_errors", None):
        found: list[_Root] = []
        for item in _children(exception):
            found += _item_roots(item, path, depth + 1)
        if found:
            return found
    return [_Root(None, exception, path)]


def root_causes(error: BaseException) -> list[_Root]:
    """The errors that started a failed run, each once, with the step path to it."""
    result = getattr(error, "result", None)
    if not error_named(error, "PipelineExecutionError") or result is None:
        return []
    return run_root_causes(result)


def run_root_causes(run: Any) -> list[_Root]:
    """The errors that started the failure of `run` (a `PipelineRun`), each once."""
    unique: list[_Root] = []
    seen: set[int] = set()
    for root in _roots(run, (), 0):
        key = id(root.exception) if root.exception is not None else id(root.diagnostic)
        if key not in seen:
            seen.add(key)
            unique.append(root)
    return unique


def _is_ours(exception: BaseException) -> bool:
    return type(exception).__module__.split(".")[0] == "tubeless"


def _root_line(root: _Root) -> str:
    path = " > ".join(root.path)
    exception, diagnostic = root.exception, root.diagnostic
    if diagnostic is None:
        assert exception is not None
        return f"execution at step {path}: {one_line(exception)}"
    code = diagnostic.source_code or diagnostic.code
    kind = ""
    if exception is not None and not _is_ours(exception) and not diagnostic.source_code:
        kind = f" ({type(exception).__name__})"
    step = f" at step {path}" if path else ""
    message = " ".join(str(diagnostic.message).split())
    tail = ""
    cause = getattr(diagnostic, "cause", None)
    if cause is not None:
        deepest = cause.deepest()
        if " ".join(str(deepest.message).split()) != message:
            tail = f"; caused by: {' '.join(str(deepest.message).split())}"
    return f"{diagnostic.phase}{step} [{code}]{kind}: {message}{tail}"


def _where(exception: BaseException | None) -> str | None:
    """`raised at FILE:LINE in FUNCTION` for an exception from user code."""
    if exception is None or _is_ours(exception) or exception.__traceback__ is None:
        return None
    frames = traceback.extract_tb(exception.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    return f"  raised at {last.filename}:{last.lineno} in {last.name}"


def _run_error_line(error: Any) -> str:
    try:
        return " ".join(format_diagnostic(error).split())
    except Exception:
        return " ".join(str(getattr(error, "message", error)).split())


_INPUT_LIMIT = 200


def _plain(text: str) -> str:
    """`text` as it is when it is short and printable, else a bounded, escaped quote."""
    if len(text) <= 128 and text.isprintable() and " " not in text:
        return text
    return quote(text)


def approval_lines(pending: tuple[Any, ...]) -> list[str]:
    """What a run waiting for approval prints: each waiting call, and how to decide."""
    lines = [f"Waiting for approval: {len(pending)} call(s); nothing of their batch ran."]
    for call in pending:
        shown = json.dumps(call.input, ensure_ascii=True, sort_keys=True, default=str)
        if len(shown) > _INPUT_LIMIT:
            shown = shown[: _INPUT_LIMIT - 3] + "..."
        lines.append(
            f"  {_plain(call.call_id)}  {_plain(call.tool)}  turn {call.turn}  "
            f"{_plain(call.agent)}  {shown}"
        )
    lines.append(
        "Run it again with --approve CALL_ID or --reject CALL_ID=MESSAGE for each call "
        "(tubeless run FILE --approve ID -- ARGS); nothing that ran runs again."
    )
    return lines


def failure_lines(error: BaseException) -> list[str]:
    """`Error: ...` per root cause of a failed run (and where user code raised it).

    A failure that is not a failed run gives one `Error: <message>` line; a run that
    waits for approval lists the waiting calls instead.
    """
    pending = waiting_calls(error)
    if pending:
        return approval_lines(pending)
    roots = root_causes(error)
    if not roots:
        return [f"Error: {one_line(error)}"]
    lines: list[str] = []
    for root in roots:
        try:
            lines.append(f"Error: {_root_line(root)}")
        except Exception:
            lines.append(f"Error: {_run_error_line(root.diagnostic)}")
        where = _where(root.exception)
        if where is not None:
            lines.append(where)
    return lines


def traceback_lines(error: BaseException) -> list[str]:
    """The traceback of each root cause's exception (or of `error` when it is not a run)."""
    roots = root_causes(error)
    exceptions = [root.exception for root in roots if root.exception is not None]
    if not roots:
        exceptions = [error]
    lines: list[str] = []
    for exception in exceptions:
        lines.append("")
        lines += "".join(traceback.format_exception(exception)).rstrip("\n").split("\n")
    return lines


def print_failure(
    error: BaseException, stream: TextIO, *, show_traceback: bool = False, flag: bool = False
) -> None:
    """Print `failure_lines(error)` on `stream`, then the tracebacks when asked to.

    Without tracebacks, a root cause raised by user code ends with a hint naming how to
    see its traceback (`--traceback` too when `flag`: the program has that flag).
    """
    lines = failure_lines(error)
    if show_traceback:
        lines += traceback_lines(error)
    elif any(line.startswith("  raised at ") for line in lines):
        how = f"--traceback or {TRACEBACK_ENV}=1" if flag else f"{TRACEBACK_ENV}=1"
        lines.append(f"  ({how} shows the traceback)")
    stream.write("".join(f"{line}\n" for line in lines))
    stream.flush()


def print_rejected(error: Any, stream: TextIO) -> None:
    """Print rejected arguments: one `Error:` line each, a blank line, then the help."""
    lines = [f"Error: {message}" for message in error.errors]
    help_text = str(getattr(error, "help_text", "")).rstrip("\n")
    if help_text:
        lines += ["", help_text]
    stream.write("".join(f"{line}\n" for line in lines))
    stream.flush()

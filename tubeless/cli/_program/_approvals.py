"""`tubeless approvals`: the tool calls of durable agents that wait for a decision (read-only)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tubeless._quote import quote
from tubeless.cli._exit import ExitCode
from tubeless.cli._program._stores import open_checkpoint_reader
from tubeless.errors import AgentError, CliLoadError

__all__ = ["approval_decisions", "handle_approvals"]

_INPUT_LIMIT = 200


def _waiting(store: Any, key: str | None) -> list[tuple[str, Any]]:
    keys = [key] if key is not None else store.keys()
    return [(name, call) for name in keys for call in store.pending_approvals(name)]


def _plain(text: str) -> str:
    if len(text) <= 128 and text.isprintable() and " " not in text:
        return text
    return quote(text)


def handle_approvals(arguments: argparse.Namespace) -> int:
    """`tubeless approvals --store FILE|URL [--json] [KEY]`: list the waiting calls.

    The store is opened read-only: a file the user may not write can be listed.

    Raises:
        CliLoadError: when the store file is missing, is not a checkpoint store, is
            damaged or cannot be read (the message carries the checkpoint error's code).
    """
    store = open_checkpoint_reader(arguments.store)
    try:
        found = _waiting(store, arguments.key)
    except AgentError as error:
        raise CliLoadError(f"Cannot read checkpoint store ({error.code}): {error}") from error
    if arguments.json:
        rows = [{"key": key, **call.to_dict()} for key, call in found]
        sys.stdout.write(json.dumps({"pendingApprovals": rows}, indent=2, sort_keys=True) + "\n")
        return ExitCode.SUCCESS
    if not found:
        sys.stdout.write("No tool calls wait for approval.\n")
        return ExitCode.SUCCESS
    for key, call in found:
        shown = json.dumps(call.input, ensure_ascii=True, sort_keys=True, default=str)
        if len(shown) > _INPUT_LIMIT:
            shown = shown[: _INPUT_LIMIT - 3] + "..."
        sys.stdout.write(
            f"{_plain(key)}  {_plain(call.call_id)}  {_plain(call.tool)}  turn {call.turn}  "
            f"{_plain(call.agent)}  {shown}\n"
        )
    return ExitCode.SUCCESS


def approval_decisions(approve: list[str] | None, reject: list[str] | None) -> dict[str, Any]:
    """The run context's `approvals` from `--approve CALL_ID` and `--reject CALL_ID=MESSAGE`.

    Raises:
        ValueError: for a `--reject` without `=MESSAGE`, or a call decided twice.
    """
    from tubeless.agent import approve as approved
    from tubeless.agent import reject as rejected

    decisions: dict[str, Any] = {}
    for call_id in approve or ():
        if call_id in decisions:
            raise ValueError(f"Call {quote(call_id)} is decided twice")
        decisions[call_id] = approved()
    for given in reject or ():
        call_id, equals, message = given.partition("=")
        if not equals or not call_id or not message.strip():
            raise ValueError(f"--reject needs CALL_ID=MESSAGE, got {quote(given)}")
        if call_id in decisions:
            raise ValueError(f"Call {quote(call_id)} is decided twice")
        decisions[call_id] = rejected(message)
    return decisions

"""`python -m tubeless`: pick the command, run it, and turn every failure into an exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from tubeless._version import DISTRIBUTION, package_version
from tubeless.cli._argparse import StrictArgumentParser
from tubeless.cli._exit import ExitCode
from tubeless.cli._failure import print_failure, print_rejected, want_traceback
from tubeless.cli._program._approvals import handle_approvals
from tubeless.cli._program._batch import handle_batch
from tubeless.cli._program._export import handle_export
from tubeless.cli._program._history import handle_history
from tubeless.cli._program._mcp import handle_mcp
from tubeless.cli._program._parser import get_parser
from tubeless.cli._program._run import handle_run
from tubeless.cli._program._views import handle_graph, handle_inspect, handle_list, handle_plan
from tubeless.errors import CliHelpRequested, CliLoadError, CliUsageError

__all__ = ["main"]

_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": handle_list,
    "inspect": handle_inspect,
    "plan": handle_plan,
    "graph": handle_graph,
    "history": handle_history,
    "export": handle_export,
    "approvals": handle_approvals,
    "batch": handle_batch,
    "mcp": handle_mcp,
}


def _commands(parser: StrictArgumentParser) -> dict[str, StrictArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _print_help(text: str) -> int:
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()
    return ExitCode.SUCCESS


def _dispatch(argv: Sequence[str]) -> int:
    parser = get_parser()
    commands = _commands(parser)
    if not argv:
        raise CliUsageError(["Pass a command."], parser.format_help())
    head, rest = argv[0], list(argv[1:])
    if head in ("-h", "--help"):
        return _print_help(parser.format_help())
    if head in ("-V", "--version"):
        return _print_help(f"{DISTRIBUTION} {package_version()}")
    if head == "help":
        topic = commands.get(rest[0]) if rest else None
        return _print_help((topic or parser).format_help())
    command = commands.get(head)
    if command is None:
        raise CliUsageError([f'Unknown command "{head}".'], parser.format_help())
    try:
        if head == "run":
            return handle_run(command, rest)
        return _HANDLERS[head](command.parse_strictly(rest))
    except CliUsageError as error:
        raise CliUsageError(error.errors, error.help_text or command.format_help()) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tubeless` command line and return its exit code.

    Args:
        argv: the arguments without the program name (default: `sys.argv[1:]`).

    Returns:
        0 success (help included), 1 usage, 2 load, 3 definition, 4 invalid command
        arguments, 5 planning, 6 execution, 7 cancellation, 8 waiting for approval; 130
        for Ctrl-C outside a run.
    """
    try:
        return int(_dispatch(sys.argv[1:] if argv is None else argv))
    except CliHelpRequested as request:
        return _print_help(request.help_text)
    except CliUsageError as error:
        print_rejected(error, sys.stderr)
        return ExitCode.USAGE
    except CliLoadError as error:
        sys.stderr.write(f"Error: {error}\n")
        sys.stderr.flush()
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`tubeless history | head`): stop quietly, and keep the
        # interpreter's final flush of stdout from failing again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.EXECUTION
    except Exception as error:  # a bug or an unexpected environment: a traceback on request
        print_failure(error, sys.stderr, show_traceback=want_traceback())
        return ExitCode.EXECUTION

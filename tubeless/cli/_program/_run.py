"""`tubeless run`: load a pipeline command, wire traces and Ctrl-C, run it, pick the exit code."""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tubeless.cli._argparse import StrictArgumentParser
from tubeless.cli._commands._command import PipelineCommand
from tubeless.cli._exit import ExitCode, exit_code_for
from tubeless.cli._failure import print_failure, print_rejected, want_traceback
from tubeless.cli._interrupt import InterruptGuard
from tubeless.cli._program._approvals import approval_decisions
from tubeless.cli._program._destinations import destinations_conflict
from tubeless.cli._program._sources import resolve_target
from tubeless.cli._program._stdout import diverted_stdout
from tubeless.cli._program._stores import is_store_url, open_trace_writer
from tubeless.errors import AgentError, CliHelpRequested, CliUsageError, CliValidationError
from tubeless.progress import sanitize_terminal_text

__all__ = ["handle_run"]

_AFTER_DASHES = "Application flags belong after --."


def _parse(parser: StrictArgumentParser, argv: Sequence[str]) -> tuple[Any, list[str]]:
    tokens = list(argv)
    split = tokens.index("--") if "--" in tokens else len(tokens)
    try:
        arguments = parser.parse_strictly(tokens[:split])
    except CliUsageError as error:
        messages = [f"{message.rstrip('.')}. {_AFTER_DASHES}" for message in error.errors]
        raise CliUsageError(messages, error.help_text) from None
    if arguments.app_args:
        raise CliUsageError(
            [f"Unexpected argument {arguments.app_args[0]!r}. {_AFTER_DASHES}"],
            parser.format_help(),
        )
    return arguments, tokens[split + 1 :]


def handle_run(parser: StrictArgumentParser, argv: Sequence[str]) -> int:
    """`tubeless run [options] FILE|ID [-- APP-ARGS]`; returns the exit code.

    Raises:
        CliUsageError: for bad arguments of the program or a store and trace on one file.
        CliLoadError: when the command cannot be loaded.
    """
    arguments, app_args = _parse(parser, argv)
    try:
        approvals = approval_decisions(arguments.approve, arguments.reject)
    except (ValueError, AgentError) as error:
        raise CliUsageError([str(error)], parser.format_help()) from None
    cwd = Path.cwd()
    target = resolve_target(arguments.source, arguments.export, arguments.project, cwd)
    command = target.command()
    store = arguments.store
    trace = None if arguments.trace in (None, "-") else cwd / arguments.trace
    if (
        store is not None
        and trace is not None
        and not is_store_url(store)
        and destinations_conflict(cwd / store, trace)
    ):
        raise CliUsageError(
            ["--store and --trace cannot write to the same file."], parser.format_help()
        )
    with contextlib.ExitStack() as stack:
        stdout_trace = stack.enter_context(diverted_stdout()) if arguments.trace == "-" else None
        try:
            sink = _open_sink(store, trace if stdout_trace is None else stdout_trace)
        except Exception as error:
            print_failure(error, sys.stderr)
            return ExitCode.EXECUTION
        show = want_traceback(bool(arguments.traceback))
        where = RunIdLine(arguments.store, arguments.trace)
        code = _execute(
            command, app_args, sink, target.cwd, approvals, show_traceback=show, run_id=where
        )
        return _close(sink, code)


class RunIdLine:
    """Notes the root run's id as it starts and prints it on stderr once the run ends.

    With `--store` (or a `--trace` file) the line says how to show the run again.
    """

    def __init__(self, store: str | None, trace: str | None) -> None:
        self.run_id: str | None = None
        self._store = store
        self._trace = None if trace == "-" else trace

    def on_pipeline_start(self, record: dict[str, Any]) -> None:
        """Keep the first run without a parent: the command's own run."""
        if self.run_id is None and not record.get("parentRunId"):
            self.run_id = str(record["runId"])

    def print(self) -> None:
        """Write `Run id: ...` (and the history command that shows it) to stderr."""
        if self.run_id is None:
            return
        line = f"Run id: {sanitize_terminal_text(self.run_id)}"
        bare = sanitize_terminal_text(self.run_id.rpartition(":")[2])
        if self._store is not None:
            line += f" (tubeless history --store {shlex.quote(self._store)} {bare})"
        elif self._trace is not None:
            line += f" (tubeless history --trace {shlex.quote(self._trace)} {bare})"
        print(line, file=sys.stderr, flush=True)


def _open_sink(store: str | None, trace: Any) -> Any:
    from tubeless.trace import NdjsonTraceSink, compose_sinks

    sinks: list[Any] = []
    try:
        if store is not None:
            sinks.append(open_trace_writer(store))
        if trace is not None:
            sinks.append(NdjsonTraceSink(trace))
    except BaseException:
        for opened in sinks:
            with contextlib.suppress(Exception):
                opened.close()
        raise
    if not sinks:
        return None
    return sinks[0] if len(sinks) == 1 else compose_sinks(*sinks)


def _execute(
    command: PipelineCommand,
    app_args: Sequence[str],
    sink: Any,
    cwd: str | None,
    approvals: dict[str, Any],
    *,
    show_traceback: bool,
    run_id: RunIdLine,
) -> int:
    run_signal = threading.Event()
    context: dict[str, Any] = {"signal": run_signal, "hooks": [run_id]}
    if approvals:
        context["approvals"] = approvals
    if sink is not None:
        context["tracing"] = sink
    if cwd is not None:
        context["cwd"] = cwd
    code: int = ExitCode.SUCCESS
    with InterruptGuard(run_signal) as guard:
        try:
            command.run(app_args, context=context)
            run_id.print()
        except CliHelpRequested as request:
            print(request.help_text.rstrip("\n"), file=sys.stdout, flush=True)
        except CliValidationError as rejected:
            print_rejected(rejected, sys.stderr)
            code = ExitCode.VALIDATION
        except Exception as error:
            run_id.print()
            print_failure(error, sys.stderr, show_traceback=show_traceback, flag=True)
            code = exit_code_for(error)
    return ExitCode.CANCELLATION if guard.interrupted else code


def _close(sink: Any, code: int) -> int:
    close = getattr(sink, "close", None)
    if close is None:
        return code
    try:
        close()
    except Exception as error:
        print_failure(error, sys.stderr)
        return ExitCode.EXECUTION if code == ExitCode.SUCCESS else code
    return code

"""The `tubeless` argparse parser: every command and option, with sentence-style help.

`get_parser()` builds it without side effects, so argparse-manpage can import it to
write `man/tubeless.1`.
"""

from __future__ import annotations

import argparse

from tubeless.cli._argparse import StrictArgumentParser

__all__ = ["COMMAND_HELP", "get_parser"]

PROG = "tubeless"
DEFAULT_STORE = ".tubeless/runs.sqlite"
"""The SQLite store that `history` reads by default."""

COMMAND_HELP = {
    "list": "List the pipelines registered in the project file.",
    "inspect": "Show a pipeline's identity, targets, steps and default plan.",
    "plan": "Preview which steps a run would select, without running anything.",
    "graph": "Print the pipeline's static graph as a Mermaid flowchart.",
    "run": "Run a pipeline command (or a project pipeline) with its own arguments.",
    "history": "Show runs recorded in a SQLite store or an NDJSON trace.",
    "export": "Send recorded runs to an observability backend (export otel: OTLP/HTTP).",
    "approvals": "List the tool calls of durable agents that wait for approval.",
    "batch": "Run a pipeline once per line of a JSON-lines file, resumably.",
    "mcp": "Work with MCP servers as tool sources (mcp lock: pin their tool definitions).",
}
"""One sentence per command, as the top-level help lists them."""

_EPILOG = (
    "Exit codes: 0 success (help included), 1 usage error, 2 load error, 3 definition "
    "error, 4 invalid command arguments, 5 planning error, 6 execution error, 7 cancelled, "
    "8 waiting for approval (a durable agent stopped before calls that need approval)."
)


def _add_command(
    commands: argparse._SubParsersAction[StrictArgumentParser],
    name: str,
    *,
    details: str = "",
    usage: str | None = None,
) -> StrictArgumentParser:
    """Add command `name`: its `COMMAND_HELP` sentence is its help and opens its description."""
    return commands.add_parser(
        name, usage=usage, help=COMMAND_HELP[name], description=COMMAND_HELP[name] + details
    )


def _add_action(
    commands: argparse._SubParsersAction[StrictArgumentParser],
    name: str,
    *,
    dest: str,
    metavar: str,
    action: str,
    help: str,
    description: str,
) -> StrictArgumentParser:
    """Add command `name`, which takes one required action (so far one: `action`)."""
    actions = _add_command(commands, name).add_subparsers(
        dest=dest, metavar=metavar, required=True, parser_class=StrictArgumentParser
    )
    return actions.add_parser(action, help=help, description=description)


def _add_source_options(parser: argparse.ArgumentParser, *, kind: str) -> None:
    parser.add_argument(
        "-e",
        "--export",
        metavar="NAME",
        help=f"Use the module export called NAME when the file exports more than one {kind}.",
    )
    parser.add_argument(
        "-p",
        "--project",
        metavar="PATH",
        help="Look the positional up as a pipeline id registered in this project file "
        "(default: ./tubeless_project.py when the positional is not a file).",
    )
    parser.add_argument(
        "source",
        metavar="FILE|ID",
        help="A Python module file, or a pipeline id registered in the project file.",
    )


def _add_list(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(commands, "list")
    parser.add_argument(
        "-p",
        "--project",
        metavar="PATH",
        help="Read this project file instead of ./tubeless_project.py.",
    )
    parser.add_argument(
        "--json", action="store_true", help="Print the project as JSON instead of one id per line."
    )


def _add_inspect(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(commands, "inspect")
    _add_source_options(parser, kind="pipeline or pipeline command")
    parser.add_argument(
        "--json", action="store_true", help="Print the identity and the plan as JSON."
    )


def _add_plan(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(commands, "plan", details=" Domain options are never needed.")
    _add_source_options(parser, kind="pipeline or pipeline command")
    parser.add_argument(
        "-t",
        "--target",
        action="append",
        metavar="ID",
        help="Select this declared target and its prerequisites (repeatable).",
    )
    parser.add_argument(
        "-s",
        "--step",
        action="append",
        metavar="ID",
        help="Select exactly this step, without prerequisites (repeatable).",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Show what each step would do in a dry run."
    )
    parser.add_argument(
        "--explain", action="store_true", help="Say why each step is selected or skipped."
    )
    parser.add_argument("--json", action="store_true", help="Print the whole plan as JSON.")


def _add_graph(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(commands, "graph")
    _add_source_options(parser, kind="pipeline or pipeline command")
    parser.add_argument(
        "-d",
        "--direction",
        choices=("BT", "LR", "RL", "TB", "TD"),
        default="TD",
        metavar="DIRECTION",
        help="Draw the flowchart in this direction: BT, LR, RL, TB or TD (default: TD).",
    )
    parser.add_argument(
        "--descriptions", action="store_true", help="Add each step's description to its node."
    )
    parser.add_argument(
        "--markdown", action="store_true", help="Wrap the flowchart in a fenced mermaid block."
    )


def _add_run(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(
        commands,
        "run",
        usage="%(prog)s [-h] [-e NAME] [-p PATH] [--trace PATH] [--store PATH|URL] [--traceback] "
        "[--approve CALL_ID] [--reject CALL_ID=MESSAGE] FILE|ID [-- APP-ARG ...]",
        details=" Application flags belong after --; use "
        "'tubeless run FILE -- --help' for the command's own help. A durable agent (one "
        "defined with durability=) resumes where it stopped when run again with the same "
        "execution key: its completed calls are not repeated, and a call that was running "
        "when the process died is reported to the agent as TUBELESS_AGENT_CALL_INTERRUPTED "
        "unless its tool is replay='safe'. Commands that declare it take --execution-key "
        "KEY to choose the key. A run that stops before tool calls that need approval "
        "exits 8 and lists them; run the same command again with one --approve or "
        "--reject per waiting call to decide them.",
    )
    _add_source_options(parser, kind="pipeline command")
    parser.add_argument(
        "--trace",
        metavar="PATH",
        help="Write the run's trace as NDJSON to PATH (a file already there is replaced), "
        "or to stdout for '-' (everything else then goes to stderr).",
    )
    parser.add_argument(
        "--store",
        metavar="PATH|URL",
        help="Append the run's trace records to the SQLite store at PATH (created when "
        "missing; earlier runs are kept), or to the PostgreSQL database at a postgresql:// "
        "URL (needs the postgres extra).",
    )
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="After a failure, also print the traceback of the exception that started it "
        "(as does the environment variable TUBELESS_TRACEBACK=1).",
    )
    parser.add_argument(
        "--approve",
        action="append",
        metavar="CALL_ID",
        help="Approve the waiting tool call CALL_ID of the durable execution being resumed "
        "(repeatable).",
    )
    parser.add_argument(
        "--reject",
        action="append",
        metavar="CALL_ID=MESSAGE",
        help="Reject the waiting tool call CALL_ID; the agent sees the outcome "
        "TUBELESS_AGENT_CALL_REJECTED with MESSAGE (repeatable).",
    )
    parser.add_argument(
        "app_args",
        nargs="*",
        default=[],  # optional: without a default argparse lists it as required
        metavar="APP-ARG",
        help="The command's own arguments, after a bare --.",
    )


def _add_history(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(
        commands,
        "history",
        details=" The store is only read, never created. An "
        "agent run's detail ends with its agent tree; the calls of a resumed durable agent "
        "are marked reused (its saved outcome) or interrupted.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--store",
        metavar="PATH|URL",
        help=f"Read this SQLite store, or the PostgreSQL database at a postgresql:// URL "
        f"(default: {DEFAULT_STORE}).",
    )
    source.add_argument("--trace", metavar="PATH", help="Read this NDJSON trace file instead.")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="Print the run list, or the one run, as JSON."
    )
    output.add_argument(
        "--events", action="store_true", help="Print the raw recorded events as NDJSON."
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=_positive_int,
        help="List only the N most recent runs, each with its child runs (the list is "
        "newest first).",
    )
    parser.add_argument(
        "run_id",
        nargs="?",
        metavar="RUN_ID",
        help="Show this run in detail instead of the list: its full id "
        "(PIPELINE:UUID, as run prints it) or the UUID alone.",
    )


def _add_approvals(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(
        commands,
        "approvals",
        details=" The store is the agent's checkpoint store "
        "(its Durability store: a SqliteCheckpointStore file, or a PostgresCheckpointStore "
        "database named by its postgresql:// URL), not a trace store; it is only "
        "read, never created. Each line shows the execution key, the call id, the tool, the "
        "turn, the agent path and the proposed input. Decide them with tubeless run FILE "
        "--approve CALL_ID or --reject CALL_ID=MESSAGE.",
    )
    parser.add_argument(
        "--store",
        metavar="FILE|URL",
        required=True,
        help="Read this SQLite checkpoint store, or the PostgreSQL database at a "
        "postgresql:// URL.",
    )
    parser.add_argument("--json", action="store_true", help="Print the waiting calls as JSON.")
    parser.add_argument(
        "key",
        nargs="?",
        metavar="KEY",
        help="Show only the execution with this key (default: every execution).",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


_OTEL_DESCRIPTION = (
    "Replay recorded runs as OpenTelemetry spans to an OTLP/HTTP endpoint, after the fact; "
    "the store is only read, never created. Needs the otel extra: "
    "pip install 'tubeless-pipelines[otel]'. Each run becomes a span "
    "(an agent: invoke_agent ID; a turn: turn N; a tool call: execute_tool TOOL), each step "
    "a span under it, with the recorded start and end times; ids are derived from the run "
    "ids, so exporting a run again gives the same spans. Only ids, codes and statuses are "
    "sent, never options, inputs, outputs or messages. OTEL_EXPORTER_OTLP_HEADERS, "
    "OTEL_EXPORTER_OTLP_TIMEOUT and OTEL_SERVICE_NAME (default: tubeless) apply."
)


def _add_export(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    otel = _add_action(
        commands,
        "export",
        dest="format",
        metavar="FORMAT",
        action="otel",
        help="Replay recorded runs as OpenTelemetry spans to an OTLP/HTTP endpoint.",
        description=_OTEL_DESCRIPTION,
    )
    source = otel.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--store",
        metavar="FILE|URL",
        help="Read the runs from this SQLite store, or from the PostgreSQL database at a "
        "postgresql:// URL.",
    )
    source.add_argument("--trace", metavar="FILE", help="Read the runs from this NDJSON trace.")
    otel.add_argument(
        "--endpoint",
        metavar="URL",
        help="The OTLP/HTTP traces URL; /v1/traces is added to a bare http://host:port "
        "(default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else "
        "http://localhost:4318/v1/traces).",
    )
    otel.add_argument(
        "run_id",
        nargs="?",
        metavar="RUN_ID",
        help="Export only the run tree holding this run (its root and every child run).",
    )


_LOCK_DESCRIPTION = (
    "Start (--stdio) or reach (--url) an MCP server, list its tools and print their "
    "definitions (name, description, input and output schema, and a sha256 digest of each) "
    "as a lock document on stdout: tubeless mcp lock --stdio python server.py > "
    "mcp.lock.json. Review it and commit it; server.tools(pin='mcp.lock.json') then reads the "
    "definitions from it, and a run whose live server differs fails with "
    "TUBELESS_MCP_TOOL_DRIFT before any call. No tool is called. Needs the mcp extra: "
    "pip install 'tubeless-pipelines[mcp]'."
)


def _add_mcp(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    lock = _add_action(
        commands,
        "mcp",
        dest="mcp_command",
        metavar="ACTION",
        action="lock",
        help="Print an MCP server's tool definitions as a lock document.",
        description=_LOCK_DESCRIPTION,
    )
    source = lock.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--stdio",
        nargs=argparse.REMAINDER,
        metavar="CMD",
        help="Run the server as this command (with the rest of the arguments as its own) "
        "and speak MCP over its stdin and stdout; put it last.",
    )
    source.add_argument(
        "--url", metavar="URL", help="Reach the server over streamable HTTP at this URL."
    )
    lock.add_argument(
        "--header",
        action="append",
        metavar="NAME:VALUE",
        help="Send this HTTP header with every request to --url (repeatable).",
    )


def get_parser() -> StrictArgumentParser:
    """Build the whole `tubeless` parser (no side effects: nothing is loaded or printed)."""
    parser = StrictArgumentParser(
        prog=PROG,
        description="Inspect, plan, draw and run tubeless pipelines and pipeline commands.",
        epilog=_EPILOG,
    )
    parser.add_argument(
        "-V",
        "--version",
        action="store_true",
        help="Print the distribution name and version (tubeless-pipelines X.Y.Z) and exit.",
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", parser_class=StrictArgumentParser
    )
    for add in (_add_list, _add_inspect, _add_plan, _add_graph, _add_run, _add_history):
        add(commands)
    _add_export(commands)
    _add_approvals(commands)
    _add_batch(commands)
    _add_mcp(commands)
    return parser


def _add_batch(commands: argparse._SubParsersAction[StrictArgumentParser]) -> None:
    parser = _add_command(
        commands,
        "batch",
        details=" Each input line is a JSON object, the options "
        "of one run; its index is its 0-based line number. A result line (index, status, "
        "and the value or the error's code and message) is appended to the output as each "
        "run ends; running the same command again skips the indices the output holds, and "
        "a durable agent resumes inputs that were cut off. At the end the output is "
        "rewritten in index order and a summary is printed. Exit 0 only when every input "
        "completed, 6 otherwise, 7 when interrupted.",
    )
    _add_source_options(parser, kind="pipeline or pipeline command")
    parser.add_argument(
        "--inputs", metavar="PATH", required=True, help="Read one JSON object per line."
    )
    parser.add_argument(
        "--output", metavar="PATH", required=True, help="Append one JSON result line per input."
    )
    parser.add_argument(
        "--workers",
        metavar="N",
        type=_positive_int,
        help="Runs in flight at once (default: 8 threads, or the cluster's worker threads).",
    )
    parser.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="Run on the Dask cluster whose scheduler is at ADDRESS (extra 'dask'); the "
        "workers import the pipeline's file.",
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="Append every run's trace records to the SQLite store at PATH.",
    )

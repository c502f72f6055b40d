"""`tubeless mcp lock`: print a server's tool definitions as an MCP lock document."""

from __future__ import annotations

import argparse
import sys

from tubeless.cli._exit import ExitCode
from tubeless.errors import CliLoadError, CliUsageError, McpError

__all__ = ["handle_mcp"]


def _headers(values: list[str] | None) -> dict[str, str]:
    headers = {}
    for value in values or []:
        name, colon, text = value.partition(":")
        if not colon or not name.strip():
            # The value may be a secret: the message never quotes it.
            raise CliUsageError(["--header must be NAME:VALUE"])
        headers[name.strip()] = text.strip()
    return headers


def handle_mcp(arguments: argparse.Namespace) -> int:
    """`tubeless mcp lock (--stdio CMD ARGS... | --url URL)`: the lock JSON on stdout.

    Raises:
        CliLoadError: when the server cannot be started, reached or listed (exit 2).
        CliUsageError: for an empty `--stdio` or a malformed `--header`.
    """
    from tubeless.mcp import http_server, stdio_server

    if arguments.stdio is not None:
        if not arguments.stdio:
            raise CliUsageError(["--stdio needs the server's command"])
        server = stdio_server(arguments.stdio[0], arguments.stdio[1:])
    else:
        server = http_server(arguments.url, headers=_headers(arguments.header))
    try:
        with server:
            lock = server.lock()
    except McpError as error:
        raise CliLoadError(f"{error.code}: {error}") from error
    sys.stdout.write(lock.to_json())
    return ExitCode.SUCCESS

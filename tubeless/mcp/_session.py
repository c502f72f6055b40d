"""One MCP client session on its own event-loop thread, driven from sync code.

The official `mcp` client is async. A `McpSession` runs it on one background thread with
its own asyncio loop; sync callers submit coroutines with `run_coroutine_threadsafe` and
wait for them while watching the run's signal and a deadline, so no wait is unbounded.
Cancelling a submitted coroutine cancels the request, and the SDK then sends the server
`notifications/cancelled`. `mcp` is imported only when a session opens, so pinned tools
load without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tubeless._quote import quote
from tubeless.errors import McpConnectionError, MissingExtraError, RunCancelledError
from tubeless.mcp._lock import McpToolDefinition
from tubeless.pipeline.lowlevel import cancellation_message

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

OPEN_SECONDS = 30.0
"""How long opening (spawning or connecting, then `initialize`) may take."""
CLOSE_SECONDS = 30.0
"""How long closing may take; the SDK's own shutdown steps are bounded well below it."""
POLL_SECONDS = 0.02
"""How often a waiting caller looks at the run's signal."""
LOST = "TUBELESS_MCP_CONNECTION_LOST"

Transport = Callable[[], contextlib.AbstractAsyncContextManager[Any]]
"""Makes the transport's async context manager (yields the read and write streams)."""


class CallTimedOutError(Exception):
    """A request passed its deadline and was cancelled."""


def _import_client() -> type[ClientSession]:
    try:
        from mcp.client.session import ClientSession
    except ImportError as error:
        raise MissingExtraError("tubeless.mcp", extra="mcp", missing=error.name or "mcp") from error
    return ClientSession


def stdio_transport(
    command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None
) -> Transport:
    """The transport of a server run as a child process speaking over stdin/stdout."""

    def open_transport() -> contextlib.AbstractAsyncContextManager[Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        parameters = StdioServerParameters(
            command=command, args=list(args), env=None if env is None else dict(env), cwd=cwd
        )
        return stdio_client(parameters)

    return open_transport


def http_transport(url: str, headers: Mapping[str, str] | None) -> Transport:
    """The transport of a server reached over streamable HTTP."""

    @contextlib.asynccontextmanager
    async def open_transport() -> AsyncIterator[Any]:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=dict(headers or {}))
        async with client, streamable_http_client(url, http_client=client) as streams:
            yield streams

    return open_transport


def is_connection_closed(error: BaseException) -> bool:
    """Whether `error` says the connection is gone (rather than that the server refused)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(error, MCPError):
        return error.code == CONNECTION_CLOSED
    return isinstance(error, (OSError, EOFError)) or type(error).__module__.startswith(
        ("anyio", "httpx")
    )


class McpSession:
    """A client session owned by one thread named `tubeless-mcp <label>`.

    `open()` starts the thread and returns once `initialize` succeeded; `run(...)` waits
    for one coroutine on the session; `close()` ends the session, the transport (and so a
    child process) and the thread, and waits for all three.
    """

    def __init__(self, transport: Transport, label: str) -> None:
        self._transport = transport
        self._label = label
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._thread: threading.Thread | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._task: asyncio.Task[Any] | None = None
        self.tools_changed = 0
        """How many `notifications/tools/list_changed` the server sent."""

    def open(self) -> None:
        """Start the loop thread, connect and initialize.

        Raises:
            MissingExtraError: when the `mcp` package is not installed.
            McpConnectionError: `TUBELESS_MCP_CONNECTION_FAILED` when the server cannot be
                started or reached, or does not initialize within `OPEN_SECONDS`.
        """
        client = _import_client()
        self._thread = threading.Thread(
            target=self._serve, args=(client,), name=f"tubeless-mcp {self._label}", daemon=True
        )
        self._thread.start()
        try:
            ready = self._ready.wait(OPEN_SECONDS) and self._session is not None
        except BaseException:  # Ctrl-C while waiting: leave nothing running
            self.close()
            raise
        if not ready:
            failure = self._failure
            self.close()
            reason = "did not initialize in time" if failure is None else describe(failure)
            raise McpConnectionError(
                f"Cannot open MCP server {quote(self._label, 200)}: {reason}"
            ) from failure

    def _serve(self, client: type[ClientSession]) -> None:
        try:
            asyncio.run(self._main(client))
        except BaseException as error:  # reported to `open`, or the connection is gone
            self._failure = self._failure or error
        finally:
            self._ready.set()

    async def _main(self, client: type[ClientSession]) -> None:
        self._stop = asyncio.Event()
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        if self._closing.is_set():  # closed before the loop was there to hear it
            return
        async with self._transport() as streams:
            read, write = streams[0], streams[1]
            async with client(read, write, message_handler=self._on_message) as session:
                await session.initialize()
                self._session = session
                self._ready.set()
                await self._stop.wait()

    async def _on_message(self, message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.tools_changed += 1

    def run(
        self,
        work: Callable[[ClientSession], Coroutine[Any, Any, Any]],
        *,
        signal: threading.Event | None,
        timeout: float | None,
    ) -> Any:
        """Run `work(session)` on the loop and wait for it, never unboundedly.

        Raises:
            RunCancelledError: when `signal` was set (the request is cancelled first).
            CallTimedOutError: when `timeout` seconds passed (the request is cancelled first).
            McpConnectionError: `TUBELESS_MCP_CONNECTION_LOST` when the loop is gone.
            Exception: whatever `work` raised.
        """
        loop, session = self._loop, self._session
        if loop is None or session is None or loop.is_closed():
            raise McpConnectionError("MCP session has ended", code=LOST)
        try:
            future = asyncio.run_coroutine_threadsafe(work(session), loop)
        except RuntimeError as error:  # the loop stopped between the check and the submit
            raise McpConnectionError("MCP session has ended", code=LOST) from error
        with self._lock:
            self._pending.add(future)
        try:
            self._wait(future, signal, timeout)
        finally:
            with self._lock:
                self._pending.discard(future)
        if future.cancelled():
            raise McpConnectionError("MCP session closed during the request", code=LOST)
        return future.result()

    def _wait(
        self,
        future: concurrent.futures.Future[Any],
        signal: threading.Event | None,
        timeout: float | None,
    ) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = POLL_SECONDS if signal is not None else None
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())
                wait = left if wait is None else min(wait, left)
            if concurrent.futures.wait([future], timeout=wait).done:
                return
            if signal is not None and signal.is_set():
                future.cancel()
                raise RunCancelledError(cancellation_message(signal))
            if deadline is not None and time.monotonic() >= deadline:
                future.cancel()
                raise CallTimedOutError()

    def close(self) -> None:
        """End the session, the transport and the loop thread (idempotent)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()
        self._closing.set()
        loop, stop, task, thread = self._loop, self._stop, self._task, self._thread
        if loop is not None and stop is not None and task is not None:
            # An open session ends by its stop event; one still connecting is cancelled
            # (the transport's own shutdown is shielded and bounded, so a child still dies).
            end = stop.set if self._session is not None else task.cancel
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(end)
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_SECONDS)
        self._session = None


def definitions(listed: Any) -> list[McpToolDefinition]:
    """The definitions in a `tools/list` result."""
    from tubeless._frozen import freeze_json

    return [
        McpToolDefinition(
            name=tool.name,
            description=tool.description or "",
            input_schema=freeze_json(tool.input_schema),
            output_schema=None if tool.output_schema is None else freeze_json(tool.output_schema),
        )
        for tool in listed.tools
    ]


async def list_all_tools(session: ClientSession) -> list[McpToolDefinition]:
    """Every tool the server lists, following pagination cursors."""
    from mcp.types import PaginatedRequestParams

    found: list[McpToolDefinition] = []
    cursor: str | None = None
    for _ in range(1000):
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        listed = await session.list_tools(params=params)
        found += definitions(listed)
        cursor = listed.next_cursor
        if cursor is None:
            break
    return found


def describe(error: BaseException) -> str:
    """A failure's type and a bounded prefix of its message (never a whole body)."""
    for _ in range(8):  # an exception group from a task group: its first member
        inner = getattr(error, "exceptions", None)
        if not isinstance(inner, tuple) or not inner:
            break
        error = inner[0]
    return f"{type(error).__name__}: {quote(str(error), 200)}"

"""MCP servers as tool sources: validated, bounded, cancellable, pinned (extra `mcp`).

`stdio_server(...)` and `http_server(...)` make an `McpServer`; `server.tools(...)` gives
ordinary `AgentTool`s. `tubeless mcp lock` writes the `McpLock` that `tools(pin=...)` reads.
"""

from tubeless._public import show_public_module as _show_public_module
from tubeless.mcp._lock import McpLock, McpToolDefinition
from tubeless.mcp._server import McpServer, http_server, stdio_server

__all__ = ["McpLock", "McpServer", "McpToolDefinition", "http_server", "stdio_server"]

_show_public_module(__name__, __all__, globals())

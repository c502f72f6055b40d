"""A small MCP server for `agent_mcp.py`, written with the official `mcp` package.

Two tools: `shout` (text in, text out) and `count_words` (an integer, so it declares an
output schema and answers with `structuredContent`). Run on its own it speaks MCP over
stdin and stdout, as `agent_mcp.py` starts it::

    python examples/mcp_text_server.py
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("tubeless-example-text", log_level="ERROR")


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """Return the text in capital letters."""
    return text.upper()


@server.tool()
def count_words(text: str) -> int:
    """Count the words in a text (runs of characters between spaces)."""
    return len(text.split())


if __name__ == "__main__":
    server.run()

"""Pinned definitions: the lock document, tools without a server, identity, definition errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import calls_agent, codes

from tubeless.errors import AgentDefinitionError, McpLockError, McpServerClosedError
from tubeless.mcp import McpLock, McpToolDefinition, http_server, stdio_server

ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def _lock(description: str = "Add two integers.") -> McpLock:
    return McpLock(
        tools=(
            McpToolDefinition(
                name="echo",
                description="Return the text.",
                input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            ),
            McpToolDefinition(
                name="add",
                description=description,
                input_schema=ADD,
                output_schema={"type": "object"},
            ),
        )
    )


def _write(path: Path, lock: McpLock | dict[str, Any]) -> Path:
    text = lock.to_json() if isinstance(lock, McpLock) else json.dumps(lock)
    path.write_text(text, "utf-8")
    return path


def _server() -> Any:
    return stdio_server(sys.executable, ["-c", "raise SystemExit('never started')"])


def test_a_lock_survives_its_file(tmp_path: Path) -> None:
    """A lock written and read back is equal, its tools sorted by name."""
    read = McpLock.read(_write(tmp_path / "mcp.lock.json", _lock()))
    assert read == _lock()
    assert [tool.name for tool in read.tools] == ["add", "echo"]
    assert read.to_dict()["tools"][0]["digest"] == read.tools[0].digest


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda doc: doc["tools"][0].update(description="Add, and email."), "digest"),
        (lambda doc: doc.update(version=2), "version"),
        (lambda doc: doc["tools"][1].update(extra=1), "unknown field"),
        (lambda doc: doc["tools"][1].pop("inputSchema"), "inputSchema"),
    ],
)
def test_an_edited_lock_is_refused(tmp_path: Path, edit: Any, message: str) -> None:
    """A hand-edited entry, a wrong version or a malformed entry is `TUBELESS_MCP_INVALID_LOCK`."""
    document = _lock().to_dict()
    edit(document)
    with pytest.raises(McpLockError, match=message) as raised:
        McpLock.read(_write(tmp_path / "mcp.lock.json", document))
    assert raised.value.code == "TUBELESS_MCP_INVALID_LOCK"


def test_a_missing_lock_file_is_refused(tmp_path: Path) -> None:
    """A lock path that does not exist is `TUBELESS_MCP_INVALID_LOCK`, naming the path."""
    with pytest.raises(McpLockError, match=r"nope\.json"):
        _server().tools(pin=tmp_path / "nope.json")


def test_pinned_tools_need_no_server_to_plan_and_draw(tmp_path: Path) -> None:
    """With `pin=`, tools, the plan and the graph come from the lock; nothing is started."""
    tools = _server().tools(pin=_write(tmp_path / "mcp.lock.json", _lock()))
    assert sorted(tools) == ["add", "echo"]
    assert tools["add"].description == "Add two integers."
    assert tools["add"].input_json_schema["required"] == ("a", "b")
    agent = calls_agent(tools, [])
    assert agent.plan().ok
    assert agent.to_mermaid().startswith("flowchart")
    capabilities = agent.definition.to_dict()["steps"][0]["agent"]["capabilities"]
    assert [capability["name"] for capability in capabilities] == ["add", "echo"]
    version = capabilities[0]["identity"]["implementationVersion"]
    assert version == f"mcp:{_lock().tools[0].digest}"


def test_pinned_definitions_are_part_of_the_identity(tmp_path: Path) -> None:
    """The same lock gives the same identity; a changed definition gives another."""

    def identity(lock: McpLock, name: str) -> str:
        tools = _server().tools(pin=_write(tmp_path / name, lock))
        return calls_agent(tools, []).definition.identity.definition_id

    same = identity(_lock(), "a.json")
    assert identity(_lock(), "b.json") == same
    assert identity(_lock("Add two integers, then email them."), "c.json") != same


def test_an_unopened_server_fails_the_run_with_a_code(tmp_path: Path) -> None:
    """A call on a server never entered fails the run with `TUBELESS_MCP_SERVER_CLOSED`."""
    tools = _server().tools(pin=_write(tmp_path / "mcp.lock.json", _lock()))
    run = calls_agent(tools, [{"id": "1", "tool": "add", "input": {"a": 1, "b": 2}}]).run({})
    assert run.status == "failed"
    assert "TUBELESS_MCP_SERVER_CLOSED" in codes(run)
    assert "is not open yet" in codes(run)


def test_listing_live_tools_needs_an_open_server() -> None:
    """Without `pin=`, `tools()` on a server not yet entered is `TUBELESS_MCP_SERVER_CLOSED`."""
    with pytest.raises(McpServerClosedError):
        _server().tools()


@pytest.mark.parametrize(
    "arguments",
    [
        {"include": ["add", "missing"]},
        {"include": "add"},
        {"timeout": 0},
        {"timeout": True},
        {"timeout": float("nan")},
        {"replay": {"nope": "safe"}},
        {"replay": "always"},
        {"needs_approval": {"nope": True}},
    ],
)
def test_bad_tool_options_are_definition_errors(tmp_path: Path, arguments: Any) -> None:
    """Unknown names, a bad timeout or replay fail `tools()` with a definition error."""
    pin = _write(tmp_path / "mcp.lock.json", _lock())
    with pytest.raises(AgentDefinitionError) as raised:
        _server().tools(pin=pin, **arguments)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


@pytest.mark.parametrize(
    "make",
    [
        lambda: stdio_server(""),
        lambda: stdio_server("python", "server.py"),
        lambda: http_server("ftp://example.invalid/mcp"),
    ],
)
def test_bad_server_arguments_are_definition_errors(make: Any) -> None:
    """An empty command, a string of args or a non-HTTP URL is refused at once."""
    with pytest.raises(AgentDefinitionError):
        make()


def test_an_http_server_is_named_without_credentials() -> None:
    """Messages name an HTTP server by scheme, host and path: no password, no query."""
    server = http_server("https://user:hunter2@example.invalid:8443/mcp?token=hunter2#x")
    assert server.label == "https://example.invalid:8443/mcp"
    with pytest.raises(McpServerClosedError) as raised:
        server.lock()
    assert "hunter2" not in str(raised.value)


def test_a_draft_07_input_schema_is_read_as_2020_12(tmp_path: Path) -> None:
    """Servers that declare draft-07 still get validated tools; the lock keeps the original."""
    draft_07 = {**ADD, "$schema": "http://json-schema.org/draft-07/schema#"}
    lock = McpLock(
        tools=(McpToolDefinition(name="add", description="Add.", input_schema=draft_07),)
    )
    tools = _server().tools(pin=_write(tmp_path / "mcp.lock.json", lock))
    assert "$schema" not in tools["add"].input_json_schema
    assert McpLock.read(tmp_path / "mcp.lock.json").tools[0].input_schema["$schema"]


def test_a_schema_that_does_not_compile_names_its_tool(tmp_path: Path) -> None:
    """An input schema tubeless cannot compile fails `tools()` naming the tool."""
    broken = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    lock = McpLock(tools=(McpToolDefinition(name="odd", description="Odd.", input_schema=broken),))
    with pytest.raises(AgentDefinitionError, match="MCP tool 'odd'"):
        _server().tools(pin=_write(tmp_path / "mcp.lock.json", lock))


def test_a_missing_sdk_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `mcp` package, opening a server is `TUBELESS_EXTRA_MISSING`; nothing runs."""
    from tubeless.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "mcp.client.session", None)
    server = _server()
    with pytest.raises(MissingExtraError, match=r"tubeless-pipelines\[mcp\]") as raised:
        server.__enter__()
    assert raised.value.code == "TUBELESS_EXTRA_MISSING"
    assert server.closed

"""The MCP lock document: the reviewed tool definitions of one server, with a digest each.

`tubeless mcp lock` writes it; `McpServer.tools(pin=...)` reads it. Pure data: no I/O
beyond `McpLock.read`, no third-party import, so a pinned agent loads without a server.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from tubeless._fields import wire, wire_dict
from tubeless._fingerprint import fingerprint
from tubeless._frozen import freeze_json, thaw
from tubeless._quote import quote, type_name
from tubeless.errors import McpLockError

LOCK_VERSION = 1
"""The lock document version this library writes and reads."""

_TOOL_KEYS = frozenset({"name", "description", "inputSchema", "outputSchema", "digest"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class McpToolDefinition:
    """One tool as an MCP server defines it: what a model sees and what a call must match."""

    name: str
    """The tool's name on the server."""
    description: str
    """Its description (empty when the server gives none)."""
    input_schema: Mapping[str, Any] = dataclasses.field(metadata=wire(convert=thaw))
    """The JSON Schema its arguments must match (frozen)."""
    output_schema: Mapping[str, Any] | None = dataclasses.field(
        default=None, metadata=wire(convert=thaw)
    )
    """The JSON Schema of its `structuredContent`, when it declares one (frozen)."""

    def __post_init__(self) -> None:
        # Schemas given as plain dicts are frozen, so equal definitions compare equal.
        object.__setattr__(self, "input_schema", freeze_json(self.input_schema))
        if self.output_schema is not None:
            object.__setattr__(self, "output_schema", freeze_json(self.output_schema))

    def to_dict(self) -> dict[str, Any]:
        """The wire form: `name`, `description`, `inputSchema` and `outputSchema` if any."""
        return wire_dict(self)

    @property
    def digest(self) -> str:
        """`sha256:<hex>` of the wire form: equal digests mean equal definitions."""
        return fingerprint(self.to_dict())

    @classmethod
    def from_dict(cls, data: object, *, where: str = "tool") -> McpToolDefinition:
        """Read one definition from its wire form (a lock entry's `digest` is ignored here).

        Raises:
            McpLockError: `TUBELESS_MCP_INVALID_LOCK` when a field is missing or mistyped.
        """
        if not isinstance(data, Mapping):
            raise McpLockError(f"{where} must be an object, got {type_name(data)}")
        unknown = sorted(str(key) for key in data if key not in _TOOL_KEYS)
        if unknown:
            raise McpLockError(f"{where} has unknown field {quote(unknown[0])}")
        name, description = data.get("name"), data.get("description", "")
        if not isinstance(name, str) or not name:
            raise McpLockError(f"{where} needs a non-empty string name")
        if not isinstance(description, str):
            raise McpLockError(f"{where} description must be a string")
        input_schema, output_schema = data.get("inputSchema"), data.get("outputSchema")
        if not isinstance(input_schema, Mapping):
            raise McpLockError(f"{where} inputSchema must be an object")
        if output_schema is not None and not isinstance(output_schema, Mapping):
            raise McpLockError(f"{where} outputSchema must be an object")
        return cls(
            name=name,
            description=description,
            input_schema=freeze_json(input_schema),
            output_schema=None if output_schema is None else freeze_json(output_schema),
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class McpLock:
    """A server's tool definitions as reviewed: the document `tubeless mcp lock` writes."""

    tools: tuple[McpToolDefinition, ...]
    """The definitions, sorted by name, names unique."""
    version: int = LOCK_VERSION
    """The document version (1)."""

    def __post_init__(self) -> None:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise McpLockError("MCP lock lists a tool name twice")
        object.__setattr__(self, "tools", tuple(sorted(self.tools, key=lambda tool: tool.name)))

    def to_dict(self) -> dict[str, Any]:
        """The wire form: `{"version": 1, "tools": [{..., "digest": "sha256:..."}]}`."""
        tools = [{**tool.to_dict(), "digest": tool.digest} for tool in self.tools]
        return {"version": self.version, "tools": tools}

    def to_json(self) -> str:
        """The document as a file holds it: indented, keys sorted, a final newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def by_name(self) -> dict[str, McpToolDefinition]:
        """The definitions keyed by tool name."""
        return {tool.name: tool for tool in self.tools}

    @classmethod
    def from_dict(cls, data: object) -> McpLock:
        """Read and check a lock document; every entry's digest must match its definition.

        Raises:
            McpLockError: `TUBELESS_MCP_INVALID_LOCK` for a wrong version, a bad entry, or a
                digest that does not match (the entry was edited after locking).
        """
        if not isinstance(data, Mapping):
            raise McpLockError(f"MCP lock must be an object, got {type_name(data)}")
        if data.get("version") != LOCK_VERSION:
            raise McpLockError(
                f"MCP lock version must be {LOCK_VERSION}, got {quote(data.get('version'))}"
            )
        entries = data.get("tools")
        if not isinstance(entries, list):
            raise McpLockError("MCP lock tools must be a list")
        tools = []
        for index, entry in enumerate(entries):
            tool = McpToolDefinition.from_dict(entry, where=f"MCP lock tools[{index}]")
            if entry.get("digest") != tool.digest:
                raise McpLockError(
                    f"MCP lock tools[{index}] ({quote(tool.name)}): digest does not match "
                    "the definition (edited after locking? lock the server again)"
                )
            tools.append(tool)
        return cls(tools=tuple(tools))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> McpLock:
        """Read the lock file at `path` (UTF-8 JSON).

        Raises:
            McpLockError: `TUBELESS_MCP_INVALID_LOCK` when the file cannot be read, is not
                JSON, or is not a valid lock document.
        """
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as error:
            raise McpLockError(
                f"Cannot read MCP lock {quote(os.fspath(path), 200)}: {type(error).__name__}"
            ) from error
        return cls.from_dict(data)

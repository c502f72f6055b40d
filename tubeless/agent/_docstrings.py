"""Reading a function's docstring: its first paragraph and its parameters' descriptions.

Google style (`Args:` followed by indented `name: text` entries, continued on deeper
lines) and Sphinx style (`:param name: text`) are understood; anything else is prose.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

_ARGS_HEADER = re.compile(r"(Args|Arguments|Parameters|Params)\s*:")
_ENTRY = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)")
_SPHINX = re.compile(r":param\s+(?:[^:]*\s)?(\w+)\s*:(.*)")


@dataclasses.dataclass(frozen=True, slots=True)
class Docstring:
    """What a docstring says about a function."""

    summary: str | None
    """The first paragraph, its lines joined by single spaces; `None` when there is none."""
    parameters: dict[str, str]
    """Each documented parameter's description, continuation lines joined."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _summary(lines: list[str]) -> str | None:
    paragraph: list[str] = []
    for line in lines:
        if not line.strip():
            if paragraph:
                break
            continue
        if _ARGS_HEADER.fullmatch(line.strip()) or _SPHINX.match(line.strip()):
            break
        paragraph.append(line.strip())
    return " ".join(paragraph) or None


def _google_parameters(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    header: int | None = None
    current: list[str] | None = None
    entry_indent = 0
    for number, line in enumerate(lines):
        text = line.strip()
        if header is None:
            if _ARGS_HEADER.fullmatch(text):
                # `cleandoc` dedents the first line apart from the rest.
                header = _indent(line) if number else -1
            continue
        if not text:
            continue
        if _indent(line) <= header:
            break  # the next section, or prose after the list
        match = _ENTRY.fullmatch(text)
        if match and (current is None or _indent(line) <= entry_indent):
            entry_indent = _indent(line)
            current = found.setdefault(match.group(1), [])
            current.append(match.group(2).strip())
        elif current is not None:
            current.append(text)
    return {name: " ".join(part for part in parts if part) for name, parts in found.items()}


def _sphinx_parameters(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        text = line.strip()
        match = _SPHINX.match(text)
        if match:
            current = found.setdefault(match.group(1), [])
            current.append(match.group(2).strip())
        elif text.startswith(":") or not text:
            current = None
        elif current is not None and line[:1].isspace():
            current.append(text)
    return {name: " ".join(part for part in parts if part) for name, parts in found.items()}


def read_docstring(doc: str | None) -> Docstring:
    """Read `doc` (a raw `__doc__`, indentation and all)."""
    if not doc or not doc.strip():
        return Docstring(summary=None, parameters={})
    lines = inspect.cleandoc(doc).splitlines()
    parameters = _sphinx_parameters(lines)
    parameters.update(_google_parameters(lines))
    return Docstring(summary=_summary(lines), parameters=parameters)

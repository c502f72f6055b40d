"""Fixtures for the OpenTelemetry tests: the SDK's in-memory exporter and span-tree helpers."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


def load_example(name: str) -> ModuleType:
    """Import `examples/<name>.py` from its file path (as the CLI does), once."""
    module_name = f"tubeless_otel_example_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


class Spans:
    """A tracer provider whose ended spans land in memory, with views of the span tree."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def ended(self) -> list[ReadableSpan]:
        """Every span ended so far."""
        return list(self.exporter.get_finished_spans())

    def outline(self, describe: Any = None) -> list[str]:
        """The tree of the ended spans, as `outline` draws it."""
        return outline(self.ended, describe)

    def one(self, name: str) -> ReadableSpan:
        """The only ended span called `name`."""
        (span,) = [span for span in self.ended if span.name == name]
        return span


def _sort_key(span: ReadableSpan) -> tuple[str, str]:
    # Not by time: spans of one millisecond tie, and parallel calls start in any order.
    return (span.name, str((span.attributes or {}).get("gen_ai.tool.call.id", "")))


def outline(spans: Sequence[ReadableSpan], describe: Any = None) -> list[str]:
    """The span tree as indented lines, children sorted by name, then call id.

    `describe(span)` adds text after each name; every span must be reachable from a root.
    """
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = None if span.parent is None else span.parent.span_id
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=_sort_key):
            suffix = "" if describe is None else describe(span)
            lines.append("  " * depth + span.name + suffix)
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    assert len(lines) == len(spans), "some spans hang from a parent that was never exported"
    return lines


@pytest.fixture
def scripted_agent() -> Any:
    """The agent of `examples/agent.py` (the scripted example)."""
    return load_example("agent").agent


@pytest.fixture
def spans() -> Iterator[Spans]:
    """A fresh in-memory provider; shut down after the test."""
    made = Spans()
    yield made
    made.provider.shutdown()

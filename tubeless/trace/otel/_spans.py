"""Trace records in, spans out: starts and ends spans as a run's records arrive.

`SpanBuilder` is not thread-safe; `OtelTraceSink` holds a lock around it. Which span a
record opens, names and fills is decided by `_mapping`; the ids by `_ids`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import tubeless.trace.otel._mapping as mapping
from tubeless.trace.otel._ids import RunIds, span_id, trace_id
from tubeless.trace.otel._sdk import (
    Context,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    trace_api,
)

__all__ = ["SpanBuilder"]

_TURN_STEPS = ["decide", "calls", "reduce"]
_TERMINAL = ("step.complete", "step.skipped", "step.failed", "step.cancelled")
_ENDING_ATTRIBUTES = {
    key: fact for key, fact in mapping.RUN_ATTRIBUTES.items() if fact in ("status", "finalized")
}


class _Facts(dict[str, Any]):
    """Facts for a name template; a missing fact formats as an empty string."""

    def __missing__(self, key: str) -> str:
        return ""


def _bounded(value: Any) -> Any:
    if isinstance(value, str) and len(value) > mapping.ATTRIBUTE_STRING_LIMIT:
        return value[: mapping.ATTRIBUTE_STRING_LIMIT]
    return value


def _select(keys: Mapping[str, str], facts: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _bounded(facts[fact]) for key, fact in keys.items() if facts.get(fact) is not None}


def _nanoseconds(record: Mapping[str, Any]) -> int:
    milliseconds = record["timestampMs"]
    if isinstance(milliseconds, int):
        return milliseconds * 1_000_000
    return int(milliseconds * 1_000_000)


@dataclasses.dataclass(slots=True)
class _Open:
    """A started span, when it started (an end never precedes it) and attributes to add.

    Attributes learnt while the span is open are set once, when it ends: each
    `set_attributes` call costs the SDK a pass over its attribute limits.
    """

    span: Span
    start_ns: int
    pending: dict[str, Any] = dataclasses.field(default_factory=dict)

    def fail(self, error: Mapping[str, Any] | None, error_type: str | None = None) -> None:
        """Mark the span ERROR with the error's code (or `error_type`) and kind."""
        attributes = _select(mapping.ERROR_ATTRIBUTES, error or {})
        if error_type is not None:
            attributes.setdefault("error.type", error_type)
        self.pending.update(attributes)
        self.span.set_status(Status(StatusCode.ERROR, attributes.get("error.type")))

    def end(self, at_ns: int) -> None:
        """Set the pending attributes and end the span at `at_ns`."""
        if self.pending:
            self.span.set_attributes(self.pending)
        self.span.end(end_time=max(at_ns, self.start_ns))


@dataclasses.dataclass(slots=True, kw_only=True)
class _Run:
    """What the builder knows of one run, from its records so far."""

    facts: _Facts
    parent: _Run | None
    trace: int
    role: str
    start_ns: int
    last_ns: int
    link: SpanContext | None
    agent: bool = False
    planned: dict[str, str] = dataclasses.field(default_factory=dict)
    """Step id -> the pipeline its fan-out or single child runs have."""
    outer: _Open | None = None
    body: _Open | None = None
    folded: str | None = None
    steps: dict[str, _Open] = dataclasses.field(default_factory=dict)
    ended: set[str] = dataclasses.field(default_factory=set)

    @property
    def run_id(self) -> str:
        """The run's id."""
        return str(self.facts["runId"])


def _run_facts(record: Mapping[str, Any]) -> _Facts:
    payload = record["payload"]
    identity = payload.get("definitionIdentity") or {}
    iteration = record.get("iteration") or {}
    names = ("pipelineId", "runId", "parentRunId", "correlationId", "itemKey")
    facts = _Facts({name: record.get(name) for name in names})
    facts.update(
        definitionId=identity.get("definitionId"),
        implementationVersion=identity.get("implementationVersion"),
        dryRun=payload.get("dryRun"),
        index=iteration.get("index"),
        stepId=iteration.get("stepId"),
    )
    return facts


def _snapshot_is_agent(payload: Mapping[str, Any]) -> bool:
    snapshot = payload.get("definitionSnapshot") or {}
    return any(step.get("id") == "agent" and "agent" in step for step in snapshot.get("steps", ()))


class SpanBuilder:
    """Turns a stream of trace records into spans of `tracer` (see `OtelTraceSink`)."""

    def __init__(self, tracer: trace_api.Tracer, ids: RunIds | None) -> None:
        self._tracer = tracer
        self._ids = ids
        self._runs: dict[str, _Run] = {}
        self._handlers: dict[str, Callable[[_Run, Mapping[str, Any]], None]] = {
            "step.running": self._step_running,
            "step.attempted": self._step_attempted,
            "pipeline.completed": self._completed,
            **dict.fromkeys(_TERMINAL, self._step_ended),
        }

    def take(self, record: Mapping[str, Any]) -> None:
        """Start, fill or end the spans `record` concerns."""
        name = record["name"]
        if name == "pipeline.started":
            self._started(record)
            return
        run = self._runs.get(record["runId"])
        if run is None:
            return  # a run whose start this builder never saw
        run.last_ns = max(run.last_ns, _nanoseconds(record))
        if name == "step.planned":
            self._planned(run, record)
            return
        self._open(run)
        handler = self._handlers.get(name)
        if handler is not None and record.get("stepId") not in run.ended:
            handler(run, record)  # progress may follow a step's end: it reopens nothing

    def end_all(self) -> None:
        """End every span still open (runs that never completed) with status ERROR."""
        for run in reversed(list(self._runs.values())):
            self._open(run)
            self._end_run(run, run.last_ns, None, mapping.INCOMPLETE_ERROR_TYPE)
        self._runs.clear()

    def _started(self, record: Mapping[str, Any]) -> None:
        run_id = record["runId"]
        if run_id in self._runs:
            return
        parent = self._runs.get(record.get("parentRunId") or "")
        at = _nanoseconds(record)
        ambient = trace_api.get_current_span().get_span_context()
        facts = _run_facts(record)
        run = _Run(
            facts=facts,
            parent=parent,
            trace=trace_id(run_id) if parent is None else parent.trace,
            role=self._role(facts, parent),
            start_ns=at,
            last_ns=at,
            link=ambient if parent is None and ambient.is_valid else None,
            agent=_snapshot_is_agent(record["payload"]),
        )
        self._runs[run_id] = run

    @staticmethod
    def _role(facts: _Facts, parent: _Run | None) -> str:
        if parent is None:
            return "pipeline"
        pipeline_id = str(facts["pipelineId"])
        if parent.agent and pipeline_id == f"{parent.facts['pipelineId']}/turn":
            return "turn"
        if parent.role != "turn":
            return "pipeline"
        tools = str(parent.facts["pipelineId"]).removesuffix("/turn") + "/tool/"
        if pipeline_id.startswith(tools):
            facts["tool"] = pipeline_id[len(tools) :]
            return "tool"
        facts["tool"] = pipeline_id
        return "call"

    def _planned(self, run: _Run, record: Mapping[str, Any]) -> None:
        nested = record["payload"].get("nestedPipeline")
        step_id = record["stepId"]
        # An iterate child names its step; a fan-out or single child is found by pipeline.
        if nested is not None and nested["mode"] != "iterate":
            run.planned[step_id] = nested["pipelineId"]
        if (
            step_id == "agent"
            and nested is not None
            and nested["mode"] == "iterate"
            and nested["pipelineId"] == f"{run.facts['pipelineId']}/turn"
            and nested["stepIds"] == _TURN_STEPS
        ):
            run.agent = True

    def _open(self, run: _Run) -> None:
        if run.body is not None:
            return
        parent = self._parent_span(run)
        role = "agent" if run.agent and run.role == "pipeline" else run.role
        if run.agent and role == "call":
            run.outer = self._start(run, "call", span_id("call", run.run_id), parent)
            parent = run.outer.span
            role = "agent"
        rule = mapping.SPAN_MAPPING[role]
        run.body = self._start(run, role, span_id("run", run.run_id), parent)
        run.folded = rule.folded_step
        if run.outer is None and role in ("tool", "call"):
            run.outer = run.body

    def _start(self, run: _Run, role: str, span: int, parent: Span | None) -> _Open:
        rule = mapping.SPAN_MAPPING[role]
        attributes = {**_select(mapping.RUN_ATTRIBUTES, run.facts), **rule.constant}
        attributes.update(_select(rule.facts, run.facts))
        links = [trace_api.Link(run.link)] if run.link is not None and parent is None else ()
        name = rule.name.format_map(run.facts)
        return self._span(run, rule, name, span, parent, attributes, links)

    def _span(
        self,
        run: _Run,
        rule: mapping.SpanRule,
        name: str,
        span: int,
        parent: Span | None,
        attributes: dict[str, Any],
        links: Any = (),
        at_ns: int | None = None,
    ) -> _Open:
        if self._ids is not None:
            self._ids.expect(run.trace, span)
        # An empty context for a root: the caller's active span must not become its parent.
        context = Context() if parent is None else trace_api.set_span_in_context(parent)
        start = run.start_ns if at_ns is None else at_ns
        opened = self._tracer.start_span(
            _bounded(name),
            context=context,
            kind=SpanKind[rule.kind],
            attributes=attributes,
            links=links,
            start_time=start,
        )
        return _Open(opened, start)

    def _parent_span(self, run: _Run) -> Span | None:
        parent = run.parent
        if parent is None:
            return None
        self._open(parent)
        assert parent.body is not None
        steps = parent.steps
        by_iteration = steps.get(run.facts["stepId"] or "")
        if by_iteration is not None:
            return by_iteration.span
        nested = [
            step.span
            for step_id, step in steps.items()
            if parent.planned.get(step_id) == run.facts["pipelineId"]
        ]
        if len(nested) == 1:
            return nested[0]
        if len(steps) == 1:
            return next(iter(steps.values())).span
        return parent.body.span

    def _step(self, run: _Run, record: Mapping[str, Any]) -> _Open:
        step_id = record["stepId"]
        opened = run.steps.get(step_id)
        if opened is None:
            assert run.body is not None
            facts = {"stepId": step_id, "attemptId": record.get("attemptId")}
            attributes = _select(mapping.STEP_ATTRIBUTES, facts)
            rule = mapping.SPAN_MAPPING["step"]
            name = rule.name.format_map(_Facts(facts))
            span = span_id("step", run.run_id, step_id)
            at = _nanoseconds(record)
            opened = self._span(run, rule, name, span, run.body.span, attributes, at_ns=at)
            run.steps[step_id] = opened
        return opened

    def _step_running(self, run: _Run, record: Mapping[str, Any]) -> None:
        if record["stepId"] != run.folded:
            self._step(run, record)

    def _step_attempted(self, run: _Run, record: Mapping[str, Any]) -> None:
        attributes = {
            key: _bounded(value)
            for key, value in record["payload"]["attributes"].items()
            if key.startswith(mapping.KEPT_ATTRIBUTE_PREFIXES)
        }
        for key, name in mapping.USAGE_ATTRIBUTES.items():
            if key in attributes:
                attributes[name] = attributes[key]
        if record["stepId"] == run.folded:
            assert run.body is not None
            run.body.pending.update(attributes)
        else:
            self._step(run, record).pending.update(attributes)
        if run.outer is not None and run.outer is not run.body:
            calls = {k: attributes[k] for k in mapping.CALL_ATTRIBUTES if k in attributes}
            run.outer.pending.update(calls)
        tool = attributes.get("agent.tool")
        if run.outer is not None and run.role == "call" and isinstance(tool, str):
            run.facts["tool"] = tool
            rule = mapping.SPAN_MAPPING["call"]
            run.outer.span.update_name(_bounded(rule.name.format_map(run.facts)))
            run.outer.pending.update(_select(rule.facts, run.facts))

    def _step_ended(self, run: _Run, record: Mapping[str, Any]) -> None:
        if record["stepId"] == run.folded:
            return
        opened = self._step(run, record)
        del run.steps[record["stepId"]]
        run.ended.add(record["stepId"])
        payload = record["payload"]
        facts = {"status": payload.get("status"), "reason": payload.get("reason")}
        opened.pending.update(_select(mapping.STEP_ATTRIBUTES, facts))
        if "error" in record:
            opened.fail(record["error"])
        opened.end(_nanoseconds(record))

    def _completed(self, run: _Run, record: Mapping[str, Any]) -> None:
        payload = record["payload"]
        run.facts.update(status=payload["status"], finalized=payload["finalized"])
        error = record.get("error")
        error_type = None if payload["status"] == "completed" else mapping.INCOMPLETE_ERROR_TYPE
        self._end_run(run, _nanoseconds(record), error, error_type)
        del self._runs[run.run_id]

    def _end_run(
        self, run: _Run, at_ns: int, error: Mapping[str, Any] | None, error_type: str | None
    ) -> None:
        failed = error is not None or error_type is not None
        for opened in reversed(list(run.steps.values())):
            if failed:
                opened.fail(error, error_type or mapping.INCOMPLETE_ERROR_TYPE)
            opened.end(at_ns)
        run.steps.clear()
        closing = [run.body] if run.outer in (None, run.body) else [run.body, run.outer]
        ending = _select(_ENDING_ATTRIBUTES, run.facts)
        for each in closing:
            assert each is not None
            each.pending.update(ending)
            if failed:
                each.fail(error, error_type)
            each.end(at_ns)

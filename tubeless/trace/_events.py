"""Run events: what a UI needs to follow a run live, projected from its trace records.

A `RunEvent` is a frozen summary of one moment of a run tree: a run started or finished,
an agent's turn started, a decision was made, a tool call started, reported progress or
finished. Each has its place in the agent tree (`path`: agent ids and call ids from the
root) and never carries options, arguments, outputs, prompts or state, as trace records
never do. `EventProjection` turns records into events as they arrive, one record at a
time, keeping only what it needs about each live run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from tubeless._frozen import slot_init

__all__ = ["EventKind", "EventProjection", "RunEvent", "error_code"]

EventKind = Literal[
    "run.started",
    "turn.started",
    "decision",
    "call.started",
    "call.progress",
    "call.finished",
    "approval.pending",
    "run.finished",
]
"""The kinds of `RunEvent`, in the order a turn produces them."""

_PASS_THROUGH_CODES = frozenset({"TUBELESS_STEP_FAILED", "TUBELESS_CHILD_FAILED"})


@slot_init
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    """One moment of a run tree, for a live view (no arguments, outputs or state)."""

    kind: EventKind
    """What happened."""
    run_id: str
    """The agent's (or pipeline's) run: for a turn or a call, the agent run it belongs to."""
    path: tuple[str, ...]
    """Agent ids and call ids from the root: `("planner",)`, `("planner", "c1")`,
    `("planner", "c1", "researcher", "c2")`."""
    at: int
    """When it happened, in epoch milliseconds."""
    turn: int | None = None
    """The agent's turn (turns, decisions, calls)."""
    call_id: str | None = None
    """The tool call's id (calls and approvals)."""
    tool: str | None = None
    """The tool's name (calls and approvals)."""
    decision: str | None = None
    """`continue` or `finish` (decisions)."""
    call_count: int | None = None
    """The calls a decision made (decisions)."""
    completed: float | None = None
    """Work done so far (progress)."""
    total: float | None = None
    """Work in all, when known (progress)."""
    message: str | None = None
    """The tool's progress message (progress), bounded as in the trace."""
    ok: bool | None = None
    """Whether the call produced a value (finished calls)."""
    status: str | None = None
    """How the run ended: `completed`, `failed` or `cancelled` (finished runs and calls)."""
    code: str | None = None
    """The error code that ended a call or a run, when it did not complete."""
    duration_ms: float | None = None
    """How long the run or call took (finished runs and calls)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, camelCase as on the wire, without the fields that are `None`."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                head, *rest = field.name.split("_")
                name = head + "".join(part.title() for part in rest)
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


def error_code(error: Mapping[str, Any] | None) -> str | None:
    """The most specific code of a wire error: the deepest one that is not a wrapper."""
    found: str | None = None
    link = error
    depth = 0
    while isinstance(link, Mapping) and depth < 64:
        for key in ("code", "sourceCode"):
            code = link.get(key)
            if isinstance(code, str) and (found is None or code not in _PASS_THROUGH_CODES):
                found = code
        link = link.get("cause")
        depth += 1
    return found


@dataclasses.dataclass(slots=True)
class _Call:
    """A tool call's child run, as the projection follows it."""

    path: tuple[str, ...]
    run_id: str
    """The agent run that made the call."""
    turn: int | None
    call_id: str
    tool: str | None
    started: bool = False
    """Whether `call.started` went out (a retried call does not repeat it)."""


@dataclasses.dataclass(slots=True)
class _Run:
    """What the projection keeps about one live run."""

    path: tuple[str, ...]
    pipeline_id: str
    run_id: str
    """The agent (or pipeline) run the events of this run belong to."""
    announced: bool
    """Whether `run.started` is (or will be) sent for this run, so `run.finished` follows."""
    agent: bool = False
    turn: int | None = None
    call: _Call | None = None
    """The tool call this run performs (a tool's run, or a pipeline tool's whole run)."""


class EventProjection:
    """Turn one run tree's trace records into `RunEvent`s, one record at a time.

    Args:
        root_events: whether the root run's own `run.started`/`run.finished` come from
            its records (a stream that knows the run's result makes the root's
            `run.finished` itself, after any `approval.pending`).
    """

    def __init__(self, *, root_events: bool = True) -> None:
        self._runs: dict[str, _Run] = {}
        self._paths: dict[str, tuple[str, ...]] = {}
        self._root_events = root_events

    def path_of(self, run_id: str) -> tuple[str, ...] | None:
        """The path of an agent (or pipeline) run this projection has seen start."""
        return self._paths.get(run_id)

    def project(self, record: Mapping[str, Any]) -> tuple[RunEvent, ...]:
        """The events `record` stands for (most records stand for none)."""
        name = record["name"]
        if name == "pipeline.started":
            return self._started(record)
        run = self._runs.get(record["runId"])
        if run is None:
            return ()
        if name == "step.attempted":
            return self._attempted(record, run)
        if name == "step.running":
            return self._progress(record, run)
        if name == "pipeline.completed":
            del self._runs[record["runId"]]
            return self._finished(record, run)
        if name == "step.planned" and record.get("stepId") == "agent":
            nested = record["payload"].get("nestedPipeline") or {}
            run.agent = nested.get("pipelineId") == f"{run.pipeline_id}/turn"
        return ()

    def _started(self, record: Mapping[str, Any]) -> tuple[RunEvent, ...]:
        pipeline_id = str(record["pipelineId"])
        run_id = str(record["runId"])
        parent = self._runs.get(record.get("parentRunId") or "")
        if parent is None:
            run = _Run((pipeline_id,), pipeline_id, run_id, self._root_events)
            self._runs[run_id] = run
            self._paths[run_id] = run.path
            return (self._event("run.started", record, run),) if self._root_events else ()
        if parent.agent and pipeline_id == f"{parent.pipeline_id}/turn":
            index = (record.get("iteration") or {}).get("index")
            self._runs[run_id] = _Run(
                parent.path, parent.pipeline_id, parent.run_id, False, turn=index
            )
            return (self._event("turn.started", record, self._runs[run_id]),)
        item = record.get("itemKey")
        if parent.turn is None or item is None:  # any other child run: part of its parent
            self._runs[run_id] = _Run(parent.path, pipeline_id, parent.run_id, False)
            return ()
        prefix = f"{parent.pipeline_id}/tool/"
        tool_run = pipeline_id.startswith(prefix)
        call = _Call(
            (*parent.path, str(item)),
            parent.run_id,
            parent.turn,
            str(item),
            pipeline_id[len(prefix) :] if tool_run else None,
        )
        if tool_run:
            self._runs[run_id] = _Run(call.path, pipeline_id, parent.run_id, False, call=call)
        else:  # a pipeline tool: the call's run is a subagent's (or a pipeline's) own run
            path = (*call.path, pipeline_id)
            self._runs[run_id] = _Run(path, pipeline_id, run_id, True, call=call)
            self._paths[run_id] = path
        return ()

    def _attempted(self, record: Mapping[str, Any], run: _Run) -> tuple[RunEvent, ...]:
        attributes = record["payload"].get("attributes") or {}
        call = run.call
        if call is not None and not call.started and "agent.callId" in attributes:
            call.started = True
            tool = attributes.get("agent.tool")
            if isinstance(tool, str):
                call.tool = tool
            started = self._call_event("call.started", record, call)
            if not run.announced:
                return (started,)
            return started, self._event("run.started", record, run)
        decision = attributes.get("agent.decision")
        if record.get("stepId") != "decide" or run.turn is None or not isinstance(decision, str):
            return ()
        count = attributes.get("agent.callCount")
        return (
            self._event(
                "decision",
                record,
                run,
                decision=decision,
                call_count=count if isinstance(count, int) else None,
            ),
        )

    def _progress(self, record: Mapping[str, Any], run: _Run) -> tuple[RunEvent, ...]:
        progress = record["payload"].get("progress")
        # `None` first, as a tool's run starts (`isinstance` on an ABC is slow).
        if (
            progress is None
            or run.call is None
            or run.announced
            or not isinstance(progress, Mapping)
        ):
            return ()
        message = progress.get("message")
        return (
            self._call_event(
                "call.progress",
                record,
                run.call,
                completed=progress.get("completed"),
                total=progress.get("total"),
                message=message if isinstance(message, str) else None,
            ),
        )

    def _finished(self, record: Mapping[str, Any], run: _Run) -> tuple[RunEvent, ...]:
        status = str(record["payload"].get("status"))
        code = None if status == "completed" else error_code(record.get("error"))
        if status == "cancelled" and code is None:
            code = "TUBELESS_RUN_CANCELLED"
        ended = {"status": status, "code": code, "duration_ms": record.get("durationMs")}
        run_end = (self._event("run.finished", record, run, **ended),) if run.announced else ()
        if run.call is None:
            return run_end
        ok = status == "completed"
        return (*run_end, self._call_event("call.finished", record, run.call, ok=ok, **ended))

    @staticmethod
    def _event(kind: EventKind, record: Mapping[str, Any], run: _Run, **fields: Any) -> RunEvent:
        return RunEvent(
            kind=kind,
            run_id=run.run_id,
            path=run.path,
            at=int(record["timestampMs"]),
            turn=run.turn,
            **fields,
        )

    @staticmethod
    def _call_event(
        kind: EventKind, record: Mapping[str, Any], call: _Call, **fields: Any
    ) -> RunEvent:
        return RunEvent(
            kind=kind,
            run_id=call.run_id,
            path=call.path,
            at=int(record["timestampMs"]),
            turn=call.turn,
            call_id=call.call_id,
            tool=call.tool,
            **fields,
        )

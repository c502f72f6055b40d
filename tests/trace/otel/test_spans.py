"""The span tree of real runs: names, parents, kinds, attributes, statuses and times."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from tubeless.agent import define_agent, define_tool
from tubeless.errors import ToolError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink, scripted_decide
from tubeless.trace import compose_sinks
from tubeless.trace.otel import OtelTraceSink

TEXT = {"type": "string"}
WAIT = 30
MARKER = "zebra7f3aquartz"


def _status(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    text = f" {span.status.status_code.name}"
    if "error.type" in attributes:
        text += f" {attributes['error.type']}"
    if "gen_ai.tool.call.id" in attributes:
        text += f" [{attributes['gen_ai.tool.call.id']}]"
    return text


def _run_example(agent: Any, spans: Any, question: str) -> tuple[Any, list[dict[str, Any]]]:
    memory = MemoryTraceSink()
    with compose_sinks(memory, OtelTraceSink(spans.provider)) as sink:
        run = agent.run({"question": question}, context={"tracing": sink})
    return run, memory.records


def test_the_scripted_example_becomes_an_agent_span_tree(spans: Any, scripted_agent: Any) -> None:
    """Agent, turns, their steps and each tool call nest as the mapping says, all INTERNAL."""
    run, _ = _run_example(scripted_agent, spans, "hello tubeless")
    assert run.status == "completed"
    assert spans.outline(_status) == [
        "invoke_agent scripted-agent UNSET",
        "  turn 1 UNSET",
        "    step calls UNSET",
        "      execute_tool count UNSET [length]",
        "      execute_tool uppercase UNSET [word-0]",
        "      execute_tool uppercase UNSET [word-1]",
        "    step decide UNSET",
        "    step reduce UNSET",
        "  turn 2 UNSET",
        "    step calls UNSET",
        "    step decide UNSET",
        "    step reduce UNSET",
    ]
    assert {span.kind for span in spans.ended} == {SpanKind.INTERNAL}
    assert len({span.context.trace_id for span in spans.ended}) == 1


def test_agent_and_tool_spans_carry_the_gen_ai_attributes(spans: Any, scripted_agent: Any) -> None:
    """`invoke_agent` and `execute_tool` carry the GenAI keys, the run ids and `agent.*`."""
    run, records = _run_example(scripted_agent, spans, "hello tubeless")
    agent = spans.one("invoke_agent scripted-agent")
    assert dict(agent.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": "scripted-agent",
        "gen_ai.agent.name": "scripted-agent",
        "tubeless.pipeline.id": "scripted-agent",
        "tubeless.run.id": run.run_id,
        "tubeless.definition.id": run.definition_identity.definition_id,
        "tubeless.run.dry_run": False,
        "tubeless.run.status": "completed",
        "tubeless.run.finalized": True,
    }
    count = spans.one("execute_tool count")
    attributes = dict(count.attributes or {})
    tool_run = next(r for r in records if r["pipelineId"] == "scripted-agent/tool/count")
    turn_run = next(r for r in records if r["pipelineId"] == "scripted-agent/turn")
    assert {key: attributes[key] for key in attributes if key.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "count",
        "gen_ai.tool.call.id": "length",
        "gen_ai.tool.type": "function",
    }
    assert attributes["tubeless.run.id"] == tool_run["runId"]
    assert attributes["tubeless.run.parent_id"] == turn_run["runId"]
    assert (attributes["agent.callId"], attributes["agent.tool"]) == ("length", "count")
    assert attributes["agent.runId"] == run.run_id
    assert attributes["agent.turn"] == 1
    decide = next(s for s in spans.ended if s.name == "step decide" and s.parent is not None)
    assert (decide.attributes or {})["tubeless.step.status"] == "completed"
    assert (decide.attributes or {})["agent.decision"] in ("continue", "finish")


def test_the_implementation_version_becomes_the_agent_version(spans: Any) -> None:
    """`gen_ai.agent.version` is the agent's `implementation_version`."""
    versioned = define_agent(
        id="versioned",
        implementation_version="2026.12",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide([{"kind": "finish", "result": "x"}]),
        tools={},
    )
    with OtelTraceSink(spans.provider) as sink:
        assert versioned.run({}, context={"tracing": sink}).status == "completed"
    attributes = spans.one("invoke_agent versioned").attributes or {}
    assert attributes["gen_ai.agent.version"] == "2026.12"


def test_span_times_are_the_records_timestamps(spans: Any, scripted_agent: Any) -> None:
    """Each run span starts at `pipeline.started` and ends at `pipeline.completed`."""
    _, records = _run_example(scripted_agent, spans, "hello tubeless")
    by_run = {
        (span.attributes or {}).get("tubeless.run.id"): span
        for span in spans.ended
        if not span.name.startswith("step ")
    }
    for record in records:
        if record["name"] in ("pipeline.started", "pipeline.completed"):
            span = by_run[record["runId"]]
            moment = span.start_time if record["name"] == "pipeline.started" else span.end_time
            assert moment == record["timestampMs"] * 1_000_000


def test_a_recoverable_tool_error_fails_only_its_call_span(spans: Any, scripted_agent: Any) -> None:
    """A `ToolError` call is ERROR with the run's error code; the agent stays UNSET."""
    run, _ = _run_example(scripted_agent, spans, "missing word")
    assert run.status == "completed"
    lines = spans.outline(_status)
    assert "      execute_tool uppercase ERROR TUBELESS_STEP_FAILED [word-0]" in lines
    assert "      execute_tool uppercase UNSET [word-1]" in lines
    assert lines[0] == "invoke_agent scripted-agent UNSET"
    failed = next(s for s in spans.ended if s.status.status_code is StatusCode.ERROR)
    attributes = failed.attributes or {}
    assert failed.status.description == "TUBELESS_STEP_FAILED"
    assert attributes["tubeless.error.source_code"] == "NOT_FOUND"
    assert "Word unavailable" not in str(dict(attributes))


def _calls(*ids: str) -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": i, "tool": "work", "input": i} for i in ids]}


def _agent(handler: Any, decisions: list[Any], concurrency: int = 1) -> Any:
    tool = define_tool(description="Work", input_schema=TEXT, output_schema=TEXT, run=handler)
    return define_agent(
        id="otel-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(decisions),
        tools={"work": tool},
        limits={"max_concurrency": concurrency},
    )


def test_a_failed_run_ends_every_span_with_its_error(spans: Any) -> None:
    """A fatal handler failure makes the call, its turn and the agent ERROR with codes."""

    def handler(value: str, context: Any) -> str:
        if value == "bad":
            raise RuntimeError("disk on fire")
        return value

    agent = _agent(handler, [_calls("good", "bad"), {"kind": "finish", "result": "x"}])
    with OtelTraceSink(spans.provider) as sink:
        run = agent.run({}, context={"tracing": sink})
    assert run.status == "failed"
    lines = spans.outline(_status)
    assert lines[0].startswith("invoke_agent otel-agent ERROR TUBELESS_")
    assert lines[1].startswith("  turn 1 ERROR TUBELESS_")
    assert "      execute_tool work ERROR TUBELESS_STEP_FAILED [bad]" in lines
    assert "      execute_tool work UNSET [good]" in lines
    assert "    step calls ERROR TUBELESS_CHILD_FAILED" in lines
    agent_span = spans.one("invoke_agent otel-agent")
    assert (agent_span.attributes or {})["error.type"] == run.errors[0].code
    assert (agent_span.attributes or {})["tubeless.run.status"] == "failed"
    assert "disk on fire" not in str([dict(span.attributes or {}) for span in spans.ended])


def test_a_cancelled_run_ends_every_span_as_cancelled(spans: Any) -> None:
    """Cancelling mid-batch ends the calls, the turn and the agent ERROR, code RUN_CANCELLED."""
    blocked = threading.Barrier(2, timeout=WAIT)
    ready = threading.Event()

    def handler(value: str, context: Any) -> str:
        blocked.wait()
        ready.set()
        context.signal.wait(WAIT)
        return value

    agent = _agent(handler, [_calls("a", "b", "c"), {"kind": "finish", "result": "x"}], 2)
    signal = threading.Event()
    canceller = threading.Thread(target=lambda: ready.wait(WAIT) and signal.set())
    canceller.start()
    memory, sink = MemoryTraceSink(), OtelTraceSink(spans.provider)
    run = agent.run({}, context={"tracing": compose_sinks(memory, sink), "signal": signal})
    canceller.join()
    assert run.status == "cancelled"
    ended = spans.ended  # every span is ended before close(): the run closed them all
    sink.close()
    assert len(spans.ended) == len(ended)
    lines = spans.outline(_status)
    assert lines[0] == "invoke_agent otel-agent ERROR TUBELESS_RUN_CANCELLED"
    assert lines[1] == "  turn 1 ERROR TUBELESS_RUN_CANCELLED"
    codes = {
        r["itemKey"]: r["error"]["code"]
        for r in memory.records
        if r["name"] == "pipeline.completed" and r["pipelineId"] == "otel-agent/tool/work"
    }
    calls = [line.strip() for line in lines if "execute_tool" in line]
    assert calls == [f"execute_tool work ERROR {codes[key]} [{key}]" for key in ("a", "b")]
    for span in ended:
        attributes = span.attributes or {}
        assert span.status.status_code is StatusCode.ERROR or span.name == "step decide"
        if "tubeless.run.status" in attributes:
            assert attributes["tubeless.run.status"] == "cancelled"
            assert attributes["tubeless.error.kind"] == "cancellation"


def test_close_ends_the_spans_of_a_run_that_never_completed(spans: Any) -> None:
    """Spans still open when the sink closes end ERROR (`_OTHER`) at the run's last record."""
    memory = MemoryTraceSink()
    agent = _agent(lambda value, context: value, [_calls("a"), {"kind": "finish", "result": "x"}])
    agent.run({}, context={"tracing": memory})
    records = memory.records
    cut = next(i for i, r in enumerate(records) if r["pipelineId"] == "otel-agent/tool/work")
    sink = OtelTraceSink(spans.provider)
    for record in records[: cut + 3]:
        sink.export(record)
    assert [span.name for span in spans.ended] == ["step decide"]
    sink.close()
    lines = spans.outline(_status)
    assert lines == [
        "invoke_agent otel-agent ERROR _OTHER",
        "  turn 1 ERROR _OTHER",
        "    step calls ERROR _OTHER",
        "      execute_tool work ERROR _OTHER [a]",
        "    step decide UNSET",
    ]
    last = records[cut + 2]["timestampMs"] * 1_000_000
    assert spans.one("execute_tool work").end_time == last
    sink.export(records[cut + 3])  # after close: ignored
    assert len(spans.ended) == 5


def _child_agent_records(parent: list[dict[str, Any]], child: list[dict[str, Any]]) -> Any:
    """Splice a child agent's records into the parent's `calls` step as a call's run."""
    turn = next(r for r in parent if r["pipelineId"] == "otel-agent/turn")
    calls_at = next(
        i
        for i, r in enumerate(parent)
        if r["name"] == "step.running" and r.get("stepId") == "calls" and r is not turn
    )
    root = child[0]["runId"]
    spliced: list[dict[str, Any]] = []
    attempted = False
    for record in child:
        if record["runId"] == root:
            record = {**record, "parentRunId": turn["runId"], "itemKey": "ask"}
        spliced.append(record)
        if record["runId"] == root and record["name"] == "step.running" and not attempted:
            attempted = True
            # The call's first-attempt attributes, as a pipeline tool's child run has them.
            attributes = {"agent.callId": "ask", "agent.tool": "research", "agent.turn": 1}
            spliced.append(
                {
                    **{k: v for k, v in record.items() if k not in ("name", "payload")},
                    "name": "step.attempted",
                    "payload": {"attempt": 1, "attributes": attributes},
                }
            )
    return parent[: calls_at + 1] + spliced + parent[calls_at + 1 :]


def test_a_child_agent_nests_under_its_call_span(spans: Any, scripted_agent: Any) -> None:
    """A run under a turn that is itself an agent gets `execute_tool` then `invoke_agent`."""
    parent, child = MemoryTraceSink(), MemoryTraceSink()
    _agent(lambda v, c: v, [_calls("a"), {"kind": "finish", "result": "x"}]).run(
        {}, context={"tracing": parent}
    )
    scripted_agent.run({"question": "hi"}, context={"tracing": child})
    with OtelTraceSink(spans.provider) as sink:
        for record in _child_agent_records(parent.records, child.records):
            sink.export(record)
    lines = spans.outline()
    at = lines.index("      execute_tool research")
    assert lines[at + 1] == "        invoke_agent scripted-agent"
    assert lines[at + 2] == "          turn 1"
    call = spans.one("execute_tool research")
    attributes = call.attributes or {}
    assert attributes["gen_ai.tool.call.id"] == "ask"
    assert attributes["gen_ai.tool.name"] == "research"
    assert (attributes["agent.callId"], attributes["agent.tool"]) == ("ask", "research")
    assert "agent.turn" not in attributes
    inner = spans.one("invoke_agent scripted-agent")
    assert inner.parent is not None and inner.parent.span_id == call.context.span_id


def test_a_tool_error_code_is_never_the_message(spans: Any) -> None:
    """A `ToolError`'s own code is kept as `tubeless.error.source_code`, its message dropped."""

    def handler(value: str, context: Any) -> str:
        raise ToolError("RATE_LIMITED", "secret-ish text")

    agent = _agent(handler, [_calls("a"), {"kind": "finish", "result": "x"}])
    with OtelTraceSink(spans.provider) as sink:
        agent.run({}, context={"tracing": sink})
    attributes = spans.one("execute_tool work").attributes or {}
    assert attributes["tubeless.error.source_code"] == "RATE_LIMITED"
    assert "secret-ish" not in str([dict(s.attributes or {}) for s in spans.ended])


def test_child_pipelines_nest_under_the_step_that_runs_them(spans: Any) -> None:
    """Fan-out, iterate and single child runs hang from their own step's span, in parallel."""
    # Both fan-out children and the first iteration meet: both steps are open at once.
    meeting = threading.Barrier(3, timeout=WAIT)

    def work(inputs: Any, context: Any) -> Any:
        if context.options.get("meet"):
            meeting.wait()
        return context.options["n"]

    inner = create_steps()
    child = define_pipeline(id="kid", steps=[inner("work", run=work)])
    other = define_pipeline(id="other", steps=[inner("work", run=lambda i, c: 1)])
    outer = create_steps()
    steps = [
        outer.for_each_pipeline(
            "fan",
            pipeline=child,
            items=lambda i, c: [f"item {MARKER}", "b"],
            key=lambda item, index: item,
            map_options=lambda item, index, i, c: {"n": index, "meet": True},
            concurrency=2,
        ),
        outer.iterate_pipeline(
            "loop",
            pipeline=child,
            max_iterations=2,
            initial_state=lambda i, c: {"n": 1, "meet": True},
            transition=lambda result, state, c: (
                {"kind": "finish", "result": 2}
                if state["n"] == 2
                else {"kind": "next", "state": {"n": 2}}
            ),
        ),
        outer.from_pipeline("single", pipeline=other, map_options=lambda i, c: {}),
    ]
    parent = define_pipeline(id="parent", steps=steps)
    with OtelTraceSink(spans.provider) as sink:
        run = parent.run({}, controls={"max_concurrency": 4}, context={"tracing": sink})
    assert run.status == "completed"
    assert spans.outline(_status) == [
        "pipeline parent UNSET",
        "  step fan UNSET",
        "    pipeline kid UNSET",
        "      step work UNSET",
        "    pipeline kid UNSET",
        "      step work UNSET",
        "  step loop UNSET",
        "    pipeline kid UNSET",
        "      step work UNSET",
        "    pipeline kid UNSET",
        "      step work UNSET",
        "  step single UNSET",
        "    pipeline other UNSET",
        "      step work UNSET",
    ]
    assert MARKER not in str([dict(span.attributes or {}) for span in spans.ended])

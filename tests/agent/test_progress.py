"""Live progress of agents: at most 32 call groups per batch and 32 turn groups."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tubeless.agent import define_agent, define_tool
from tubeless.errors import ToolError
from tubeless.pipeline._handler_context import detail_row
from tubeless.pipeline.lowlevel import PROGRESS_INTERVAL_MS
from tubeless.testing import FakeClock, MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}
GROUP = re.compile(r"^iteration-\d+$")


class Progress:
    """An `on_record` hook keeping the progress payloads of the root run's `agent` step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.payloads: list[dict[str, Any]] = []

    def on_record(self, record: dict[str, Any]) -> None:
        if record["name"] == "step.running" and "progress" in record["payload"]:
            assert record["stepId"] == "agent"
            with self._lock:
                self.payloads.append(record["payload"]["progress"])


def _every_report_due() -> FakeClock:
    """A clock moving a full progress interval per reading: no report is held back."""
    return FakeClock(tick=PROGRESS_INTERVAL_MS)


def _calls_progress(sink: MemoryTraceSink) -> list[dict[str, Any]]:
    return [
        r["payload"]["progress"]
        for r in sink.records
        if r["name"] == "step.running" and r.get("stepId") == "calls" and "progress" in r["payload"]
    ]


def _agent(decisions: list[Any], handler: Any = None, **limits: int) -> Any:
    tool = define_tool(
        description="Work",
        input_schema=TEXT,
        output_schema=TEXT,
        run=handler or (lambda value, context: value),
    )
    return define_agent(
        id="progress-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(decisions),
        tools={"work": tool},
        limits=limits,
    )


def _batch(size: int) -> dict[str, Any]:
    return {
        "kind": "continue",
        "calls": [{"id": f"call-{i}", "tool": "work", "input": str(i)} for i in range(size)],
    }


def test_a_batch_of_100_calls_shows_at_most_32_call_groups(sink: MemoryTraceSink) -> None:
    """Every calls-step update keeps 32 call rows plus a `+68 more` row, active first."""
    hook = Progress()

    run = _agent([_batch(100), FINISH]).run(
        {}, context={"tracing": sink, "hooks": hook, "now": _every_report_due()}
    )

    assert run.status == "completed"
    updates = _calls_progress(sink)
    assert len(updates) == 200
    for progress in updates:
        rows = progress["details"]
        assert len(rows) == 33
        assert rows[-1] == {"id": "+more", "name": "+68 more"}
        assert progress["total"] == 100
    running_late = next(
        p
        for p in updates
        if any(r.get("status") == "running" and r["id"] == "call-80" for r in p["details"])
    )
    shown = [row["id"] for row in running_late["details"][:-1]]
    assert shown == [f"call-{i}" for i in range(31)] + ["call-80"]
    assert running_late["message"] == "80/100 calls · 1 running"
    final = updates[-1]
    assert [row["id"] for row in final["details"][:-1]] == [f"call-{i}" for i in range(32)]
    assert all(row["status"] == "completed" for row in final["details"][:-1])
    assert final["message"] == "100/100 calls · 0 running"
    for progress in hook.payloads:
        call_rows = [r for r in progress["details"] if r["id"].startswith("iteration-1/calls/")]
        assert len(call_rows) <= 33


def test_a_failed_call_stays_visible_among_many(sink: MemoryTraceSink) -> None:
    """Failed groups rank before pending and completed ones once the cap applies."""

    def handler(value: str, context: Any) -> str:
        if value == "70":
            from tubeless.errors import ToolError

            raise ToolError("NOPE", "call 70 failed")
        return value

    run = _agent([_batch(100), FINISH], handler).run({}, context={"tracing": sink})

    assert run.status == "completed"
    final = _calls_progress(sink)[-1]
    failed = [row for row in final["details"] if row["id"] == "call-70"]
    assert failed == [
        {"id": "call-70", "name": "call-70", "status": "failed", "label": "NOPE: call 70 failed"}
    ]
    assert len(final["details"]) == 33


def test_forty_turns_keep_the_current_group_and_31_recent_ones() -> None:
    """The agent step shows an earlier-count row, the 31 newest settled turns, then the current."""
    hook = Progress()
    decisions = [_batch(1) for _ in range(40)] + [FINISH]

    run = _agent(decisions, max_turns=41, max_decisions=41).run(
        {}, context={"hooks": hook, "now": _every_report_due()}
    )

    assert run.status == "completed"
    assert hook.payloads
    for progress in hook.payloads:
        groups = [row for row in progress["details"] if GROUP.match(row["id"])]
        assert len(groups) <= 32
        assert re.match(r"^turn \d+ \(limit 41\)", progress["message"])
    last = hook.payloads[-1]
    groups = [row["id"] for row in last["details"] if GROUP.match(row["id"])]
    assert groups == [f"iteration-{n}" for n in range(10, 42)]  # in the order they ran
    assert last["details"][0] == {"id": "earlier-iterations", "name": "9 earlier turns"}
    current = next(row for row in last["details"] if row["id"] == "iteration-41")
    assert current["name"] == "turn 41"
    nested = [row for row in last["details"] if row["id"].startswith("iteration-41/")]
    assert last["details"][-3:] == nested
    assert [row["id"] for row in nested] == [
        "iteration-41/decide",
        "iteration-41/calls",
        "iteration-41/reduce",
    ]
    assert all(row["depth"] == 1 for row in nested)


def test_a_failing_turn_marks_its_group_failed() -> None:
    """When a turn fails the current group is shown as failed."""
    hook = Progress()

    run = _agent([_batch(1), {"kind": "continue", "calls": []}]).run({}, context={"hooks": hook})

    assert run.status == "failed"
    last = hook.payloads[-1]
    current = next(row for row in last["details"] if row["id"] == "iteration-2")
    assert current["status"] == "failed"
    settled = next(row for row in last["details"] if row["id"] == "iteration-1")
    assert settled["status"] == "completed"


def _fails_oddly(value: Any, context: Any) -> str:
    if value == "0":
        return value
    if value == "1":
        raise ToolError("UNKNOWN_CITY", "no city named Zürich")
    raise ToolError("BROKEN", "half a pair \ud800 and " + "x" * 4000)


def test_rows_built_in_wire_form_read_as_detail_row_would_make_them(
    sink: MemoryTraceSink,
) -> None:
    """Every detail row a run sends is exactly `detail_row`'s own form, byte for byte.

    The trackers build rows in wire form when their parts are clean (ids checked once,
    labels as they are set) and fall back to `detail_row` otherwise; either way the
    record reads the same.
    """
    run = _agent([_batch(3), _batch(2), FINISH], handler=_fails_oddly).run(
        {}, context={"tracing": sink, "now": _every_report_due()}
    )

    assert run.status == "completed"
    progress = [
        r["payload"]["progress"]
        for r in sink.records
        if r["name"] == "step.running" and "progress" in r["payload"]
    ]
    rows = [row for payload in progress for row in payload.get("details", ())]
    labels = {row.get("label") for row in rows} - {None}
    assert "UNKNOWN_CITY: no city named Zürich" in labels  # kept: clean outside text
    assert any("\\ud800" in label for label in labels)  # escaped, as outside text is
    assert any(row.get("depth") == 2 for row in rows)  # a call row under its turn's step
    for row in rows:
        assert json.dumps(row) == json.dumps(detail_row(dict(row)))


def test_a_settled_turn_keeps_its_failed_calls_and_turns_read_in_order() -> None:
    """After turn 1 settles, its failed call stays below it, and turn 2 comes after it."""
    hook = Progress()

    def handler(value: str, context: Any) -> str:
        if value == "1":
            raise ToolError("NOPE", "call 1 failed")
        return value

    run = _agent([_batch(3), _batch(1), FINISH], handler).run(
        {}, context={"hooks": hook, "now": _every_report_due()}
    )

    assert run.status == "completed"
    last = hook.payloads[-1]
    ids = [row["id"] for row in last["details"] if "/" not in row["id"] or "call-" in row["id"]]
    assert ids[:3] == ["iteration-1", "iteration-1/calls/call-1", "iteration-2"]
    failed = next(row for row in last["details"] if row["id"] == "iteration-1/calls/call-1")
    assert (failed["status"], failed["label"], failed["depth"]) == (
        "failed",
        "NOPE: call 1 failed",
        2,
    )


def test_held_back_progress_goes_out_without_a_later_report() -> None:
    """A report held back by the 50 ms interval is sent by itself when nothing follows."""
    release = threading.Event()
    hook = Progress()

    def handler(value: str, context: Any) -> str:
        release.wait(30)
        return value

    clock = FakeClock(tick=0)  # the run's clock stands still: every later report is held
    result: list[Any] = []
    thread = threading.Thread(
        target=lambda: result.append(
            _agent([_batch(2), FINISH], handler, max_concurrency=2).run(
                {}, context={"hooks": hook, "now": clock}
            )
        )
    )
    thread.start()
    try:
        for _ in range(600):
            rows = [row for p in hook.payloads for row in p.get("details", ())]
            if any(
                r["id"] == "iteration-1/calls/call-1" and r["status"] == "running" for r in rows
            ):
                break
            threading.Event().wait(0.05)
        else:
            raise AssertionError("the running calls never reached the agent's progress")
    finally:
        release.set()
        thread.join()
    assert result[0].status == "completed"

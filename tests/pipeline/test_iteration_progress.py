"""The rows of an iterating step's progress: settled groups give way to the current one."""

from __future__ import annotations

from typing import Any

from tubeless import create_steps, define_pipeline
from tubeless.pipeline._child_progress import (
    DETAIL_GROUP_LIMIT,
    SETTLED_SETBACK_LIMIT,
    IterationProgress,
    Progress,
)
from tubeless.pipeline._controls import resolve_controls
from tubeless.pipeline._handler_context import WireRows, _details_surely_fit, progress_payload
from tubeless.trace import TRACE_DETAIL_BYTE_LIMIT, TRACE_LIST_LIMIT
from tubeless.trace.lowlevel import json_bytes


def _plan() -> Any:
    step = create_steps()
    work = step("work", run=lambda inputs, context: None)
    return define_pipeline(id="child", steps=[work]).plan(resolve_controls(None))


class _Offers:
    """An `offer_progress` keeping the latest snapshot it was offered."""

    def __init__(self) -> None:
        self.latest: Progress | None = None

    def __call__(self, source: Any, *, urgent: bool = False) -> None:
        self.latest = source()


def _running(step_id: str, failed_rows: int) -> dict[str, Any]:
    details = [
        {"id": f"call-{n}", "name": f"call-{n}", "status": "failed"} for n in range(failed_rows)
    ]
    return {
        "name": "step.running",
        "stepId": step_id,
        "payload": {"progress": {"completed": 0, "details": details}},
    }


def _iterate(progress: IterationProgress, plan: Any, index: int, failed_rows: int) -> None:
    hooks = progress.track(index, plan)
    hooks["on_record"](_running("work", failed_rows))


def _ids(offers: _Offers) -> list[str]:
    assert offers.latest is not None
    return [row["id"] for row in offers.latest[3]]


def test_settled_groups_that_fit_all_show_after_the_earlier_count() -> None:
    plan, offers = _plan(), _Offers()
    progress = IterationProgress(100, offers)
    for index in range(1, 41):
        _iterate(progress, plan, index, 0)
        progress.settle("completed")
    _iterate(progress, plan, 41, 0)

    ids = _ids(offers)
    groups = [i for i in ids if "/" not in i and i != "earlier-iterations"]
    assert ids[0] == "earlier-iterations"
    assert groups == [f"iteration-{n}" for n in range(41 - (DETAIL_GROUP_LIMIT - 1), 42)]


def test_settled_groups_with_setback_rows_give_way_to_the_current_group() -> None:
    """Each settled group keeps 4 failed rows: 31 of them (155 rows) cannot all fit."""
    plan, offers = _plan(), _Offers()
    progress = IterationProgress(100, offers)
    for index in range(1, 41):
        _iterate(progress, plan, index, 6)
        progress.settle("failed")
    _iterate(progress, plan, 41, 6)

    ids = _ids(offers)
    assert len(ids) <= TRACE_LIST_LIMIT
    group_size = 1 + SETTLED_SETBACK_LIMIT
    current = [i for i in ids if i == "iteration-41" or i.startswith("iteration-41/")]
    shown = (TRACE_LIST_LIMIT - len(current) - 1) // group_size
    assert ids[0] == "earlier-iterations"
    assert offers.latest is not None
    assert offers.latest[3][0]["name"] == f"{40 - shown} earlier iterations"
    settled = [i for i in ids[1:] if i not in current]
    assert len(settled) == shown * group_size
    assert settled[0] == f"iteration-{41 - shown}"
    assert ids[-len(current) :] == current


def _long_running(step_id: str, failed_rows: int, width: int) -> dict[str, Any]:
    record = _running(step_id, failed_rows)
    for row in record["payload"]["progress"]["details"]:
        row["name"] = row["name"].ljust(width, "x")
    return record


def test_settled_rows_counted_as_they_settle_bound_the_details_as_a_full_count_does() -> None:
    """A snapshot counts its settled rows' characters once, as they settled: the rows
    that go out, and whether they were measured, are those of a snapshot counted whole."""
    plan, offers = _plan(), _Offers()
    progress = IterationProgress(100, offers)
    payloads = []
    for index in range(1, 41):
        hooks = progress.track(index, plan)
        # Ever longer names: the later snapshots no longer surely fit and get cut.
        hooks["on_record"](_long_running("work", 3, 4000 if index > 20 else 40 * index))
        assert offers.latest is not None
        completed, total, message, rows = offers.latest
        assert type(rows) is WireRows
        assert _details_surely_fit(rows) is _details_surely_fit(list(rows))
        counted = progress_payload(completed, total, message, rows)
        whole = progress_payload(completed, total, message, list(rows))
        assert counted == whole
        assert json_bytes(counted["details"]) <= TRACE_DETAIL_BYTE_LIMIT
        payloads.append(counted)
        progress.settle("failed")
    assert payloads[0]["detailCount"] == len(payloads[0]["details"])
    assert payloads[-1]["detailCount"] > len(payloads[-1]["details"])

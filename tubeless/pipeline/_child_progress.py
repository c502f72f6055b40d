"""Child runs seen from their parent step: records absorbed into `report_progress`.

Built only when the parent run is observed; otherwise no child hook exists at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from tubeless._diagnostics import WAITING_CODES
from tubeless.pipeline._handler_context import (
    CheckedRow,
    WireRows,
    _row_chars,
    checked_row,
    clean_text,
)
from tubeless.pipeline._plan import PipelinePlan
from tubeless.trace import TRACE_LIST_LIMIT, TRACE_STRING_LIMIT

DETAIL_GROUP_LIMIT = 32
_TERMINAL = {
    "step.complete": "completed",
    "step.skipped": "skipped",
    "step.failed": "failed",
    "step.cancelled": "cancelled",
}
_FINISHED = frozenset(_TERMINAL.values())
Row = dict[str, Any]
Progress = tuple[float, float | None, str | None, list[Row]]
_SETBACKS = frozenset({"failed", "cancelled"})


class Offer(Protocol):
    """`StepContext.offer_progress`: a snapshot source, sent at once when urgent."""

    def __call__(self, source: Callable[[], Progress], *, urgent: bool = False) -> None: ...


_PlanSteps = tuple[tuple[str, ...], dict[str, str], int]
_PLAN_STEPS = "child tracker steps"
"""The plan memo's key of `_plan_steps`."""


def _plan_steps(plan: PipelinePlan) -> _PlanSteps:
    """A plan's step ids in order, their row names, and the room a row id prefix has.

    Rows are built in wire form when every id and name is kept as it is: then a row id
    is too as long as its prefix leaves it room (`wire_rows`); `-1` when not. Read-only.
    """
    order = tuple(step.id for step in plan.steps)
    names = {step.id: step.name or step.id for step in plan.steps}
    clean = all(clean_text(text) for text in (*order, *names.values()))
    longest = max(map(len, order), default=0)
    return order, names, TRACE_STRING_LIMIT - longest if clean else -1


class ChildRunTracker:
    """Follows the records of one child run and summarises its steps.

    `on_change(urgent)` is told about every change; a change is urgent when a child step,
    or a detail row of a child step's progress, newly failed or was cancelled.
    """

    __slots__ = (
        "_id_room",
        "_names",
        "_on_change",
        "_order",
        "_progress",
        "_setbacks",
        "_status",
    )

    def __init__(self, plan: PipelinePlan, on_change: Callable[[bool], None]) -> None:
        # What every tracker of this plan shares (an agent's turns), worked out once.
        shared: _PlanSteps | None = plan.memo.get(_PLAN_STEPS)
        if shared is None:
            shared = plan.memo.setdefault(_PLAN_STEPS, _plan_steps(plan))
        self._order: tuple[str, ...] = shared[0]
        self._names: dict[str, str] = shared[1]
        self._id_room: int = shared[2]
        self._status = dict.fromkeys(self._order, "pending")
        self._progress: dict[str, Mapping[str, Any]] = {}
        self._setbacks: dict[str, int] = {}
        self._on_change = on_change

    @property
    def hooks(self) -> dict[str, Callable[[dict[str, Any]], None]]:
        """The hook set to give the child run."""
        return {"on_record": self._on_record}

    def _on_record(self, record: dict[str, Any]) -> None:
        name, step_id = record["name"], record.get("stepId", "")
        if step_id not in self._status:
            return
        urgent = False
        if name == "step.running":
            self._status[step_id] = "running"
            progress = record["payload"].get("progress")
            if progress is not None:
                self._progress[step_id] = progress
                setbacks = 0
                for row in progress.get("details", ()):
                    if row.get("status") in _SETBACKS:
                        setbacks += 1
                urgent = setbacks > self._setbacks.get(step_id, 0)
                self._setbacks[step_id] = setbacks
        elif name in _TERMINAL:
            status = _TERMINAL[name]
            if status == "failed" and record.get("error", {}).get("sourceCode") in WAITING_CODES:
                status = "pending"  # waiting for a person (an approval), not broken
            self._status[step_id] = status
            urgent = status in _SETBACKS
        else:
            return
        self._on_change(urgent)

    @property
    def completed(self) -> int:
        """How many child steps have settled."""
        return sum(map(_FINISHED.__contains__, self._status.values()))

    @property
    def total(self) -> int:
        """How many steps the child plans."""
        return len(self._order)

    def running_step(self) -> str | None:
        """The first child step still running, if any."""
        return next((i for i in self._order if self._status[i] == "running"), None)

    def message(self) -> str | None:
        """The running step's own progress message, else its name."""
        step_id = self.running_step()
        if step_id is None:
            return None
        progress = self._progress.get(step_id, {})
        return str(progress.get("message") or self._names[step_id])

    def rows(self, prefix: str, depth: int) -> list[Row]:
        """One row per child step, plus the running steps' own detail rows one level deeper."""
        return self.wire_rows(prefix, depth)[0]

    def setback_rows(self, prefix: str, depth: int) -> list[Row]:
        """The failed and cancelled detail rows of the child steps, as `rows` shows them.

        Unlike `rows`, it looks inside settled steps too: a batch of calls completes
        although a call in it failed.
        """
        if not any(self._setbacks.values()):
            # Each step's count of failed and cancelled rows in its latest progress.
            return []
        rows: list[Row] = []
        for step_id in self._order:
            progress = self._progress.get(step_id)
            if progress is not None:
                nested = _nested_rows(progress.get("details", ()), f"{prefix}{step_id}/", depth)
                rows += _setbacks_of(nested)
        return rows

    def wire_rows(self, prefix: str, depth: int) -> tuple[list[Row], bool]:
        """`rows(prefix, depth)`, and whether they are all in wire form (see `WireRows`).

        Statuses are the tracker's own, counts come from records a run checked, and ids
        and names were found clean once; a row id stays clean while it fits the limit.
        """
        wire = len(prefix) <= self._id_room and clean_text(prefix)
        rows: list[Row] = []
        for step_id in self._order:
            status = self._status[step_id]
            # Keys in `detail_row`'s order, so the row reads the same either way.
            row: Row = {"id": prefix + step_id, "name": self._names[step_id], "status": status}
            progress = self._progress.get(step_id)
            if progress is not None:
                row["completed"] = progress["completed"]
                if "total" in progress:
                    row["total"] = progress["total"]
            if depth:
                row["depth"] = depth
            rows.append(row)
            if status == "running" and progress is not None:
                nested = _nested_rows(progress.get("details", ()), f"{prefix}{step_id}/", depth + 1)
                wire = wire and all(len(row["id"]) <= TRACE_STRING_LIMIT for row in nested)
                rows += nested
        return rows, wire


def _setbacks_of(rows: list[Row]) -> list[Row]:
    return [row for row in rows if row.get("status") in _SETBACKS]


def _nested_rows(details: Sequence[Mapping[str, Any]], prefix: str, depth: int) -> list[Row]:
    rows = []
    for detail in details:
        row = dict(detail)
        row["id"] = prefix + str(detail["id"])
        row["depth"] = min(32, depth + int(detail.get("depth", 0)))
        rows.append(row)
    return rows


def visible_groups(keys: Sequence[str], status: Mapping[str, str], limit: int) -> list[str]:
    """Pick at most `limit` keys, active first, then failed, then the rest; keep input order."""
    if len(keys) <= limit:
        return list(keys)
    ranked = sorted(
        range(len(keys)),
        key=lambda i: (_rank(status.get(keys[i], "pending")), i),
    )
    chosen = sorted(ranked[:limit])
    return [keys[i] for i in chosen]


def _rank(status: str) -> int:
    if status == "running":
        return 0
    if status in ("failed", "cancelled"):
        return 1
    return 2


class SingleChildProgress:
    """Progress of a `from_pipeline` step: its child's steps."""

    def __init__(self, plan: PipelinePlan, offer: Offer) -> None:
        self._offer = offer
        self.tracker = ChildRunTracker(plan, self.publish)

    def publish(self, urgent: bool = False) -> None:
        """Offer the parent step's progress (built only if it goes out)."""
        self._offer(self._snapshot, urgent=urgent)

    def _snapshot(self) -> Progress:
        tracker = self.tracker
        return tracker.completed, tracker.total, tracker.message(), tracker.rows("", 0)


class FanOutProgress:
    """Progress of a `for_each_pipeline` step: item groups, at most 32 visible."""

    def __init__(
        self,
        keys: Sequence[str],
        steps_per_item: int,
        offer: Offer,
        *,
        item_noun: str = "items",
        detail_limit: int = DETAIL_GROUP_LIMIT,
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        # Items start, settle and report from several worker threads while child records
        # call `publish` under the run's record lock; sharing that lock (re-entrant)
        # serialises them without a second lock to order against it.
        self._lock = lock if lock is not None else threading.RLock()
        self._keys = list(keys)
        self._steps = steps_per_item
        self._offer = offer
        self._noun = item_noun
        self._limit = detail_limit
        self._status: dict[str, str] = dict.fromkeys(self._keys, "pending")
        self._trackers: dict[str, ChildRunTracker] = {}

    def track(self, key: str, plan: PipelinePlan) -> dict[str, Callable[[dict[str, Any]], None]]:
        """Start following the child run of `key`; return the hooks to give it."""
        tracker = ChildRunTracker(plan, self.publish)
        with self._lock:
            self._trackers[key] = tracker
            self._status[key] = "running"
        return tracker.hooks

    def settle(self, key: str, status: str) -> None:
        """Mark `key` completed, failed or cancelled."""
        with self._lock:
            self._status[key] = status
            self.publish(status in _SETBACKS)

    def publish(self, urgent: bool = False) -> None:
        """Offer the current totals, message and item groups."""
        with self._lock:
            self._offer(self._snapshot, urgent=urgent)

    def _snapshot(self) -> Progress:
        done = sum(1 for s in self._status.values() if s in _FINISHED)
        running = [k for k in self._keys if self._status[k] == "running"]
        message = f"{done}/{len(self._keys)} {self._noun} · {len(running)} running"
        for key in running:
            step = self._trackers[key].running_step()
            if step is not None:
                message += f" · {key}/{step}"
                break
        completed = sum(t.completed for t in self._trackers.values())
        total = len(self._keys) * self._steps
        return completed, total, message, self._rows()

    def _rows(self) -> list[Row]:
        shown = visible_groups(self._keys, self._status, self._limit)
        rows: list[Row] = []
        for key in shown:
            tracker = self._trackers.get(key)
            row: Row = {"id": key, "name": key, "status": self._status[key]}
            if tracker is not None:
                row.update(completed=tracker.completed, total=tracker.total)
            rows.append(row)
            if tracker is not None and self._status[key] == "running":
                rows += tracker.rows(f"{key}/", 1)
        hidden = len(self._keys) - len(shown)
        if hidden:
            rows.append({"id": "+more", "name": f"+{hidden} more"})
        return rows


SETTLED_SETBACK_LIMIT = 4
"""Failed or cancelled rows (an agent's failed calls) a settled group keeps below it."""


class IterationProgress:
    """Progress of an `iterate_pipeline` step: settled groups oldest first, then the current.

    The rows read in the order things happened: `turn 1`, `turn 2`, ..., the running
    group last with its child rows. A settled group keeps its failed and cancelled rows
    (at most 4), so a call that failed in an earlier turn stays in view. The count is
    against a limit, not an estimate, and says so: `turn 3 (limit 6)` for an agent
    (`unit="turn"`). Each new iteration is reported at once.
    """

    def __init__(self, max_iterations: int, offer: Offer, *, unit: str = "iteration") -> None:
        self._max = max_iterations
        self._unit = unit
        # Group names hold the unit: `turn 3`, `12 earlier turns`.
        self._plain_unit = clean_text(unit) and len(unit) <= TRACE_STRING_LIMIT // 2
        self._offer = offer
        self._index = 0
        self._tracker: ChildRunTracker | None = None
        self._status = "pending"
        self._settled: list[list[CheckedRow]] = []
        """Each settled group's rows: its own row, then its setback rows; oldest first."""
        self._settled_rows = 0
        """How many rows `_settled` holds in all."""
        self._settled_flat: list[CheckedRow] = []
        """`_settled`'s rows in one list, oldest first (what a snapshot showing all takes)."""
        self._settled_chars = 0
        """The characters `_details_surely_fit` counts in `_settled_flat`."""
        self._dropped = 0

    def track(self, index: int, plan: PipelinePlan) -> dict[str, Callable[[dict[str, Any]], None]]:
        """Follow iteration `index`; return the hooks to give its child run."""
        self._index = index
        self._status = "running"
        self._tracker = ChildRunTracker(plan, self.publish)
        self.publish(urgent=True)
        return self._tracker.hooks

    def settle(self, status: str) -> None:
        """Mark the current iteration completed, failed or cancelled, and keep its group."""
        self._status = status
        self.publish(status in _SETBACKS)
        # A settled group never changes: its rows are checked once, not in every snapshot.
        # The group row is in wire form when the unit is (as in every snapshot's rows).
        group = [checked_row(self._group_row(), wire=self._plain_unit), *self._setback_rows()]
        self._settled.append(group)
        self._settled_rows += len(group)
        self._settled_flat += group
        self._settled_chars += sum(row.chars for row in group)
        if len(self._settled) > DETAIL_GROUP_LIMIT - 1:
            oldest = self._settled.pop(0)
            self._settled_rows -= len(oldest)
            del self._settled_flat[: len(oldest)]
            self._settled_chars -= sum(row.chars for row in oldest)
            self._dropped += 1
        self._tracker = None

    def _setback_rows(self) -> list[CheckedRow]:
        """The failed and cancelled rows inside the settling group, as its running rows were."""
        tracker = self._tracker
        if tracker is None:
            return []
        setbacks = tracker.setback_rows(f"iteration-{self._index}/", 2)
        return [checked_row(row) for row in setbacks[:SETTLED_SETBACK_LIMIT]]

    def _group_row(self) -> Row:
        row: Row = {
            "id": f"iteration-{self._index}",
            "name": f"{self._unit} {self._index}",
            "status": self._status,
        }
        if self._tracker is not None:
            row.update(completed=self._tracker.completed, total=self._tracker.total)
        return row

    def publish(self, urgent: bool = False) -> None:
        """Offer the current group, its child's rows and the settled groups."""
        self._offer(self._snapshot, urgent=urgent)

    def _add_settled(self, rows: list[Row], room: int) -> None:
        """Append the settled groups that fit in `room` rows, the newest kept first.

        The running group comes last, so it must fit: older groups give way to it.
        """
        shown = len(self._settled)
        if self._settled_rows > room:
            shown = 0
            for group in reversed(self._settled):
                if len(group) > room:
                    break
                room -= len(group)
                shown += 1
        hidden = self._dropped + len(self._settled) - shown
        if hidden:
            rows.append({"id": "earlier-iterations", "name": f"{hidden} earlier {self._unit}s"})
        if shown < len(self._settled):
            for group in self._settled[len(self._settled) - shown :]:
                rows += group
            return
        rows += self._settled_flat
        if type(rows) is WireRows:
            # Counted as they settled: `_details_surely_fit` skips them.
            rows.counted = len(rows)
            rows.counted_chars = self._settled_chars + (_row_chars(rows[0]) if hidden else 0)

    def _snapshot(self) -> Progress:
        message = f"{self._unit} {self._index} (limit {self._max})"
        # The group rows are the tracker's own; its unit, a label the library gives.
        rows: list[Row] = WireRows() if self._plain_unit else []
        current: list[Row] = []
        wire = True
        if self._tracker is not None:
            child = self._tracker.message()
            if child:
                message += f": {child}"
            current, wire = self._tracker.wire_rows(f"iteration-{self._index}/", 1)
            current.insert(0, self._group_row())
        self._add_settled(rows, TRACE_LIST_LIMIT - len(current) - 1)
        rows += current
        if not wire:
            rows = list(rows)
        return self._index - 1, self._max, message, rows

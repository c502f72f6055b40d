"""What decision callbacks and tool handlers receive."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless.agent._deadline import deadline_error, seconds_left
from tubeless.agent._journal import ExecutionIds
from tubeless.agent._usage_ledger import UsageLedger, UsageReservation, check_amounts
from tubeless.errors import AgentError
from tubeless.pipeline import StepContext, StepLogger

_EMPTY = FrozenDict()


class _StepServices:
    """The ordinary step services, read through from the underlying step context."""

    __slots__ = ("_step",)

    def __init__(self, step: StepContext) -> None:
        self._step = step

    @property
    def dry_run(self) -> bool:
        """Whether this is a dry run."""
        return self._step.dry_run

    @property
    def run_id(self) -> str:
        """The id of the run this callback belongs to."""
        return self._step.run_id

    @property
    def parent_run_id(self) -> str | None:
        """The parent run's id."""
        return self._step.parent_run_id

    @property
    def correlation_id(self) -> str | None:
        """The correlation id."""
        return self._step.correlation_id

    @property
    def attempt_id(self) -> str:
        """The attempt id of the step running this callback."""
        return self._step.attempt_id

    @property
    def signal(self) -> threading.Event:
        """The run's own cancellation signal (the very Event passed to the run)."""
        return self._step.signal

    @property
    def log(self) -> StepLogger:
        """Logger: `info`/`warning`/`error`."""
        return self._step.log

    @property
    def cwd(self) -> str:
        """Working directory."""
        return self._step.cwd

    @property
    def trace(self) -> dict[str, Any] | None:
        """Trace identity when tracing is on."""
        return self._step.trace

    def now(self) -> int:
        """Run clock in epoch milliseconds."""
        return self._step.now()

    def sleep(self, seconds: float) -> None:
        """Sleep; raises `RunCancelledError` when the run is cancelled meanwhile."""
        self._step.sleep(seconds)

    def report_progress(
        self,
        completed: float,
        total: float | None = None,
        message: str | None = None,
        details: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Report progress of the step running this callback."""
        self._step.report_progress(completed, total, message, details)

    def report_attempt(self, attempt: int, attributes: Mapping[str, object] | None = None) -> None:
        """Record a logical attempt (e.g. a retry) with flat scalar attributes."""
        self._step.report_attempt(attempt, attributes)


class ToolContext(_StepServices):
    """What a tool handler receives: the step services, with empty `options`.

    Attributes:
        execution: the call's stable ids (`id`, `agent`, `turn`, `call`), the same when a
            durable agent resumes (without durability, `id` is the agent's run id); `None`
            only for a context made by hand.
        deadline: the `time.monotonic()` at which this attempt times out (the earlier of
            the tool's `timeout` and the time `max_seconds` leaves), or `None`.
    """

    __slots__ = ("deadline", "execution")

    def __init__(
        self,
        step: StepContext,
        execution: ExecutionIds | None = None,
        deadline: float | None = None,
    ) -> None:
        # `_StepServices.__init__`'s one field, set here: a context is made per tool call.
        self._step = step
        self.execution = execution
        self.deadline = deadline

    def time_left(self) -> float | None:
        """Seconds until `deadline` (0 once it has passed), or `None` without one."""
        return seconds_left(self.deadline)

    def sleep(self, seconds: float) -> None:
        """Sleep, but not past the deadline.

        Raises:
            RunCancelledError: when the run is cancelled meanwhile.
            ToolError: `TUBELESS_AGENT_CALL_TIMED_OUT` when the deadline comes first
                (raised at the deadline, so a handler that lets it go stops in time).
        """
        left = self.time_left()
        if left is None or seconds < left:
            self._step.sleep(seconds)
            return
        self._step.sleep(left)
        raise deadline_error()

    @property
    def options(self) -> Mapping[str, Any]:
        """Always empty: tools get their validated input as the first argument."""
        return _EMPTY


class DecisionContext(_StepServices):
    """What `decide` and `dry_run` receive.

    Attributes:
        options: the agent's validated options.
        turn: 1-based decision index in this invocation.
        state_version: 0-based; advances after every accepted batch.
        capabilities: tuple of read-only `{name, description, inputJsonSchema}`, by name.
        result_json_schema: the read-only raw-result JSON Schema.
        rejection: `None`, or when the previous decision of this turn was rejected and
            sent back for repair (`AgentLimits.max_repairs`), a read-only mapping
            `{code, message, attempt, issues}`: `attempt` counts the turn's rejections
            from 1, and each issue is `{callId, tool, path, message}` with `path` a JSON
            pointer into the decision (`/calls/1/input/n`). Nothing of that decision ran.

    `reserve_usage` and `report_usage` charge model usage to the agent tree's budgets.
    """

    __slots__ = (
        "_ledger",
        "capabilities",
        "options",
        "rejection",
        "result_json_schema",
        "state_version",
        "turn",
    )

    def __init__(
        self,
        step: StepContext,
        *,
        options: Any,
        turn: int,
        state_version: int,
        capabilities: tuple[FrozenDict, ...],
        result_json_schema: FrozenDict,
        ledger: UsageLedger | None = None,
        rejection: FrozenDict | None = None,
    ) -> None:
        super().__init__(step)
        self.rejection = rejection
        self.options = options
        self.turn = turn
        self.state_version = state_version
        self.capabilities = capabilities
        self.result_json_schema = result_json_schema
        self._ledger = ledger

    def _open_ledger(self, where: str) -> UsageLedger:
        if self._ledger is None:
            raise AgentError(
                f"{where} is only possible in an agent's decide",
                code="TUBELESS_AGENT_INVALID_USAGE",
            )
        return self._ledger

    def reserve_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0
    ) -> UsageReservation:
        """Reserve usage for one model request, before sending it.

        The amounts (upper bounds: a prompt's size, the request's `max_output_tokens`) are
        charged to this agent's budget and every ancestor's at once, or to none. Settle the
        returned reservation with the actual usage; one not settled when `decide` returns
        stays charged at its reserved amounts.

        Raises:
            AgentLimitError: the reservation does not fit `max_input_tokens`,
                `max_output_tokens`, `max_total_tokens` or `max_cost` of some budget of the
                tree (`scope` names it); nothing was charged, so do not send the request.
            AgentError: `TUBELESS_AGENT_INVALID_USAGE` for a negative or non-numeric amount,
                or when `decide` already returned.
        """
        ledger = self._open_ledger("reserve_usage")
        return ledger.reserve(check_amounts("reserve_usage", input_tokens, output_tokens, cost))

    def report_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0
    ) -> None:
        """Charge usage after the fact, for adapters that cannot estimate it beforehand.

        Raises:
            AgentLimitError: the usage broke a limit; it is charged all the same and the turn
                fails before any tool runs.
            AgentError: `TUBELESS_AGENT_INVALID_USAGE` for a negative or non-numeric amount,
                or when `decide` already returned.
        """
        ledger = self._open_ledger("report_usage")
        ledger.report(check_amounts("report_usage", input_tokens, output_tokens, cost))

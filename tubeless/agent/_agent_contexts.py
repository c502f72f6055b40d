"""What decision callbacks and tool handlers receive."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless.agent._journal import ExecutionIds
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
    """

    __slots__ = ("execution",)

    def __init__(self, step: StepContext, execution: ExecutionIds | None = None) -> None:
        super().__init__(step)
        self.execution = execution

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
    """

    __slots__ = (
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
        rejection: FrozenDict | None = None,
    ) -> None:
        super().__init__(step)
        self.rejection = rejection
        self.options = options
        self.turn = turn
        self.state_version = state_version
        self.capabilities = capabilities
        self.result_json_schema = result_json_schema

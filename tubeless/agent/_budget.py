"""One budget per agent invocation, chained to its ancestors' in a tree with one permit queue.

A root invocation makes an `AgentTree`; a subagent's budget hangs below the budget of the
agent that called it. Charges (calls, decisions, repairs) are checked against every budget in the
chain and applied to all of them under the tree's one lock, so sibling subagents on other
threads can never overspend a shared ancestor. Jobs (a `decide` callback, a leaf handler)
take one permit from every budget in their chain together; a call that only waits for its
subagent holds none, so nesting works with `max_concurrency=1` at every level.

Usage (tokens and cost) is charged the same way: a reservation fits every budget in the
chain or is refused before anything is sent; a settlement above its reservation is charged
all the same (it was spent), and its refusal is returned for the turn to fail with.
"""

from __future__ import annotations

import collections
import threading
import time
from decimal import Decimal

from tubeless._usage import Usage
from tubeless.agent._limits import AgentLimits
from tubeless.errors import AgentLimitError
from tubeless.pipeline.lowlevel import raise_if_cancelled

_POLL_SECONDS = 0.02
"""How often a queued job looks at the cancellation signal (an Event has no callbacks)."""


class _Waiter:
    __slots__ = ("chain", "granted")

    def __init__(self, chain: tuple[Budget, ...]) -> None:
        self.chain = chain
        self.granted = False


def _room(chain: tuple[Budget, ...]) -> bool:
    """Whether every budget in `chain` has a permit free."""
    # A loop, not `all()` over a generator: this runs for every job.
    for budget in chain:  # noqa: SIM110
        if budget.active >= budget.limits.max_concurrency:
            return False
    return True


class AgentTree:
    """What every invocation under one root shares: a lock and the permit queue."""

    __slots__ = ("_changed", "_queue", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # Taken as `lock` directly where nothing waits: that spares the Condition's wrapper.
        self._changed = threading.Condition(self.lock)
        self._queue: collections.deque[_Waiter] = collections.deque()

    def acquire(self, chain: tuple[Budget, ...], signal: threading.Event) -> None:
        """Take a permit from every budget in `chain`, queueing in arrival order.

        The first queued job whose whole chain has room goes first (a job blocked by a
        busy budget does not hold back one whose chain is free).

        Raises:
            RunCancelledError: when the run is cancelled before the permits are granted;
                a queued job never starts after cancellation.
        """
        with self.lock:
            if not self._queue and _room(chain):
                # Nobody queued and room everywhere: granted at once, as `_grant` would.
                for budget in chain:
                    budget.active += 1
                granted = True
            else:
                granted = self._wait(chain, signal)
        if signal.is_set():
            if granted:
                self.release(chain)
            raise_if_cancelled(signal)

    def _wait(self, chain: tuple[Budget, ...], signal: threading.Event) -> bool:
        """Queue for the permits of `chain` (lock held); whether they were granted."""
        waiter = _Waiter(chain)
        self._queue.append(waiter)
        self._grant()
        while not waiter.granted and not signal.is_set():
            self._changed.wait(_POLL_SECONDS)
        if not waiter.granted:
            self._queue.remove(waiter)
        return waiter.granted

    def release(self, chain: tuple[Budget, ...]) -> None:
        """Give back the permits of `chain` and hand them to queued jobs."""
        with self.lock:
            for budget in chain:
                budget.active -= 1
            if self._queue:
                self._grant()

    def _grant(self) -> None:
        granted = False
        for waiter in list(self._queue):
            if _room(waiter.chain):
                for budget in waiter.chain:
                    budget.active += 1
                waiter.granted = granted = True
                self._queue.remove(waiter)
        if granted:
            self._changed.notify_all()


class Budget:
    """What one invocation has consumed, and the chain of budgets it is charged to.

    Attributes:
        limits: the invocation's own limits.
        run_id: the run id of the invocation's `agent` run (named in limit errors).
        level: 0 for a root invocation, one more for each delegation below it.
        chain: every budget from the root down to this one.
        deadline: the `time.monotonic()` at which the earliest `max_seconds` of the chain
            runs out, or `None`.
    """

    __slots__ = (
        "active",
        "calls",
        "chain",
        "cost",
        "deadline",
        "decisions",
        "input_tokens",
        "level",
        "limits",
        "output_tokens",
        "repairs",
        "run_id",
        "sole",
        "started",
        "tree",
    )

    def __init__(
        self,
        limits: AgentLimits,
        run_id: str,
        parent: Budget | None = None,
        *,
        sole: bool = False,
    ) -> None:
        """`sole`: a root budget whose tree never grows (its agent has no pipeline tools).

        Its jobs are one decision or one batch's calls at a time, and the batch's pool
        already bounds those by `max_concurrency`: its permits only check the signal.
        """
        self.sole = sole and parent is None
        self.limits = limits
        self.run_id = run_id
        self.tree: AgentTree = AgentTree() if parent is None else parent.tree
        self.level: int = 0 if parent is None else parent.level + 1
        self.chain: tuple[Budget, ...] = (self,) if parent is None else (*parent.chain, self)
        self.calls = 0
        self.decisions = 0
        self.repairs = 0
        self.active = 0
        self.input_tokens = 0
        """Input tokens spent and reserved in this invocation's subtree."""
        self.output_tokens = 0
        """Output tokens spent and reserved in this invocation's subtree."""
        self.cost = Decimal(0)
        """Cost spent and reserved, exact in decimal (so ten reservations of 0.1 fit 1.0)."""
        self.started = time.monotonic()
        own = None if limits.max_seconds is None else self.started + limits.max_seconds
        inherited = None if parent is None else parent.deadline
        self.deadline: float | None = (
            inherited if own is None else own if inherited is None else min(own, inherited)
        )

    def check_time(self) -> None:
        """Check that no `max_seconds` of the chain has run out.

        Raises:
            AgentLimitError: `max_seconds`, naming the nearest budget that ran out.
        """
        if self.deadline is None:
            return
        now = time.monotonic()
        if now < self.deadline:
            return
        for budget in reversed(self.chain):
            bound = budget.limits.max_seconds
            if bound is not None and now >= budget.started + bound:
                consumed = round(now - budget.started, 3)
                raise AgentLimitError(
                    "max_seconds", bound=bound, consumed=consumed, requested=0, scope=budget.run_id
                )

    def admit_decision(self) -> None:
        """Charge one decision to every budget in the chain, or to none.

        Raises:
            AgentLimitError: `max_decisions`, naming the nearest budget that refused.
        """
        with self.tree.lock:
            self._refuse_decision()
            for budget in self.chain:
                budget.decisions += 1

    def admit_calls(self, count: int) -> None:
        """Charge a batch of `count` calls to every budget in the chain, or to none.

        Raises:
            AgentLimitError: `max_calls`, naming the nearest budget that refused.
        """
        with self.tree.lock:
            self._refuse_calls(count)
            for budget in self.chain:
                budget.calls += count

    def reserve_usage(self, input_tokens: int, output_tokens: int, cost: Decimal) -> None:
        """Charge usage to every budget in the chain, or to none.

        Raises:
            AgentLimitError: a usage limit, naming the nearest budget that refused.
        """
        with self.tree.lock:
            for budget in reversed(self.chain):
                refusal = _usage_refusal(budget, input_tokens, output_tokens, cost)
                if refusal is not None:
                    raise refusal
            self._add_usage(input_tokens, output_tokens, cost)

    def adjust_usage(
        self, input_tokens: int, output_tokens: int, cost: Decimal
    ) -> AgentLimitError | None:
        """Add usage (negative: a refund) to every budget in the chain, even past a limit.

        Returns:
            The limit error of the nearest budget an increase took past a limit, if any.
        """
        with self.tree.lock:
            refusal = None
            for budget in reversed(self.chain):
                refusal = refusal or _usage_refusal(
                    budget, max(input_tokens, 0), max(output_tokens, 0), max(cost, Decimal(0))
                )
            self._add_usage(input_tokens, output_tokens, cost)
            return refusal

    def usage(self) -> Usage:
        """What the subtree spent (and holds reserved), as a `Usage`."""
        with self.tree.lock:
            return Usage(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cost=plain_cost(self.cost),
            )

    def check_calls(self, count: int) -> None:
        """Check that a batch of `count` calls fits every budget, charging nothing.

        Raises:
            AgentLimitError: `max_calls`, naming the nearest budget that refused.
        """
        with self.tree.lock:
            self._refuse_calls(count)

    def admit_repair(self) -> None:
        """Charge one repair and the decision it asks for to every budget in the chain.

        Raises:
            AgentLimitError: `max_repairs` (checked first) or `max_decisions`, naming the
                nearest budget that refused; nothing is charged then.
        """
        with self.tree.lock:
            for budget in reversed(self.chain):
                if budget.repairs + 1 > budget.limits.max_repairs:
                    raise _limit(budget, "max_repairs", budget.repairs, 1)
            self._refuse_decision()
            for budget in self.chain:
                budget.repairs += 1
                budget.decisions += 1

    def _refuse_decision(self) -> None:
        # Under the tree's lock: the nearest budget without room for one more decision.
        for budget in reversed(self.chain):
            if budget.decisions + 1 > budget.limits.max_decisions:
                raise _limit(budget, "max_decisions", budget.decisions, 1)

    def _refuse_calls(self, count: int) -> None:
        # Under the tree's lock: the nearest budget without room for `count` more calls.
        for budget in reversed(self.chain):
            if count > budget.limits.max_calls - budget.calls:
                raise _limit(budget, "max_calls", budget.calls, count)

    def _add_usage(self, input_tokens: int, output_tokens: int, cost: Decimal) -> None:
        # Under the tree's lock.
        for budget in self.chain:
            budget.input_tokens += input_tokens
            budget.output_tokens += output_tokens
            budget.cost += cost

    def check_delegation(self) -> None:
        """Check that one more level of subagents fits every budget's `max_depth`.

        Raises:
            AgentLimitError: `max_depth`, naming the nearest budget that refused.
        """
        for budget in reversed(self.chain):
            below = self.level - budget.level
            if below + 1 > budget.limits.max_depth:
                raise _limit(budget, "max_depth", below, 1)

    def permit(self, signal: threading.Event) -> _Permit:
        """Hold a permit from every budget in the chain while the block runs one job.

        The context manager keeps no state of its own: one may be entered again, from
        several threads at once, each entry holding its own permit.
        """
        return _Permit(self, signal)

    def acquire(self, signal: threading.Event) -> None:
        """Take the permits `permit` takes, for a job that gives them back with `release`."""
        _Permit(self, signal).__enter__()

    def release(self) -> None:
        """Give back the permits `acquire` took (from any thread)."""
        if not self.sole:
            self.tree.release(self.chain)


class _Permit:
    """`Budget.permit`'s context manager (a plain class: it runs for every job).

    Stateless beyond its budget and signal, so a batch enters one for each of its calls.
    """

    __slots__ = ("_budget", "_signal")

    def __init__(self, budget: Budget, signal: threading.Event) -> None:
        self._budget = budget
        self._signal = signal

    def __enter__(self) -> None:
        budget = self._budget
        if budget.sole:
            raise_if_cancelled(self._signal)  # as a granted permit would
            return
        budget.tree.acquire(budget.chain, self._signal)

    def __exit__(self, *exc_info: object) -> None:
        budget = self._budget
        if not budget.sole:
            budget.tree.release(budget.chain)


def _limit(budget: Budget, name: str, consumed: int, requested: int) -> AgentLimitError:
    bound = getattr(budget.limits, name)
    return AgentLimitError(
        name, bound=bound, consumed=consumed, requested=requested, scope=budget.run_id
    )


def plain_cost(cost: Decimal) -> float:
    """A decimal cost as a plain number: an `int` when it is whole, else a `float`."""
    whole = cost.to_integral_value()
    return int(whole) if cost == whole else float(cost)


def _usage_refusal(
    budget: Budget, input_tokens: int, output_tokens: int, cost: Decimal
) -> AgentLimitError | None:
    """The error of the first usage limit of `budget` these amounts would break."""
    limits = budget.limits
    for name, consumed, requested in (
        ("max_input_tokens", budget.input_tokens, input_tokens),
        ("max_output_tokens", budget.output_tokens, output_tokens),
        (
            "max_total_tokens",
            budget.input_tokens + budget.output_tokens,
            input_tokens + output_tokens,
        ),
    ):
        bound = getattr(limits, name)
        if bound is not None and requested > 0 and consumed + requested > bound:
            return _limit(budget, name, consumed, requested)
    bound = limits.max_cost
    if bound is not None and cost > 0 and budget.cost + cost > Decimal(repr(bound)):
        return AgentLimitError(
            "max_cost",
            bound=bound,
            consumed=plain_cost(budget.cost),
            requested=plain_cost(cost),
            scope=budget.run_id,
        )
    return None

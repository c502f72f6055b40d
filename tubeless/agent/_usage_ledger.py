"""Usage charged by one `decide` call: its reservations, settlements and reports.

`DecisionContext.reserve_usage` and `report_usage` go through the ledger of the decision
being made. The ledger charges the invocation's budget chain (`Budget.reserve_usage` /
`adjust_usage`), mirrors every charge into the agent's journal node when the agent is
durable, and keeps the decision's own figures for its trace attributes. When `decide`
returns the ledger closes: open reservations stay charged at their reserved amounts, and
a settlement or report that broke a limit fails the turn, whatever `decide` did with it.
"""

from __future__ import annotations

import threading
import typing
from decimal import Decimal

from tubeless._quote import quote
from tubeless._usage import Usage
from tubeless.agent._budget import Budget, plain_cost
from tubeless.agent._limits import is_amount
from tubeless.errors import AgentError, AgentLimitError

if typing.TYPE_CHECKING:
    from tubeless.agent._journal import AgentJournal

INVALID_USAGE_CODE = "TUBELESS_AGENT_INVALID_USAGE"

_Amounts = tuple[int, int, Decimal]
_NO_COST = Decimal(0)


def _invalid(message: str) -> AgentError:
    return AgentError(message, code=INVALID_USAGE_CODE)


def check_amounts(
    where: str, input_tokens: object, output_tokens: object, cost: object
) -> _Amounts:
    """Check the amounts given to `where`: tokens nonnegative safe integers, cost finite and
    nonnegative.

    Raises:
        AgentError: `TUBELESS_AGENT_INVALID_USAGE`, naming the argument.
    """
    for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if not is_amount(value, integer=True):
            raise _invalid(f"{where} {name} must be a nonnegative safe integer, got {quote(value)}")
    if not is_amount(cost, integer=False):
        raise _invalid(f"{where} cost must be a finite nonnegative number, got {quote(cost)}")
    # repr: a float's shortest decimal form, so 0.1 is charged as exactly 0.1.
    return typing.cast(int, input_tokens), typing.cast(int, output_tokens), Decimal(repr(cost))


@typing.final
class UsageReservation:
    """Usage reserved by `context.reserve_usage(...)` before a model request.

    Settle it with the request's actual usage; one not settled when `decide` returns is
    settled at its reserved amounts.

    Attributes:
        input_tokens: the reserved input tokens.
        output_tokens: the reserved output tokens.
        cost: the reserved cost.
    """

    __slots__ = ("_amounts", "_ledger", "_settled", "cost", "input_tokens", "output_tokens")

    def __init__(self, ledger: UsageLedger, amounts: _Amounts) -> None:
        self._ledger = ledger
        self._amounts = amounts
        self._settled = False
        self.input_tokens: int = amounts[0]
        self.output_tokens: int = amounts[1]
        self.cost: float = plain_cost(amounts[2])

    @property
    def settled(self) -> bool:
        """Whether the reservation was settled (by `settle`, or when `decide` returned)."""
        return self._settled

    def settle(self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0) -> None:
        """Replace the reserved amounts with the actual ones, refunding what was not used.

        An omitted amount is an actual zero. An actual amount above the reservation is
        charged all the same (it was spent); if that breaks a limit, the turn fails with
        the limit error before any tool runs.

        Raises:
            AgentLimitError: the actual usage broke a limit (the turn fails either way).
            AgentError: `TUBELESS_AGENT_INVALID_USAGE` for a negative or non-numeric amount,
                or a reservation already settled.
        """
        actual = check_amounts("settle", input_tokens, output_tokens, cost)
        self._ledger.settle(self, actual)

    def __repr__(self) -> str:
        return (
            f"UsageReservation(input_tokens={self.input_tokens}, "
            f"output_tokens={self.output_tokens}, cost={self.cost!r}, settled={self._settled})"
        )


class UsageLedger:
    """The usage one `decide` call charged (internal; see the module docstring)."""

    __slots__ = (
        "_budget",
        "_cost",
        "_input_tokens",
        "_journal",
        "_lock",
        "_open",
        "_output_tokens",
        "breach",
        "closed",
        "used",
    )

    def __init__(self, budget: Budget, journal: AgentJournal | None) -> None:
        self._budget = budget
        self._journal = journal
        self._lock = threading.Lock()
        self._open: list[UsageReservation] = []
        self.closed = False
        self.used = False
        """Whether anything was reserved or reported (then the attempt records usage)."""
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = _NO_COST
        self.breach: AgentLimitError | None = None
        """The first limit a settlement or report broke."""

    def _require_open(self, where: str) -> None:
        if self.closed:
            raise _invalid(f"{where} is only possible while decide runs")

    def _add(self, amounts: _Amounts, *, durable: bool) -> None:
        """Count `amounts` (lock held) and mirror them into the journal."""
        self.used = True
        self._input_tokens += amounts[0]
        self._output_tokens += amounts[1]
        self._cost += amounts[2]
        if self._journal is not None:
            self._journal.add_usage(amounts, durable=durable)

    def reserve(self, amounts: _Amounts) -> UsageReservation:
        """Charge a reservation to the whole chain, or refuse it before any request.

        A durable agent saves the reservation before it returns: a process killed during
        the request keeps it charged at the reserved amounts.
        """
        with self._lock:
            self._require_open("reserve_usage")
            self._budget.reserve_usage(*amounts)
            reservation = UsageReservation(self, amounts)
            self._open.append(reservation)
            self._add(amounts, durable=True)
            return reservation

    def settle(self, reservation: UsageReservation, actual: _Amounts) -> None:
        """Replace `reservation`'s amounts with `actual` (see `UsageReservation.settle`)."""
        with self._lock:
            if reservation._settled:
                raise _invalid("This usage reservation is already settled")
            reserved = reservation._amounts
            delta = (actual[0] - reserved[0], actual[1] - reserved[1], actual[2] - reserved[2])
            reservation._settled = True
            self._open.remove(reservation)
            self._charge(delta)

    def report(self, amounts: _Amounts) -> None:
        """Charge usage after the fact (for adapters that cannot estimate it)."""
        with self._lock:
            self._require_open("report_usage")
            self._charge(amounts)

    def _charge(self, amounts: _Amounts) -> None:
        refusal = self._budget.adjust_usage(*amounts)
        self._add(amounts, durable=False)
        if refusal is not None:
            self.breach = self.breach or refusal
            raise refusal

    def close(self) -> AgentLimitError | None:
        """Stop taking charges; open reservations stay charged at their reserved amounts.

        Returns:
            The limit a settlement or report broke while `decide` ran, if any: the turn
            fails with it even when `decide` caught it.
        """
        with self._lock:
            self.closed = True
            for reservation in self._open:
                reservation._settled = True
            self._open.clear()
        return self.breach

    def attributes(self) -> dict[str, int | float]:
        """The decision's own usage as trace attributes (`agent.usage.*`)."""
        usage = self.usage()
        return {
            "agent.usage.inputTokens": usage.input_tokens,
            "agent.usage.outputTokens": usage.output_tokens,
            "agent.usage.cost": usage.cost,
        }

    def usage(self) -> Usage:
        """The decision's own usage."""
        with self._lock:
            return Usage(
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cost=plain_cost(self._cost),
            )

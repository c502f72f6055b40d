"""Usage budgets: limits, reservations before the request, settlements, reports, run.usage."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

import tubeless
from tubeless import AgentLimits, Usage, UsageReservation, define_agent, define_tool
from tubeless.agent import pipeline_tool
from tubeless.errors import AgentDefinitionError, AgentError, AgentLimitError
from tubeless.pipeline import PipelineRun, create_steps, define_pipeline
from tubeless.testing import MemoryTraceSink

TEXT = {"type": "string"}
FINISH = {"kind": "finish", "result": "done"}
ONE_CALL = {"kind": "continue", "calls": [{"id": "c", "tool": "work", "input": "x"}]}


class Work:
    """A tool that records every input it ran with."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.tool = define_tool(
            description="Work", input_schema=TEXT, output_schema=TEXT, run=self._run
        )

    def _run(self, value: str, context: Any) -> str:
        self.ran.append(value)
        return value


def _agent(decide: Any, agent_id: str = "metered", tools: Any = None, **limits: Any) -> Any:
    return define_agent(
        id=agent_id,
        input_schema={},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools=tools,
        limits=limits or None,
    )


def _cause(run: PipelineRun, kind: type[BaseException]) -> Any:
    error: BaseException | None = run.first_exception()
    while error is not None and not isinstance(error, kind):
        error = error.__cause__
    assert isinstance(error, kind), run.errors
    return error


def _turns(*turns: Any) -> Any:
    """A decide running `turns[turn - 1](context)` and returning what it returns."""

    def decide(state: Any, context: Any) -> Any:
        return turns[context.turn - 1](context)

    return decide


# -- limits -----------------------------------------------------------------------------


def test_usage_limits_default_to_unbounded_and_stay_out_of_the_wire_form() -> None:
    """Unset usage limits are `None`, absent from `to_dict()`, and keep the definition id."""
    limits = AgentLimits()
    assert (limits.max_input_tokens, limits.max_output_tokens) == (None, None)
    assert (limits.max_total_tokens, limits.max_cost) == (None, None)
    assert "maxCost" not in limits.to_dict()
    plain = _agent(_turns(lambda c: FINISH))
    unset = _agent(_turns(lambda c: FINISH), max_cost=None, max_total_tokens=None)
    assert plain.definition.identity == unset.definition.identity


def test_set_usage_limits_are_in_the_wire_form_and_the_identity() -> None:
    """A set usage limit goes into `to_dict()` (camelCase) and changes the definition."""
    limits = AgentLimits(max_input_tokens=10, max_output_tokens=20, max_total_tokens=25)
    assert limits.to_dict()["maxInputTokens"] == 10
    assert limits.to_dict()["maxOutputTokens"] == 20
    assert limits.to_dict()["maxTotalTokens"] == 25
    assert AgentLimits(max_cost=0.5).to_dict()["maxCost"] == 0.5
    plain = _agent(_turns(lambda c: FINISH))
    capped = _agent(_turns(lambda c: FINISH), max_cost=2)
    assert plain.definition.identity != capped.definition.identity


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_input_tokens", -1),
        ("max_input_tokens", 1.5),
        ("max_output_tokens", True),
        ("max_total_tokens", "100"),
        ("max_total_tokens", 2**53),
        ("max_cost", -0.01),
        ("max_cost", math.nan),
        ("max_cost", math.inf),
        ("max_cost", False),
        ("max_cost", "1"),
    ],
)
def test_a_bad_usage_limit_is_a_coded_definition_error(name: str, value: Any) -> None:
    """Negative, non-integer token, non-finite or non-numeric limits fail the definition."""
    with pytest.raises(AgentDefinitionError) as raised:
        _agent(_turns(lambda c: FINISH), **{name: value})
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert name in str(raised.value)


def test_usage_figures_add_up() -> None:
    """`Usage.total_tokens` is input plus output; the wire form is camelCase."""
    usage = Usage(input_tokens=3, output_tokens=4, cost=0.5)
    assert usage.total_tokens == 7
    assert usage.to_dict() == {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7, "cost": 0.5}
    assert not Usage() and usage


# -- reservations -----------------------------------------------------------------------


def test_a_reservation_that_does_not_fit_is_refused_before_the_request() -> None:
    """Over `max_input_tokens` the reservation raises the limit error and nothing is sent."""
    sent: list[int] = []

    def ask(context: Any) -> Any:
        context.reserve_usage(input_tokens=101, output_tokens=1)
        sent.append(context.turn)
        return FINISH

    run = _agent(_turns(ask), max_input_tokens=100).run({})

    error = _cause(run, AgentLimitError)
    assert (error.limit, error.bound, error.consumed, error.requested) == (
        "max_input_tokens",
        100,
        0,
        101,
    )
    assert error.scope == run.run_id
    assert sent == []
    assert run.usage == Usage()


def test_settling_refunds_what_the_request_did_not_use() -> None:
    """Settled below the reservation, the rest is free again for the next reservation."""
    reservations: list[UsageReservation] = []

    def ask(context: Any) -> Any:
        reservation = context.reserve_usage(input_tokens=80, output_tokens=20, cost=0.8)
        reservations.append(reservation)
        reservation.settle(input_tokens=30, output_tokens=10, cost=0.25)
        return ONE_CALL if context.turn < 2 else FINISH

    work = Work()
    run = _agent(_turns(ask, ask), tools={"work": work.tool}, max_total_tokens=150).run({})

    assert run.status == "completed", run.errors
    assert run.usage == Usage(input_tokens=60, output_tokens=20, cost=0.5)
    assert run.to_dict()["usage"] == {
        "inputTokens": 60,
        "outputTokens": 20,
        "totalTokens": 80,
        "cost": 0.5,
    }
    assert all(reservation.settled for reservation in reservations)
    assert (reservations[0].input_tokens, reservations[0].cost) == (80, 0.8)


def test_decimal_costs_fill_a_cost_limit_exactly() -> None:
    """Ten reservations of 0.1 fit `max_cost=1.0`; an eleventh is refused."""
    fitted: list[int] = []

    def ask(context: Any) -> Any:
        for index in range(11):
            context.reserve_usage(cost=0.1)
            fitted.append(index)
        return FINISH

    run = _agent(_turns(ask), max_cost=1.0).run({})

    assert fitted == list(range(10))
    assert _cause(run, AgentLimitError).limit == "max_cost"
    assert run.usage.cost == 1


def test_an_unsettled_reservation_stays_charged_at_its_reserved_amounts() -> None:
    """A reservation still open when `decide` returns is settled at what it reserved."""
    kept: list[UsageReservation] = []

    def ask(context: Any) -> Any:
        kept.append(context.reserve_usage(input_tokens=7, output_tokens=5, cost=3))
        return FINISH

    run = _agent(_turns(ask)).run({})

    assert run.usage == Usage(input_tokens=7, output_tokens=5, cost=3)
    assert kept[0].settled
    with pytest.raises(AgentError) as raised:
        kept[0].settle(input_tokens=1)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_USAGE"


def test_an_actual_above_a_limit_is_charged_and_fails_the_turn_before_any_tool() -> None:
    """Settled over the cap, the excess counts and the turn fails even if decide catches it."""
    work = Work()
    caught: list[str] = []

    def ask(context: Any) -> Any:
        reservation = context.reserve_usage(output_tokens=50)
        try:
            reservation.settle(output_tokens=70)
        except AgentLimitError as error:
            caught.append(error.limit)
        return ONE_CALL

    run = _agent(_turns(ask), tools={"work": work.tool}, max_output_tokens=60).run({})

    assert caught == ["max_output_tokens"]
    error = _cause(run, AgentLimitError)
    assert (error.limit, error.consumed, error.requested) == ("max_output_tokens", 50, 20)
    assert work.ran == []
    assert run.usage.output_tokens == 70


def test_a_report_that_breaks_a_limit_fails_the_turn_like_a_settlement() -> None:
    """`report_usage` charges after the fact; over `max_total_tokens` no tool runs."""
    work = Work()

    def first(context: Any) -> Any:
        context.report_usage(input_tokens=40, output_tokens=10)
        return ONE_CALL

    def second(context: Any) -> Any:
        context.report_usage(input_tokens=60)
        return ONE_CALL

    run = _agent(_turns(first, second), tools={"work": work.tool}, max_total_tokens=100).run({})

    assert _cause(run, AgentLimitError).limit == "max_total_tokens"
    assert work.ran == ["x"]
    assert run.usage == Usage(input_tokens=100, output_tokens=10)


@pytest.mark.parametrize(
    "amounts",
    [
        {"input_tokens": -1},
        {"output_tokens": 1.5},
        {"input_tokens": True},
        {"output_tokens": "12"},
        {"cost": -0.5},
        {"cost": math.nan},
        {"cost": None},
    ],
)
@pytest.mark.parametrize("method", ["reserve", "settle", "report"])
def test_a_bad_amount_is_a_coded_error_in_decide(method: str, amounts: dict[str, Any]) -> None:
    """A negative or non-numeric amount fails `decide` with `TUBELESS_AGENT_INVALID_USAGE`."""

    def ask(context: Any) -> Any:
        if method == "reserve":
            context.reserve_usage(**amounts)
        elif method == "settle":
            context.reserve_usage(input_tokens=5).settle(**amounts)
        else:
            context.report_usage(**amounts)
        return FINISH

    run = _agent(_turns(ask)).run({})

    assert _cause(run, AgentError).code == "TUBELESS_AGENT_INVALID_USAGE"
    assert run.usage.input_tokens == (5 if method == "settle" else 0)


def test_a_reservation_settles_once() -> None:
    """A second `settle` of one reservation is a coded error."""

    def ask(context: Any) -> Any:
        reservation = context.reserve_usage(input_tokens=5)
        reservation.settle(input_tokens=4)
        reservation.settle(input_tokens=3)
        return FINISH

    run = _agent(_turns(ask)).run({})

    assert _cause(run, AgentError).code == "TUBELESS_AGENT_INVALID_USAGE"
    assert run.usage.input_tokens == 4


def test_usage_cannot_be_charged_after_decide_returned() -> None:
    """A context kept past its `decide` refuses reservations and reports."""
    kept: list[Any] = []

    def ask(context: Any) -> Any:
        kept.append(context)
        return FINISH

    _agent(_turns(ask)).run({})

    for charge in (kept[0].reserve_usage, kept[0].report_usage):
        with pytest.raises(AgentError) as raised:
            charge(input_tokens=1)
        assert raised.value.code == "TUBELESS_AGENT_INVALID_USAGE"


# -- the tree and the report ------------------------------------------------------------


def test_a_parents_limit_binds_its_subagents_reservations() -> None:
    """The child's reservation is refused by the parent's budget, named by `scope`."""

    def child_ask(context: Any) -> Any:
        context.reserve_usage(input_tokens=30)
        context.reserve_usage(input_tokens=30)
        return FINISH

    child = _agent(_turns(child_ask), agent_id="child")
    calls = {"kind": "continue", "calls": [{"id": "k", "tool": "child", "input": {}}]}

    def parent_ask(context: Any) -> Any:
        context.reserve_usage(input_tokens=10)
        return calls

    tools = {"child": pipeline_tool(child, description="Delegate")}
    run = _agent(_turns(parent_ask), agent_id="parent", tools=tools, max_input_tokens=50).run({})

    error = _cause(run, AgentLimitError)
    assert (error.limit, error.consumed, error.requested) == ("max_input_tokens", 40, 30)
    assert error.scope == run.run_id
    assert run.usage.input_tokens == 40


def test_a_cancelled_run_reports_its_usage() -> None:
    """Usage spent before the signal was set is in `run.usage` of the cancelled run."""
    signal = threading.Event()

    def ask(context: Any) -> Any:
        context.reserve_usage(input_tokens=12, cost=0.5).settle(input_tokens=9, cost=0.25)
        signal.set()
        return FINISH

    run = _agent(_turns(ask)).run({}, context={"signal": signal})

    assert run.status == "cancelled"
    assert run.usage == Usage(input_tokens=9, cost=0.25)


def test_a_run_that_meters_nothing_has_no_usage_in_its_wire_form() -> None:
    """A plain pipeline and an agent that never charged usage report zero, and no key."""
    step = create_steps().step("one", run=lambda inputs, context: 1)
    plain = define_pipeline(id="plain", steps=[step], finalize=step).run()
    agent = _agent(_turns(lambda c: FINISH)).run({})
    for run in (plain, agent):
        assert run.usage == Usage()
        assert "usage" not in run.to_dict()


def test_the_decide_attempt_records_its_own_usage(sink: MemoryTraceSink) -> None:
    """Each decide attempt carries the usage its decision charged, failed ones included."""

    def first(context: Any) -> Any:
        context.reserve_usage(input_tokens=10, output_tokens=5).settle(
            input_tokens=8, output_tokens=2, cost=0.5
        )
        return ONE_CALL

    def second(context: Any) -> Any:
        context.report_usage(input_tokens=1)
        raise RuntimeError("model failed")

    work = Work()
    run = _agent(_turns(first, second), tools={"work": work.tool}).run(
        {}, context={"tracing": sink}
    )

    assert run.status == "failed"
    attempts = [
        record["payload"]["attributes"]
        for record in sink.records
        if record["name"] == "step.attempted" and record.get("stepId") == "decide"
    ]
    assert [a["agent.turn"] for a in attempts] == [1, 2]
    assert [
        (a["agent.usage.inputTokens"], a["agent.usage.outputTokens"], a["agent.usage.cost"])
        for a in attempts
    ] == [(8, 2, 0.5), (1, 0, 0)]
    assert "agent.decision" not in attempts[1]


def test_usage_names_are_top_level() -> None:
    """`Usage` and `UsageReservation` are everyday names of `tubeless`."""
    assert tubeless.Usage is tubeless.agent.Usage
    assert tubeless.UsageReservation.__module__ == "tubeless.agent"

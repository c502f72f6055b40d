"""Agent limits: definition rules and the exact triggers of each bound."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tubeless.agent import AgentLimits, define_agent, define_tool
from tubeless.agent._limits import resolve_limits
from tubeless.errors import AgentDefinitionError, AgentLimitError, PipelineExecutionError
from tubeless.pipeline import PipelineRun
from tubeless.testing import scripted_decide

TEXT = {"type": "string"}
LIMIT = "TUBELESS_AGENT_LIMIT_REACHED"
MAX_SAFE = 2**53 - 1


def _limit_error(run: PipelineRun) -> AgentLimitError:
    error: BaseException | None = run.first_exception()
    while error is not None and not isinstance(error, AgentLimitError):
        error = error.__cause__
    assert isinstance(error, AgentLimitError), run.errors
    return error


class Counting:
    """A tool that counts its handler calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self.tool = define_tool(
            description="Count calls",
            input_schema=TEXT,
            output_schema=TEXT,
            run=self._run,
        )

    def _run(self, value: str, context: Any) -> str:
        with self._lock:
            self.calls.append(value)
        return value


def _batch(size: int, prefix: str = "c") -> dict[str, Any]:
    calls = [{"id": f"{prefix}{i}", "tool": "count", "input": f"{prefix}{i}"} for i in range(size)]
    return {"kind": "continue", "calls": calls}


FINISH = {"kind": "finish", "result": "done"}


def _agent(decisions: list[Any], counting: Counting, limits: Any) -> tuple[Any, Any]:
    decide = scripted_decide(decisions)
    reduced: list[int] = []
    agent = define_agent(
        id="limited",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools={"count": counting.tool},
        reduce=lambda state, outcomes: reduced.append(len(outcomes)) or state,
        limits=limits,
    )
    return agent, decide


def test_defaults() -> None:
    """20 turns, 100 calls, 100 decisions, depth 4 and one job at a time."""
    limits = AgentLimits()

    assert (
        limits.max_turns,
        limits.max_calls,
        limits.max_decisions,
        limits.max_depth,
        limits.max_concurrency,
    ) == (20, 100, 100, 4, 1)
    assert limits.to_dict() == {
        "maxTurns": 20,
        "maxCalls": 100,
        "maxDecisions": 100,
        "maxDepth": 4,
        "maxConcurrency": 1,
    }
    assert resolve_limits(None) == limits


def test_limits_are_frozen() -> None:
    """The resolved limits cannot be changed."""
    limits = resolve_limits({"max_turns": 3})

    with pytest.raises(AttributeError):
        limits.max_turns = 4  # type: ignore[misc]


def test_limits_may_be_a_dict_or_an_agent_limits() -> None:
    """Both forms resolve to the same frozen limits, missing keys taking defaults."""
    from_dict = resolve_limits({"max_turns": 3, "max_calls": 0})
    from_class = resolve_limits(AgentLimits(max_turns=3, max_calls=0))

    assert from_dict == from_class == AgentLimits(max_turns=3, max_calls=0)


def test_plans_show_the_resolved_limits_in_camel_case() -> None:
    """Limits given as snake_case keys appear in the plan's agent block in wire form."""
    agent, _ = _agent([FINISH], Counting(), {"max_calls": 0, "max_concurrency": 3})

    assert agent.plan().to_dict()["steps"][0]["agent"]["limits"] == {
        "maxTurns": 20,
        "maxCalls": 0,
        "maxDecisions": 100,
        "maxDepth": 4,
        "maxConcurrency": 3,
    }


def test_an_unknown_key_is_rejected() -> None:
    """Only the five limit names are accepted."""
    with pytest.raises(AgentDefinitionError) as raised:
        _agent([FINISH], Counting(), {"max_turns": 2, "max_width": 1})

    assert str(raised.value) == "Unsupported agent limit: max_width"
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    with pytest.raises(AgentDefinitionError, match="Unsupported agent limit: maxTurns"):
        resolve_limits({"maxTurns": 2})


@pytest.mark.parametrize("name", ["max_turns", "max_decisions", "max_concurrency"])
@pytest.mark.parametrize("value", [0, -1, True, False, 1.0, 2.5, "3", None, 2**53, -(2**53)])
def test_positive_limits_need_a_positive_safe_integer(name: str, value: Any) -> None:
    """Zero, negatives, bools, floats, strings and numbers past 2**53 - 1 fail."""
    with pytest.raises(AgentDefinitionError, match="safe integer") as raised:
        resolve_limits({name: value})

    assert str(raised.value) == f"Agent {name} must be a positive safe integer, got {value!r}"


@pytest.mark.parametrize("value", [-1, True, 1.0, "1", None, 2**53])
def test_max_calls_needs_a_nonnegative_safe_integer(value: Any) -> None:
    """`max_calls` alone allows zero; the rest of the rules are the same."""
    with pytest.raises(AgentDefinitionError) as raised:
        resolve_limits({"max_calls": value})

    assert str(raised.value) == f"Agent max_calls must be a nonnegative safe integer, got {value!r}"


def test_agent_limits_instances_are_checked_too() -> None:
    """An `AgentLimits` built with a bad value fails when the agent is defined."""
    with pytest.raises(AgentDefinitionError, match="max_turns must be a positive safe integer"):
        _agent([FINISH], Counting(), AgentLimits(max_turns=True))


def test_limits_of_another_type_are_rejected() -> None:
    """Limits are a dict or an `AgentLimits`."""
    with pytest.raises(AgentDefinitionError, match="AgentLimits or a dict"):
        _agent([FINISH], Counting(), [("max_turns", 3)])


@pytest.mark.parametrize("value", [1, MAX_SAFE])
def test_bounds_are_inclusive(value: int) -> None:
    """1 and 2**53 - 1 are valid everywhere, 0 for `max_calls`."""
    limits = resolve_limits(
        {
            "max_turns": value,
            "max_calls": 0,
            "max_decisions": value,
            "max_concurrency": value,
        }
    )

    assert limits.max_turns == value
    assert limits.max_calls == 0


def test_max_decisions_is_checked_at_the_next_decision() -> None:
    """The batch of the last allowed decision runs; the next decision fails before decide."""
    counting = Counting()
    agent, decide = _agent([_batch(1), FINISH], counting, {"max_decisions": 1})

    run = agent.run({})

    assert run.status == "failed"
    assert counting.calls == ["c0"]
    assert [turn for turn, _ in decide.seen] == [1]
    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_decisions=1 exceeded (consumed=1, requested=1, scope={run.run_id})"
    )
    assert (error.code, error.limit, error.bound, error.consumed, error.requested, error.scope) == (
        LIMIT,
        "max_decisions",
        1,
        1,
        1,
        run.run_id,
    )
    assert LIMIT in json.dumps([e.to_dict() for e in run.errors])


def test_continuing_on_the_last_turn_fails_before_tools_run() -> None:
    """A continue decision on turn `max_turns` fails before its batch."""
    counting = Counting()
    agent, decide = _agent([_batch(1, "a"), _batch(2, "b")], counting, {"max_turns": 2})

    run = agent.run({})

    assert run.status == "failed"
    assert counting.calls == ["a0"]
    assert [turn for turn, _ in decide.seen] == [1, 2]
    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_turns=2 exceeded (consumed=2, requested=1, scope={run.run_id})"
    )
    assert (error.limit, error.bound, error.consumed, error.requested) == ("max_turns", 2, 2, 1)
    assert "TUBELESS_ITERATION_LIMIT_REACHED" not in json.dumps([e.to_dict() for e in run.errors])


def test_finishing_on_the_last_turn_succeeds() -> None:
    """A finish decision on turn `max_turns` is allowed."""
    counting = Counting()
    agent, _ = _agent([_batch(1), FINISH], counting, {"max_turns": 2})

    run = agent.run({})

    assert run.status == "completed"
    assert run.value == "done"


def test_a_single_turn_agent_can_only_finish() -> None:
    """With `max_turns=1` a continue fails at once; a finish succeeds."""
    counting = Counting()
    continuing, _ = _agent([_batch(1)], counting, {"max_turns": 1})
    finishing, _ = _agent([FINISH], counting, {"max_turns": 1})

    assert _limit_error(continuing.run({})).consumed == 1
    assert finishing.run({}).value == "done"
    assert counting.calls == []


def test_a_batch_over_the_remaining_budget_fails_before_any_handler() -> None:
    """The whole batch is rejected when it needs more calls than remain."""
    counting = Counting()
    agent, decide = _agent([_batch(2, "a"), _batch(2, "b"), FINISH], counting, {"max_calls": 3})

    run = agent.run({})

    assert run.status == "failed"
    assert counting.calls == ["a0", "a1"]
    assert [turn for turn, _ in decide.seen] == [1, 2]
    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_calls=3 exceeded (consumed=2, requested=2, scope={run.run_id})"
    )
    assert (error.limit, error.bound, error.consumed, error.requested) == ("max_calls", 3, 2, 2)


def test_a_first_batch_larger_than_the_budget_runs_nothing() -> None:
    """With concurrency, no handler of an oversized batch starts."""
    counting = Counting()
    agent, _ = _agent([_batch(5)], counting, {"max_calls": 4, "max_concurrency": 5})

    error = _limit_error(agent.run({}))

    assert counting.calls == []
    assert (error.consumed, error.requested) == (0, 5)


def test_a_batch_that_exactly_uses_the_budget_runs_and_finish_is_free() -> None:
    """Using every remaining call is allowed, and finishing needs no call budget."""
    counting = Counting()
    agent, _ = _agent([_batch(2, "a"), _batch(1, "b"), FINISH], counting, {"max_calls": 3})

    run = agent.run({})

    assert run.status == "completed"
    assert counting.calls == ["a0", "a1", "b0"]


def test_zero_max_calls_allows_finishing_only() -> None:
    """`max_calls=0` is valid: any continue fails, a finish succeeds."""
    counting = Counting()
    finishing, _ = _agent([FINISH], counting, {"max_calls": 0})
    continuing, _ = _agent([_batch(1)], counting, {"max_calls": 0})

    assert finishing.run({}).value == "done"
    run = continuing.run({})
    error = _limit_error(run)
    assert str(error) == (
        f"Agent max_calls=0 exceeded (consumed=0, requested=1, scope={run.run_id})"
    )
    assert counting.calls == []


def test_max_turns_is_checked_before_max_calls() -> None:
    """On the last turn an oversized batch reports `max_turns`."""
    agent, _ = _agent([_batch(3)], Counting(), {"max_turns": 1, "max_calls": 1})

    assert _limit_error(agent.run({})).limit == "max_turns"


def test_limits_are_checked_before_tool_names() -> None:
    """An over-budget batch fails on the budget even when it names an unknown tool."""
    decision = {"kind": "continue", "calls": [{"id": "x", "tool": "nope", "input": "x"}]}
    agent, _ = _agent([decision], Counting(), {"max_calls": 0})

    assert _limit_error(agent.run({})).limit == "max_calls"


def test_run_or_raise_keeps_the_limit_error_in_the_cause_chain() -> None:
    """`run_or_raise` raises a pipeline error whose causes lead to the limit error."""
    agent, _ = _agent([_batch(1)], Counting(), {"max_calls": 0})

    with pytest.raises(PipelineExecutionError) as raised:
        agent.run_or_raise({})

    error: BaseException | None = raised.value
    while error is not None and not isinstance(error, AgentLimitError):
        error = error.__cause__
    assert isinstance(error, AgentLimitError)
    assert error.limit == "max_calls"


def test_max_concurrency_bounds_handlers_running_at_once() -> None:
    """With `max_concurrency=2` two handlers overlap and never three."""
    pair = threading.Barrier(2, timeout=30)
    lock = threading.Lock()
    running = [0]
    peak = [0]

    def run(value: str, context: Any) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        pair.wait()
        with lock:
            running[0] -= 1
        return value

    tool = define_tool(description="Pair up", input_schema=TEXT, output_schema=TEXT, run=run)
    agent = define_agent(
        id="pairs",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide([_batch(6), FINISH]),
        tools={"count": tool},
        limits={"max_concurrency": 2},
    )

    run_result = agent.run({})

    assert run_result.status == "completed"
    assert peak[0] == 2


def test_an_agent_called_from_a_handler_has_its_own_limits() -> None:
    """Limits count per invocation: an inner agent run by a handler keeps separate budgets."""
    inner_counting = Counting()
    inner, _ = _agent([_batch(1, "inner"), FINISH], inner_counting, {"max_calls": 1})

    def delegate(value: str, context: Any) -> str:
        return str(inner.run_or_raise({}, context={"signal": context.signal}))

    outer = define_agent(
        id="outer",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(
            [{"kind": "continue", "calls": [{"id": "d", "tool": "delegate", "input": "x"}]}, FINISH]
        ),
        tools={
            "delegate": define_tool(
                description="Run the inner agent",
                input_schema=TEXT,
                output_schema=TEXT,
                run=delegate,
            )
        },
        limits={"max_calls": 1},
    )

    run = outer.run({})

    assert run.status == "completed"
    assert inner_counting.calls == ["inner0"]


def test_a_limit_typo_suggests_the_limit_meant() -> None:
    """`max_call` is refused with `did you mean max_calls?`; a far miss gets no guess."""
    with pytest.raises(AgentDefinitionError) as raised:
        resolve_limits({"max_call": 3})
    assert str(raised.value) == "Unsupported agent limit: max_call; did you mean max_calls?"
    with pytest.raises(AgentDefinitionError) as far:
        resolve_limits({"speed": 3})
    assert str(far.value) == "Unsupported agent limit: speed"

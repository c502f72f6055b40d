"""Repairs: with `max_repairs`, an invalid decision goes back to `decide`, and nothing runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless import AgentLimits, Durability, define_agent, define_tool, pipeline_tool
from tubeless.errors import AgentDefinitionError, AgentError, AgentLimitError
from tubeless.pipeline import PipelineRun
from tubeless.testing import MemoryCheckpointStore, MemoryTraceSink
from tubeless.trace import agent_history, format_agent_history

TEXT = {"type": "string"}
ECHO_INPUT = {
    "type": "object",
    "properties": {"text": TEXT},
    "required": ["text"],
    "additionalProperties": False,
}


class Model:
    """A `decide` that answers from a list, in call order, and records what it saw."""

    def __init__(self, *answers: Any) -> None:
        self._answers = list(answers)
        self._lock = threading.Lock()
        self.seen: list[tuple[int, Any]] = []
        """`(turn, context.rejection)` of every call."""

    def __call__(self, state: Any, context: Any) -> Any:
        with self._lock:
            self.seen.append((context.turn, context.rejection))
            answer = self._answers.pop(0)
        return answer(context) if callable(answer) else answer


class Echo:
    """An echo tool whose handler records every start."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._lock = threading.Lock()
        self.tool = define_tool(
            description="Echo a text.",
            input_schema=ECHO_INPUT,
            output_schema=TEXT,
            run=self._run,
        )

    def _run(self, value: Any, context: Any) -> str:
        with self._lock:
            self.started.append(value["text"])
        return str(value["text"])


def _call(call_id: str, text: Any, tool: str = "echo") -> dict[str, Any]:
    return {"id": call_id, "tool": tool, "input": {"text": text}}


def _batch(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "continue", "calls": list(calls)}


def _finish(result: Any = "done") -> dict[str, Any]:
    return {"kind": "finish", "result": result}


def _agent(model: Model, echo: Echo | None = None, **limits: Any) -> Any:
    return define_agent(
        id="fixer",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=model,
        tools={"echo": (echo or Echo()).tool},
        limits=limits or None,
    )


def _chain(run: PipelineRun) -> list[BaseException]:
    found: list[BaseException] = []
    error: BaseException | None = run.first_exception()
    while error is not None and len(found) < 32:
        found.append(error)
        below = error.__cause__
        if below is None and hasattr(error, "result"):
            below = error.result.first_exception()
        error = below
    return found


def _codes(run: PipelineRun) -> list[str]:
    return [getattr(error, "code", "") for error in _chain(run)]


# -- limits -------------------------------------------------------------------------------


def test_max_repairs_defaults_to_zero_and_stays_out_of_the_wire_form() -> None:
    """Unset, `max_repairs` changes neither the limits' wire form nor the agent's identity."""
    assert AgentLimits().max_repairs == 0
    assert "maxRepairs" not in AgentLimits().to_dict()
    assert AgentLimits(max_repairs=2).to_dict()["maxRepairs"] == 2
    plain, zero = _agent(Model()), _agent(Model(), max_repairs=0)
    assert plain.definition.identity == zero.definition.identity
    assert _agent(Model(), max_repairs=2).definition.identity != plain.definition.identity


@pytest.mark.parametrize("value", [-1, True, 1.5, "2", 2**53])
def test_max_repairs_must_be_a_nonnegative_safe_integer(value: Any) -> None:
    """A bad `max_repairs` is a definition error."""
    with pytest.raises(AgentDefinitionError, match="max_repairs"):
        _agent(Model(), max_repairs=value)


def test_without_repairs_an_invalid_decision_fails_the_run_as_before() -> None:
    """The default: one bad argument fails the run after one decision; nothing runs."""
    echo, model = Echo(), Model(_batch(_call("a", "x"), _call("b", 5)))

    run = _agent(model, echo).run({})

    assert run.status == "failed"
    assert echo.started == []
    assert model.seen == [(1, None)]
    assert "TUBELESS_AGENT_INVALID_ARGUMENTS" in _codes(run)
    assert "TUBELESS_AGENT_LIMIT_REACHED" not in _codes(run)


# -- the repair loop ----------------------------------------------------------------------


def test_a_batch_with_one_bad_argument_starts_nothing_and_the_fixed_batch_runs_once() -> None:
    """Three calls, one bad: none starts; the corrected batch runs each call exactly once."""
    echo = Echo()
    model = Model(
        _batch(_call("a", "x"), _call("b", 5), _call("c", "z")),
        _batch(_call("a", "x"), _call("b", "y"), _call("c", "z")),
        _finish(),
    )
    # max_calls=3: the rejected batch is not charged, or the fixed one would not fit.
    run = _agent(model, echo, max_repairs=1, max_calls=3).run({})

    assert run.status == "completed", run.errors
    assert echo.started == ["x", "y", "z"]
    [(_, first), (turn, rejection), (_, last)] = model.seen
    assert first is None and last is None
    assert turn == 1
    assert json.loads(json.dumps(rejection)) == {
        "code": "TUBELESS_AGENT_INVALID_ARGUMENTS",
        "message": "Agent tool echo input validation failed: text: Expected string, got integer",
        "attempt": 1,
        "issues": [
            {
                "callId": "b",
                "tool": "echo",
                "path": "/calls/1/input/text",
                "message": "Expected string, got integer",
            }
        ],
    }
    with pytest.raises(TypeError):
        rejection["attempt"] = 2


def test_one_pass_lists_every_problem_of_the_batch() -> None:
    """An unknown tool, two bad arguments and a missing key are all listed, with paths."""
    model = Model(
        _batch(
            _call("a", 1),
            _call("b", "fine", tool="nope"),
            {"id": "c", "tool": "echo", "input": {}},
            _call("d", None),
        ),
        _finish(),
    )

    run = _agent(model, max_repairs=1).run({})

    assert run.status == "completed", run.errors
    rejection = model.seen[1][1]
    assert rejection["code"] == "TUBELESS_AGENT_INVALID_DECISION"  # names are checked first
    assert [(i["callId"], i["tool"], i["path"]) for i in rejection["issues"]] == [
        ("b", "'nope'", "/calls/1/tool"),
        ("a", "echo", "/calls/0/input/text"),
        ("c", "echo", "/calls/2/input"),
        ("d", "echo", "/calls/3/input/text"),
    ]
    assert rejection["issues"][2]["message"] == "'text' is a required property"
    assert rejection["issues"][3]["message"] == "Expected string, got null"


def test_shape_problems_are_listed_with_their_calls() -> None:
    """A call with extra keys and a duplicate id are both found in one pass."""
    model = Model(
        _batch({**_call("a", "x"), "why": 1}, _call("b", "y"), _call("b", "z")), _finish()
    )

    run = _agent(model, max_repairs=1).run({})

    assert run.status == "completed", run.errors
    rejection = model.seen[1][1]
    assert rejection["code"] == "TUBELESS_AGENT_INVALID_DECISION"
    assert [(i["callId"], i["path"]) for i in rejection["issues"]] == [
        ("a", "/calls/0"),
        ("b", "/calls/2/id"),
    ]
    assert "unexpected keys: 'why'" in rejection["issues"][0]["message"]


def test_a_bad_finish_result_is_repaired_under_its_own_code() -> None:
    """A result the result schema refuses is TUBELESS_AGENT_INVALID_RESULT under /result."""
    model = Model(_finish(42), _finish("ok"))

    run = _agent(model, max_repairs=1).run({})

    assert run.value == "ok"
    rejection = model.seen[1][1]
    assert rejection["code"] == "TUBELESS_AGENT_INVALID_RESULT"
    assert [(i["callId"], i["tool"], i["path"]) for i in rejection["issues"]] == [
        (None, None, "/result")
    ]


def test_the_attempt_counts_up_within_a_turn_and_starts_again_next_turn() -> None:
    """`attempt` is 1, then 2 in one turn; the next turn's first rejection is 1 again."""
    model = Model(
        _batch(_call("a", 1)),
        _batch(_call("a", 2)),
        _batch(_call("a", "x")),
        _finish(3),
        _finish(),
    )

    run = _agent(model, max_repairs=3).run({})

    assert run.status == "completed", run.errors
    attempts = [(turn, rejection and rejection["attempt"]) for turn, rejection in model.seen]
    assert attempts == [(1, None), (1, 1), (1, 2), (2, None), (2, 1)]


def test_out_of_repairs_the_run_fails_with_the_agent_code_in_the_chain() -> None:
    """The last rejection fails the run: the limit, caused by the argument error."""
    echo, model = Echo(), Model(_batch(_call("a", 1)), _batch(_call("a", 2)))

    run = _agent(model, echo, max_repairs=1).run({})

    assert run.status == "failed"
    assert echo.started == []
    assert len(model.seen) == 2
    chain = _chain(run)
    limit = next(error for error in chain if isinstance(error, AgentLimitError))
    assert (limit.limit, limit.bound, limit.consumed, limit.scope) == (
        "max_repairs",
        1,
        1,
        run.run_id,
    )
    argument = limit.__cause__
    assert isinstance(argument, AgentError)
    assert argument.code == "TUBELESS_AGENT_INVALID_ARGUMENTS"
    assert "input validation failed: text: Expected string, got integer" in str(argument)


def test_a_repair_is_charged_as_a_decision_too() -> None:
    """Two decisions in all: the repair's decision is refused by `max_decisions`."""
    model = Model(_batch(_call("a", 1)), _batch(_call("a", "x")))

    run = _agent(model, max_repairs=5, max_decisions=1).run({})

    limit = next(error for error in _chain(run) if isinstance(error, AgentLimitError))
    assert limit.limit == "max_decisions"
    assert len(model.seen) == 1


# -- what is never repaired ---------------------------------------------------------------


def test_a_limit_error_is_not_repaired() -> None:
    """A batch over `max_calls` fails at once, whatever repairs are left."""
    model = Model(_batch(_call("a", "x"), _call("b", "y")))

    run = _agent(model, max_repairs=3, max_calls=1).run({})

    assert run.status == "failed"
    assert len(model.seen) == 1
    assert "TUBELESS_AGENT_LIMIT_REACHED" in _codes(run)


def test_an_exception_from_decide_is_not_repaired() -> None:
    """`decide` raising fails the run; it is not asked again."""

    def broken(context: Any) -> Any:
        raise RuntimeError("model down")

    model = Model(broken)

    run = _agent(model, max_repairs=3).run({})

    assert run.status == "failed"
    assert len(model.seen) == 1


def test_a_cancelled_run_is_not_repaired() -> None:
    """A bad decision that arrives after cancellation ends the run cancelled, not repaired."""
    signal = threading.Event()

    def cancel_then_err(context: Any) -> Any:
        signal.set()
        return _batch(_call("a", 1))

    model = Model(cancel_then_err)

    run = _agent(model, max_repairs=3).run({}, context={"signal": signal})

    assert run.status == "cancelled"
    assert len(model.seen) == 1


def test_a_schema_that_raises_is_not_repaired() -> None:
    """A validator crash is the application's bug: the run fails at once."""

    class Crashing:
        def validate(self, value: Any) -> Any:
            raise RuntimeError("validator crashed")

        def json_schema(self) -> dict[str, Any]:
            return {"type": "object"}

    tool = define_tool(
        description="Crashy.", input_schema=Crashing(), output_schema=TEXT, run=lambda v, c: ""
    )
    model = Model(_batch(_call("a", "x", tool="crashy")))
    agent = define_agent(
        id="crashy",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=model,
        tools={"crashy": tool},
        limits={"max_repairs": 3},
    )

    run = agent.run({})

    assert run.status == "failed"
    assert len(model.seen) == 1
    assert "TUBELESS_AGENT_INVALID_ARGUMENTS" in _codes(run)


# -- bounds -------------------------------------------------------------------------------


def test_quoted_model_text_is_bounded_and_escaped() -> None:
    """A huge tool name, key and call id reach the rejection as short, escaped prefixes."""
    evil = "evil\n\x1b[2J" + "x" * 100_000
    model = Model(
        _batch(
            {"id": "a", "tool": evil, "input": {}},
            {"id": "b", "tool": "echo", "input": {"text": "x", evil: 1}},
            {"id": "c" * 300, "tool": "echo", "input": {"text": "x"}},
        ),
        _finish(),
    )

    run = _agent(model, max_repairs=1).run({})

    assert run.status == "completed", run.errors
    rejection = model.seen[1][1]
    text = json.dumps(rejection, ensure_ascii=False)
    assert len(text) < 4_000
    assert "\x1b" not in text and "\n" not in json.loads(json.dumps(text))
    for issue in rejection["issues"]:
        for value in issue.values():
            assert value is None or (len(value) <= 1_100 and value.isprintable())
    assert rejection["issues"][0]["callId"] is None  # the id over 256 characters


def test_a_rejection_lists_at_most_32_issues() -> None:
    """Forty bad calls give 32 issues."""
    model = Model(_batch(*(_call(f"c{i}", i) for i in range(40))), _finish())

    run = _agent(model, max_repairs=1, max_calls=40).run({})

    assert run.status == "completed", run.errors
    assert len(model.seen[1][1]["issues"]) == 32


# -- traces -------------------------------------------------------------------------------


def test_each_rejection_is_traced_on_its_decide_attempt() -> None:
    """The rejected attempt carries the code and issue count; the next one `agent.repair`."""
    sink = MemoryTraceSink()
    model = Model(_batch(_call("a", 1), _call("b", 2)), _batch(_call("a", "x")), _finish())

    run = _agent(model, max_repairs=1).run({}, context={"tracing": sink})

    assert run.status == "completed", run.errors
    attempts = [
        (r["payload"]["attempt"], r["payload"]["attributes"])
        for r in sink.records
        if r["name"] == "step.attempted" and r.get("stepId") == "decide"
    ]
    first_turn = [(n, a) for n, a in attempts if a["agent.turn"] == 1]
    assert [n for n, _ in first_turn] == [1, 1, 2]
    assert first_turn[1][1]["agent.rejection.code"] == "TUBELESS_AGENT_INVALID_ARGUMENTS"
    assert first_turn[1][1]["agent.rejection.issueCount"] == 2
    assert first_turn[2][1]["agent.repair"] == 1
    assert "agent.repair" not in first_turn[0][1]
    assert all("agent.rejection.code" not in a for _, a in attempts if a["agent.turn"] == 2)


def test_history_counts_the_rejected_decisions_of_each_turn() -> None:
    """The agent tree names how many decisions of a turn were sent back."""
    sink = MemoryTraceSink()
    model = Model(_finish(1), _finish(2), _finish())

    run = _agent(model, max_repairs=2).run({}, context={"tracing": sink})

    history = agent_history(sink.records, run.run_id)
    assert history is not None
    [turn] = history.agents[0].turns
    assert turn.rejections == 2
    assert turn.to_dict()["rejections"] == 2
    assert "turn 1  completed  2 decisions rejected" in format_agent_history(history)


# -- subagents ----------------------------------------------------------------------------


def test_a_subagents_repairs_are_charged_to_its_parent() -> None:
    """The child may repair twice, the parent once: the parent's budget refuses (`scope=`)."""
    child_model = Model(_finish(1), _finish(2), _finish("fixed"))
    child = define_agent(
        id="child",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=child_model,
        limits={"max_repairs": 2},
    )
    parent_model = Model(
        _batch({"id": "k", "tool": "child", "input": {}}),
        _finish(),
    )
    parent = define_agent(
        id="parent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=parent_model,
        tools={"child": pipeline_tool(child, description="Delegate.")},
        limits={"max_repairs": 1},
    )

    run = parent.run({})

    assert run.status == "failed"
    assert len(child_model.seen) == 2
    limit = next(error for error in _chain(run) if isinstance(error, AgentLimitError))
    assert (limit.limit, limit.consumed, limit.scope) == ("max_repairs", 1, run.run_id)
    assert f"scope={run.run_id}" in str(limit)
    assert "TUBELESS_AGENT_INVALID_RESULT" in _codes(run)


@pytest.mark.parametrize(("parent_repairs", "child_repairs", "asked"), [(0, 5, 1), (5, 0, 1)])
def test_a_subagent_repairs_only_when_every_budget_allows(
    parent_repairs: int, child_repairs: int, asked: int
) -> None:
    """A child's own 0, or a parent's 0, means the child's first bad decision fails."""
    child_model = Model(_finish(1), _finish("fixed"))
    child = define_agent(
        id="child",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=child_model,
        limits={"max_repairs": child_repairs},
    )
    parent = define_agent(
        id="parent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=Model(_batch({"id": "k", "tool": "child", "input": {}}), _finish()),
        tools={"child": pipeline_tool(child, description="Delegate.")},
        limits={"max_repairs": parent_repairs},
    )

    run = parent.run({})

    assert run.status == "failed"
    assert len(child_model.seen) == asked
    assert "TUBELESS_AGENT_INVALID_RESULT" in _codes(run)


# -- durability ---------------------------------------------------------------------------


def _durable(store: MemoryCheckpointStore, model: Model, echo: Echo, repairs: int) -> Any:
    return define_agent(
        id="durable-fixer",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=model,
        tools={"echo": echo.tool},
        limits={"max_repairs": repairs},
        implementation_version="1",
        durability=Durability(store=store, key="job"),
    )


def _cancel(signal: threading.Event) -> Callable[[Any], Any]:
    def answer(context: Any) -> Any:
        signal.set()
        return _finish()

    return answer


def test_a_resume_after_a_repair_sends_the_rejection_again_and_charges_it_once() -> None:
    """Stopped after a repair, the resumed run sees the saved rejection; no repair is lost."""
    store, echo, signal = MemoryCheckpointStore(), Echo(), threading.Event()
    first = Model(_batch(_call("a", 1)), _cancel(signal))

    stopped = _durable(store, first, echo, repairs=1).run({}, context={"signal": signal})

    assert stopped.status == "cancelled"
    saved = json.loads(store.checkpoint("job") or "{}")["agent"]
    assert saved["spent"] == {"calls": 0, "decisions": 2, "repairs": 1}
    assert saved["turn"]["rejection"]["attempt"] == 1
    rejection = first.seen[1][1]

    resumed_model = Model(_batch(_call("a", "x")), _finish())
    resumed = _durable(store, resumed_model, echo, repairs=1).run({})

    assert resumed.status == "completed", resumed.errors
    assert resumed_model.seen[0] == (1, rejection)
    assert echo.started == ["x"]
    node = json.loads(store.checkpoint("job") or "{}")["agent"]
    assert node["spent"]["repairs"] == 1


def test_a_resumed_execution_does_not_get_its_spent_repair_back() -> None:
    """After a resume the saved repair still counts: one more bad decision fails the run."""
    store, echo, signal = MemoryCheckpointStore(), Echo(), threading.Event()
    _durable(store, Model(_batch(_call("a", 1)), _cancel(signal)), echo, repairs=1).run(
        {}, context={"signal": signal}
    )
    resumed_model = Model(_batch(_call("a", 2)))

    run = _durable(store, resumed_model, echo, repairs=1).run({})

    assert run.status == "failed"
    assert len(resumed_model.seen) == 1
    limit = next(error for error in _chain(run) if isinstance(error, AgentLimitError))
    assert (limit.limit, limit.consumed) == ("max_repairs", 1)
    assert echo.started == []

"""Decisions are untrusted: every envelope and call is checked before anything runs."""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from typing import Any

import pytest

from tubeless._frozen import FrozenDict
from tubeless.agent import (
    AgentCall,
    ContinueDecision,
    FinishDecision,
    define_agent,
    define_tool,
    parse_decision,
)
from tubeless.errors import AgentError, SchemaIssues
from tubeless.schema import validator
from tubeless.testing import MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
INVALID = "TUBELESS_AGENT_INVALID_DECISION"


class Journal:
    """What validators and handlers did, in order, shared by every tool of one agent."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def tool(self, name: str) -> Any:
        def check(value: Any) -> Any:
            self.events.append(f"validate:{name}:{value}")
            if value == "bad":
                raise SchemaIssues(["Expected a good word"])
            return f"{value}!" if isinstance(value, str) else value

        def run(value: Any, context: Any) -> Any:
            self.events.append(f"run:{name}:{value}")
            return str(value)

        return define_tool(
            description=f"Tool {name}",
            input_schema=validator(check, json_schema={"type": "string"}),
            output_schema=TEXT,
            run=run,
        )

    def starting_with(self, prefix: str) -> list[str]:
        return [event for event in self.events if event.startswith(prefix)]


def _agent(decisions: list[Any], journal: Journal, **fields: Any) -> Any:
    fields.setdefault("limits", {"max_concurrency": 4})
    return define_agent(
        id="decisions",
        input_schema={"type": "object"},
        result_schema=fields.pop("result_schema", TEXT),
        initial_state=lambda options: {},
        decide=scripted_decide(decisions),
        tools={"alpha": journal.tool("alpha"), "beta": journal.tool("beta")},
        reduce=lambda state, outcomes: {"seen": [o["id"] for o in outcomes]},
        **fields,
    )


def _call(call_id: Any = "c1", tool: Any = "alpha", value: Any = "x") -> dict[str, Any]:
    return {"id": call_id, "tool": tool, "input": value}


def _cont(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "continue", "calls": list(calls)}


def _fail_first_turn(
    decision: Any, journal: Journal | None = None, sink: MemoryTraceSink | None = None
) -> tuple[Any, str]:
    """Run an agent whose first decision is `decision`; return the run and its error JSON."""
    journal = journal or Journal()
    sink = sink or MemoryTraceSink()
    run = _agent([decision], journal).run({}, context={"tracing": sink})
    assert run.status == "failed"
    assert run.finalized is False
    assert journal.starting_with("run:") == []
    tool_runs = [r for r in sink.records if "/tool/" in r["pipelineId"]]
    assert tool_runs == []
    return run, json.dumps([error.to_dict() for error in run.errors])


MALFORMED = [
    pytest.param(None, "plain dict, got NoneType", id="none"),
    pytest.param("finish", "plain dict, got str", id="string"),
    pytest.param(42, "plain dict, got int", id="number"),
    pytest.param([_call()], "plain dict, got list", id="list"),
    pytest.param(("kind", "finish"), "plain dict, got tuple", id="tuple"),
    pytest.param(
        collections.OrderedDict(kind="finish", result="x"), "plain dict", id="dict-subclass"
    ),
    pytest.param({"result": "x"}, "got kind None", id="missing-kind"),
    pytest.param({"kind": "stop", "result": "x"}, "got kind 'stop'", id="unknown-kind"),
    pytest.param({"kind": "finish"}, "requires a result key", id="finish-missing-result"),
    pytest.param(
        {"kind": "finish", "result": "x", "calls": [_call()]},
        "unexpected keys: 'calls'",
        id="finish-and-calls",
    ),
    pytest.param(
        {"kind": "finish", "result": "x", "reason": "done"},
        "unexpected keys: 'reason'",
        id="finish-extra-key",
    ),
    pytest.param({"kind": "continue"}, "non-empty calls list", id="continue-missing-calls"),
    pytest.param({"kind": "continue", "calls": []}, "non-empty calls list", id="empty-calls"),
    pytest.param({"kind": "continue", "calls": _call()}, "non-empty calls list", id="calls-dict"),
    pytest.param({"kind": "continue", "calls": "c1"}, "non-empty calls list", id="calls-str"),
    pytest.param(
        {"kind": "continue", "calls": [_call()], "result": "x"},
        "unexpected keys: 'result'",
        id="continue-extra-key",
    ),
    pytest.param(_cont("c1"), "call #1 must be a plain dict, got str", id="call-not-dict"),
    pytest.param(_cont(_call(), None), "call #2 must be a plain dict", id="call-none"),
    pytest.param(
        _cont({"id": "c1", "tool": "alpha"}), "'c1' requires the keys", id="missing-input"
    ),
    pytest.param(_cont({"id": "c1", "input": "x"}), "missing 'tool'", id="missing-tool"),
    pytest.param(_cont({"tool": "alpha", "input": "x"}), "missing 'id'", id="missing-id"),
    pytest.param(
        _cont({**_call(), "args": {}}), "'c1' has unexpected keys: 'args'", id="call-extra-key"
    ),
    pytest.param(_cont(_call(call_id="")), "non-blank string id", id="empty-id"),
    pytest.param(_cont(_call(call_id="  \t")), "non-blank string id", id="blank-id"),
    pytest.param(_cont(_call(call_id=7)), "non-blank string id", id="number-id"),
    pytest.param(_cont(_call(call_id="i" * 257)), "id is longer than 256 characters", id="long-id"),
    pytest.param(
        _cont(_call(), _call(tool="beta")), "Duplicate agent call id: 'c1'", id="duplicate-id"
    ),
    pytest.param(_cont(_call(tool="")), "'c1' requires a non-blank string tool", id="empty-tool"),
    pytest.param(_cont(_call(tool=3)), "'c1' requires a non-blank string tool", id="number-tool"),
    pytest.param(_cont(_call(tool=len)), "'c1' requires a non-blank string tool", id="code-tool"),
    pytest.param(_cont(_call(tool="gamma")), "Unknown agent tool: 'gamma'", id="unknown-tool"),
]


@pytest.mark.parametrize(("decision", "message"), MALFORMED)
def test_malformed_decisions_fail_the_turn_and_nothing_runs(decision: Any, message: str) -> None:
    """Each malformed decision fails with the decision code and a message naming the problem."""
    run, errors = _fail_first_turn(decision)

    assert INVALID in errors
    assert message in errors
    [error] = run.errors
    assert error.code == "TUBELESS_CHILD_FAILED"
    assert error.step_id == "agent"


@pytest.mark.parametrize(("decision", "message"), MALFORMED)
def test_parse_decision_raises_the_same_errors(decision: Any, message: str) -> None:
    """`parse_decision` checks shapes; only tool names need the registry."""
    if "Unknown agent tool" in message:
        assert isinstance(parse_decision(decision), ContinueDecision)
        return
    with pytest.raises(AgentError) as raised:
        parse_decision(decision)
    assert raised.value.code == INVALID
    assert message in str(raised.value)


def test_parse_decision_returns_typed_decisions() -> None:
    """Valid decisions parse into dataclasses; `None` input and result are values."""
    assert parse_decision({"kind": "finish", "result": None}) == FinishDecision(None)
    parsed = parse_decision(
        {"kind": "continue", "calls": ({"id": "a", "tool": "t", "input": None},)}
    )
    assert parsed == ContinueDecision((AgentCall("a", "t", None),))
    frozen = FrozenDict(kind="finish", result=FrozenDict(a=1))
    assert parse_decision(frozen) == FinishDecision({"a": 1})


def test_a_call_id_of_256_characters_is_accepted() -> None:
    """The id bound is inclusive."""
    journal = Journal()
    call_id = "i" * 256
    run = _agent([_cont(_call(call_id=call_id)), {"kind": "finish", "result": "ok"}], journal).run(
        {}
    )

    assert run.status == "completed"
    assert journal.starting_with("run:") == ["run:alpha:x!"]


def test_a_none_input_is_a_value() -> None:
    """`"input": None` reaches the validator as `None`; only a missing key is invalid."""
    journal = Journal()
    run = _agent([_cont(_call(value=None)), {"kind": "finish", "result": "ok"}], journal).run({})

    assert run.status == "completed"
    assert journal.events == ["validate:alpha:None", "run:alpha:None"]


def test_a_none_result_is_a_value_for_the_result_schema() -> None:
    """`{"kind": "finish", "result": None}` sends `None` to the result schema."""
    seen: list[Any] = []

    def answer(value: Any) -> Any:
        seen.append(value)
        return {"answer": value}

    journal = Journal()
    run = _agent(
        [{"kind": "finish", "result": None}],
        journal,
        result_schema=validator(answer, json_schema={"type": "null"}),
    ).run({})

    assert run.status == "completed"
    assert run.value == {"answer": None}
    assert seen == [None]


def test_the_same_call_id_may_recur_in_a_later_turn() -> None:
    """Call ids are unique within a turn only."""
    journal = Journal()
    run = _agent(
        [_cont(_call()), _cont(_call(value="y")), {"kind": "finish", "result": "ok"}], journal
    ).run({})

    assert run.status == "completed"
    assert journal.starting_with("run:") == ["run:alpha:x!", "run:alpha:y!"]


def test_unknown_tools_are_resolved_before_any_validator_runs() -> None:
    """An unknown name anywhere in the batch fails before the first validator is called."""
    journal = Journal()
    decision = _cont(_call("a"), _call("b", tool="beta"), _call("c", tool="nope"))

    _run, errors = _fail_first_turn(decision, journal)

    assert "Unknown agent tool: 'nope'" in errors
    assert journal.events == []


def test_one_bad_argument_fails_the_turn_and_no_handler_runs() -> None:
    """Inputs are validated in decision order; the bad one stops the turn before any handler."""
    journal = Journal()
    sink = MemoryTraceSink()
    decision = _cont(_call("a"), _call("b", tool="beta", value="bad"), _call("c"))

    run, errors = _fail_first_turn(decision, journal, sink)

    assert journal.events == ["validate:alpha:x", "validate:beta:bad"]
    assert "Agent tool beta input validation failed" in errors
    assert "Expected a good word" in errors
    assert run.errors[0].code == "TUBELESS_CHILD_FAILED"
    [failed] = [
        r
        for r in sink.records
        if r["name"] == "step.failed" and "stepId" in r and r["pipelineId"] == "decisions/turn"
    ]
    assert failed["stepId"] == "decide"
    # An input problem: the agent's argument code, not an output validation failure.
    assert failed["error"]["code"] == "TUBELESS_STEP_FAILED"
    assert failed["error"]["sourceCode"] == "TUBELESS_AGENT_INVALID_ARGUMENTS"
    assert failed["error"]["issues"] == [{"message": "Expected a good word"}]


def test_a_validator_that_raises_fails_the_turn_before_any_handler() -> None:
    """A validator crash is fatal in `decide`, before the batch starts."""

    def crash(value: Any) -> Any:
        raise RuntimeError("validator crashed")

    ran: list[Any] = []
    tool = define_tool(
        description="Crashy",
        input_schema=validator(crash, json_schema=TEXT),
        output_schema=TEXT,
        run=lambda value, context: ran.append(value),
    )
    run = define_agent(
        id="crash",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide([_cont(_call(tool="crashy"))]),
        tools={"crashy": tool},
    ).run({})

    assert run.status == "failed"
    assert ran == []
    assert "threw while validating" in json.dumps([e.to_dict() for e in run.errors])


def test_every_input_is_validated_once_before_any_handler_starts() -> None:
    """Validators run exactly once per call, all before the first handler, which gets the
    transformed value."""
    journal = Journal()
    decision = _cont(_call("a"), _call("b", tool="beta", value="y"), _call("c", value="z"))

    run = _agent([decision, {"kind": "finish", "result": "ok"}], journal).run({})

    assert run.status == "completed"
    validations = journal.starting_with("validate:")
    assert validations == ["validate:alpha:x", "validate:beta:y", "validate:alpha:z"]
    first_run = journal.events.index(journal.starting_with("run:")[0])
    assert first_run == len(validations)
    assert sorted(journal.starting_with("run:")) == ["run:alpha:x!", "run:alpha:z!", "run:beta:y!"]


def test_output_and_result_are_validated_once(recorder: Callable[[], Any]) -> None:
    """Each tool output and the final result pass their schema exactly once."""
    outputs = recorder()
    results = recorder()

    def output(value: Any) -> Any:
        outputs.add(value)
        return value.upper()

    def result(value: Any) -> Any:
        results.add(value)
        return {"answer": value}

    tool = define_tool(
        description="Echo",
        input_schema=TEXT,
        output_schema=validator(output, json_schema=TEXT),
        run=lambda value, context: value,
    )
    observed: list[Any] = []
    agent = define_agent(
        id="once",
        input_schema={"type": "object"},
        result_schema=validator(result, json_schema=TEXT),
        initial_state=lambda options: {},
        decide=scripted_decide(
            [
                _cont(_call(value="a"), _call("c2", value="b")),
                {
                    "kind": "finish",
                    "result": "done",
                },
            ]
        ),
        tools={"alpha": tool},
        reduce=lambda state, outcomes: observed.extend(outcomes) or {},
    )

    run = agent.run({})

    assert run.value == {"answer": "done"}
    assert sorted(outputs.items) == ["a", "b"]
    assert results.items == ["done"]
    assert [outcome["value"] for outcome in observed] == ["A", "B"]


def test_a_finish_result_rejected_by_the_result_schema_fails() -> None:
    """The raw result goes through the result schema; issues fail the run."""
    journal = Journal()
    run = _agent([{"kind": "finish", "result": 42}], journal).run({})

    assert run.status == "failed"
    errors = json.dumps([error.to_dict() for error in run.errors])
    assert "Agent finish result validation failed" in errors

"""`pipeline_tool`: definition rules, whole-batch preparation and how a child's failure ends."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import tubeless
from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.errors import AgentDefinitionError, ToolError
from tubeless.pipeline import create_steps, define_pipeline
from tubeless.testing import scripted_decide

TEXT = {"type": "string"}
WORDS = {
    "type": "object",
    "properties": {"word": {"type": "string"}},
    "required": ["word"],
    "additionalProperties": False,
}
FINISH = {"kind": "finish", "result": "done"}


class Log:
    """A thread-safe list of what ran."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[Any] = []

    def add(self, entry: Any) -> None:
        with self._lock:
            self.entries.append(entry)


def _shout(log: Log, fail: dict[str, ToolError] | None = None) -> Any:
    """An ordinary pipeline with options `{word}`: steps `upper` and `exclaim`."""

    def upper(inputs: Any, context: Any) -> str:
        log.add(("upper", context.options["word"]))
        error = (fail or {}).get("upper")
        if error is not None:
            raise error
        return str(context.options["word"]).upper()

    def exclaim(inputs: Any, context: Any) -> str:
        error = (fail or {}).get("exclaim")
        if error is not None:
            raise error
        return f"{inputs['upper']}!"

    steps = create_steps(WORDS)
    first = steps.step("upper", run=upper)
    second = steps.step("exclaim", run=exclaim, depends_on=[first])
    return define_pipeline(id="shout", steps=[first, second], finalize=second)


def _parent(tool: Any, decisions: list[Any], log: Log | None = None, **limits: Any) -> Any:
    def reduce(state: Any, outcomes: Any) -> Any:
        if log is not None:
            log.add(("outcomes", [dict(outcome) for outcome in outcomes]))
        return {"seen": [*state["seen"], *(dict(o) for o in outcomes)]}

    return define_agent(
        id="parent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {"seen": []},
        decide=scripted_decide(decisions),
        tools={"delegate": tool},
        reduce=reduce,
        limits=limits or None,
    )


def _call(call_id: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "tool": "delegate", "input": arguments}


def _continue(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "continue", "calls": list(calls)}


def test_pipeline_tool_is_exported_at_top_level() -> None:
    """`tubeless.pipeline_tool` is the agent package's function."""
    assert tubeless.pipeline_tool is pipeline_tool


def test_arguments_are_the_childs_options_and_the_value_its_result() -> None:
    """Without `input_schema` the model's arguments go to the child and its result comes back."""
    log = Log()
    tool = pipeline_tool(_shout(log), description="Shout a word")
    agent = _parent(tool, [_continue(_call("a", {"word": "hi"})), FINISH], log)

    run = agent.run({})

    assert run.status == "completed", run.errors
    outcomes = [entry for entry in log.entries if entry[0] == "outcomes"]
    assert outcomes == [("outcomes", [{"id": "a", "tool": "delegate", "ok": True, "value": "HI!"}])]
    assert tool.input_json_schema["properties"] == WORDS["properties"]


def test_mapping_runs_once_and_the_child_validates_the_mapped_options() -> None:
    """Arguments are validated, mapped once, then checked by the child's own schema."""
    log = Log()
    mapped: list[Any] = []

    def map_options(text: str) -> dict[str, str]:
        mapped.append(text)
        return {"word": text}

    tool = pipeline_tool(
        _shout(log),
        description="Shout",
        input_schema=TEXT,
        map_options=map_options,
    )
    agent = _parent(tool, [_continue(_call("a", "yo"), _call("b", "ho")), FINISH], log)

    assert agent.run({}).status == "completed"
    assert mapped == ["yo", "ho"]
    assert ("upper", "yo") in log.entries
    assert tool.input_json_schema == TEXT


def test_a_bad_argument_anywhere_fails_the_turn_before_any_child_starts() -> None:
    """The second call's mapped options fail the child's schema: the first child never runs."""
    log = Log()
    tool = pipeline_tool(
        _shout(log),
        description="Shout",
        input_schema=TEXT,
        map_options=lambda text: {"word": text} if text != "bad" else {"other": 1},
    )
    agent = _parent(tool, [_continue(_call("a", "ok"), _call("b", "bad")), FINISH], log)

    run = agent.run({})

    assert run.status == "failed"
    assert log.entries == []
    assert "Agent tool delegate pipeline shout options" in run.errors[0].message


def test_one_handler_tool_error_becomes_the_outcome() -> None:
    """A child failed by one handler `ToolError` gives that error's code and message."""
    log = Log()
    tool = pipeline_tool(_shout(log, {"upper": ToolError("NOPE", "No upper")}), description="Shout")
    agent = _parent(tool, [_continue(_call("a", {"word": "x"})), FINISH], log)

    assert agent.run({}).status == "completed"
    assert log.entries[-1] == (
        "outcomes",
        [
            {
                "id": "a",
                "tool": "delegate",
                "ok": False,
                "error": {"code": "NOPE", "message": "No upper"},
            }
        ],
    )


def test_tool_errors_entries_are_capped() -> None:
    """The aggregate keeps at most 32 `code: message` entries and 4096 characters."""
    from tubeless.agent._delegate import failure_outcome

    errors = [ToolError(f"E{i}", "m" * 200) for i in range(40)]
    outcome = failure_outcome(errors)

    assert outcome["code"] == "TUBELESS_TOOL_ERRORS"
    assert len(outcome["message"]) == 4096
    assert outcome["message"].startswith("E0: " + "m" * 200 + "; E1: ")
    short = failure_outcome(errors[:3])["message"]
    assert short == "; ".join(f"E{i}: " + "m" * 200 for i in range(3))
    assert failure_outcome(errors[:1]) == {"code": "E0", "message": "m" * 200}


def test_a_child_with_other_failures_is_fatal() -> None:
    """A plain exception in the child fails the parent's turn."""
    log = Log()
    tool = pipeline_tool(_shout(log, {"upper": ToolError("NOPE", "no")}), description="Shout")
    broken = pipeline_tool(_shout(log, {"upper": RuntimeError("boom")}), description="Shout")

    assert (
        _parent(tool, [_continue(_call("a", {"word": "x"})), FINISH]).run({}).status == "completed"
    )
    run = _parent(broken, [_continue(_call("a", {"word": "x"})), FINISH]).run({})

    assert run.status == "failed"
    assert "boom" in str(run.first_exception().__cause__)  # type: ignore[union-attr]


def test_a_tool_error_raised_by_a_childs_decide_is_fatal() -> None:
    """A subagent whose `decide` raises a `ToolError` fails the parent (not recoverable)."""

    def decide(state: Any, context: Any) -> Any:
        raise ToolError("DECIDE", "decide failed")

    child = define_agent(
        id="child",
        input_schema=WORDS,
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
    )
    tool = pipeline_tool(child, description="Child agent")

    run = _parent(tool, [_continue(_call("a", {"word": "x"})), FINISH]).run({})

    assert run.status == "failed"


def test_a_subagent_result_comes_back_as_the_value() -> None:
    """An agent registered with `pipeline_tool` is a subagent whose finish is the value."""
    log = Log()
    echo = define_tool(
        description="Echo",
        input_schema=TEXT,
        output_schema=TEXT,
        run=lambda text, context: text * 2,
    )
    child = define_agent(
        id="child",
        input_schema=WORDS,
        result_schema=TEXT,
        initial_state=lambda options: {"word": options["word"], "seen": []},
        decide=lambda state, context: (
            {"kind": "finish", "result": state["seen"][0]["value"]}
            if state["seen"]
            else _continue({"id": "e", "tool": "echo", "input": state["word"]})
        ),
        reduce=lambda state, outcomes: {**state, "seen": [dict(o) for o in outcomes]},
        tools={"echo": echo},
    )
    agent = _parent(
        pipeline_tool(child, description="Child"),
        [_continue(_call("a", {"word": "ab"})), FINISH],
        log,
    )

    assert agent.run({}).status == "completed"
    assert log.entries == [
        ("outcomes", [{"id": "a", "tool": "delegate", "ok": True, "value": "abab"}])
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pipeline": "nope"}, "pipeline_tool requires a Pipeline, got str"),
        ({"description": " "}, "Tool description must be a non-blank string"),
        ({"input_schema": TEXT}, "needs input_schema and map_options together"),
        ({"map_options": lambda a: a}, "needs input_schema and map_options together"),
        ({"input_schema": TEXT, "map_options": 3}, "map_options must be callable"),
        ({"replay": "maybe"}, "replay must be 'safe' or 'unsafe', got 'maybe'"),
    ],
)
def test_definition_errors_name_the_problem(kwargs: dict[str, Any], message: str) -> None:
    """Each mistake raises `TUBELESS_AGENT_INVALID_DEFINITION` saying what was wrong."""
    arguments: dict[str, Any] = {"pipeline": _shout(Log()), "description": "Shout", **kwargs}
    pipeline = arguments.pop("pipeline")

    with pytest.raises(AgentDefinitionError) as raised:
        pipeline_tool(pipeline, **arguments)

    assert message in str(raised.value)
    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


def test_a_child_without_an_options_descriptor_needs_an_explicit_one() -> None:
    """A child with no options schema needs `input_json_schema`."""
    step = create_steps().step("only", run=lambda inputs, context: 1)
    bare = define_pipeline(id="bare", steps=[step], finalize=step)

    with pytest.raises(AgentDefinitionError, match="requires an input descriptor"):
        pipeline_tool(bare, description="Bare")
    tool = pipeline_tool(bare, description="Bare", input_json_schema={"type": "object"})
    assert tool.input_json_schema == {"type": "object"}


@pytest.mark.parametrize("replay", ["safe", "unsafe"])
def test_replay_modes_are_accepted(replay: Any) -> None:
    """Both replay modes define a tool; `None` (the old "not said") is refused."""
    assert pipeline_tool(_shout(Log()), description="Shout", replay=replay).description == "Shout"
    with pytest.raises(AgentDefinitionError, match="replay must be"):
        pipeline_tool(_shout(Log()), description="Shout", replay=None)  # type: ignore[arg-type]


def test_each_transform_runs_once_per_call() -> None:
    """Arguments, mapping and the child's options schema each run once for each call."""
    from tubeless.schema import validator

    counts = {"arguments": 0, "mapping": 0, "options": 0}

    def arguments(value: Any) -> Any:
        counts["arguments"] += 1
        return value

    def options(value: Any) -> Any:
        counts["options"] += 1
        return {"word": value["word"]}

    def map_options(value: Any) -> Any:
        counts["mapping"] += 1
        return {"word": value}

    def upper(inputs: Any, context: Any) -> str:
        return str(context.options["word"]).upper()

    step = create_steps(validator(options, json_schema=WORDS)).step("upper", run=upper)
    child = define_pipeline(id="child", steps=[step], finalize=step)
    tool = pipeline_tool(
        child,
        description="Upper",
        input_schema=validator(arguments, json_schema=TEXT),
        map_options=map_options,
    )
    agent = _parent(tool, [_continue(_call("a", "x"), _call("b", "y")), FINISH])

    assert agent.run({}).status == "completed"
    assert counts == {"arguments": 2, "mapping": 2, "options": 2}


def _fan_out(handler: Any) -> Any:
    """A pipeline whose step runs `handler` for 3 items at once (a fan-out)."""
    steps = create_steps()
    item = steps.step("item", run=handler)
    per_item = define_pipeline(id="per-item", steps=[item], finalize=item)
    fan = create_steps({"type": "object"}).for_each_pipeline(
        "fan",
        pipeline=per_item,
        items=lambda inputs, context: [0, 1, 2],
        key=lambda value, index: f"item-{index}",
        map_options=lambda value, index, inputs, context: {"index": value},
        concurrency=3,
    )
    return define_pipeline(id="fan-out", steps=[fan], finalize=fan)


def _all_items_fail(make_error: Any) -> Any:
    barrier = threading.Barrier(3, timeout=30)

    def fail(inputs: Any, context: Any) -> None:
        barrier.wait()
        raise make_error(context.options["index"])

    return _fan_out(fail)


def test_several_handler_tool_errors_aggregate() -> None:
    """Three items failing with `ToolError`s give `TUBELESS_TOOL_ERRORS`, in item order."""
    log = Log()
    child = _all_items_fail(lambda index: ToolError(f"E{index}", f"item {index} failed"))
    tool = pipeline_tool(child, description="Fan out", input_json_schema={"type": "object"})

    run = _parent(tool, [_continue(_call("a", {})), FINISH], log).run({})

    assert run.status == "completed", run.errors
    assert log.entries[-1][1][0]["error"] == {
        "code": "TUBELESS_TOOL_ERRORS",
        "message": "E0: item 0 failed; E1: item 1 failed; E2: item 2 failed",
    }


def test_a_mixed_failure_among_tool_errors_is_fatal() -> None:
    """One item failing with a plain exception makes the whole child fatal."""
    child = _all_items_fail(
        lambda index: RuntimeError("broke") if index == 1 else ToolError("E", "expected")
    )
    tool = pipeline_tool(child, description="Fan out", input_json_schema={"type": "object"})

    run = _parent(tool, [_continue(_call("a", {})), FINISH]).run({})

    assert run.status == "failed"

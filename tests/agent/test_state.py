"""Agent state: copied and frozen plain data, owned by each invocation."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tubeless._frozen import FrozenDict, thaw
from tubeless.agent import define_agent, define_tool, own_state
from tubeless.agent._state import PLAIN_DEPTH_LIMIT
from tubeless.errors import AgentError
from tubeless.testing import scripted_decide

TEXT = {"type": "string"}
INVALID_STATE = "TUBELESS_AGENT_INVALID_STATE"


@dataclasses.dataclass
class _Point:
    x: int


def _cycle_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": {}}
    value["a"]["back"] = value
    return value


def _cycle_list() -> list[Any]:
    value: list[Any] = [1]
    value.append([value])
    return value


NOT_PLAIN = [
    pytest.param(math.nan, "nan is not a finite number", id="nan"),
    pytest.param({"a": [math.inf]}, "inf is not a finite number at ['a'][0]", id="inf"),
    pytest.param({"a": -math.inf}, "-inf is not a finite number", id="minus-inf"),
    pytest.param({"a": object()}, "object is not plain data at ['a']", id="instance"),
    pytest.param({"a": _Point(1)}, "_Point is not plain data", id="dataclass"),
    pytest.param({"when": datetime.date(2024, 1, 1)}, "date is not plain data", id="date"),
    pytest.param({"f": len}, "builtin_function_or_method is not plain data", id="builtin"),
    pytest.param({"f": lambda: 1}, "function is not plain data", id="function"),
    pytest.param({"s": {1, 2}}, "set is not plain data", id="set"),
    pytest.param({"s": frozenset()}, "frozenset is not plain data", id="frozenset"),
    pytest.param({"b": b"raw"}, "bytes is not plain data", id="bytes"),
    pytest.param({"b": bytearray(b"x")}, "bytearray is not plain data", id="bytearray"),
    pytest.param({1: "one"}, "key 1 is not a string", id="int-key"),
    pytest.param({"a": {None: 1}}, "key None is not a string at ['a']", id="none-key"),
    pytest.param({"a": {(1,): 1}}, "is not a string", id="tuple-key"),
    pytest.param(_cycle_dict(), "cycle at ['a']['back']", id="dict-cycle"),
    pytest.param(_cycle_list(), "cycle at [1][0]", id="list-cycle"),
    pytest.param({"n": complex(1, 2)}, "complex is not plain data", id="complex"),
]


@pytest.mark.parametrize(("value", "reason"), NOT_PLAIN)
def test_own_state_rejects_what_is_not_plain_data(value: Any, reason: str) -> None:
    """Non-finite numbers, instances, functions, sets, bytes, odd keys and cycles fail."""
    with pytest.raises(AgentError) as raised:
        own_state(value)

    assert raised.value.code == INVALID_STATE
    assert "finite primitives, lists and plain dicts" in str(raised.value)
    assert reason in str(raised.value)
    assert raised.value.__cause__ is not None


def test_own_state_copies_and_freezes_plain_data() -> None:
    """Dicts become read-only dicts, lists tuples; the copy equals the original by value."""
    original = {"name": "x", "items": [1, 2.5, {"deep": [True, None]}], "empty": {}}

    state = own_state(original)

    assert thaw(state) == original
    assert state == {"name": "x", "items": (1, 2.5, {"deep": (True, None)}), "empty": {}}
    assert state is not original
    assert isinstance(state, FrozenDict)
    assert isinstance(state, dict)
    assert state["items"] == (1, 2.5, {"deep": (True, None)})
    assert isinstance(state["items"][2], FrozenDict)
    assert json.loads(json.dumps(state)) == original


def test_frozen_state_refuses_every_mutation() -> None:
    """Every mutating dict method raises `TypeError`."""
    state = own_state({"a": 1, "nested": {"b": 2}})
    mutations: list[Callable[[], Any]] = [
        lambda: state.__setitem__("a", 2),
        lambda: state.__delitem__("a"),
        lambda: state.update(a=2),
        lambda: state.pop("a"),
        lambda: state.popitem(),
        lambda: state.clear(),
        lambda: state.setdefault("c", 3),
        lambda: state["nested"].__setitem__("b", 3),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()
    with pytest.raises(TypeError):
        state |= {"c": 1}
    assert state == {"a": 1, "nested": {"b": 2}}


def test_the_callers_object_is_never_frozen_or_shared() -> None:
    """Owning state copies: the caller can still change its object, and that does not leak."""
    original: dict[str, Any] = {"items": [1], "inner": {"a": 1}}

    state = own_state(original)
    original["items"].append(2)
    original["inner"]["a"] = 99
    original["new"] = True

    assert state == {"items": (1,), "inner": {"a": 1}}
    assert type(original) is dict
    assert type(original["items"]) is list


def test_a_repeated_non_cyclic_reference_is_allowed() -> None:
    """The same list twice in one value is copied twice, not mistaken for a cycle."""
    shared = [1, {"x": 2}]

    state = own_state({"a": shared, "b": shared, "c": [shared, shared]})

    assert state == {"a": (1, {"x": 2}), "b": (1, {"x": 2}), "c": ((1, {"x": 2}),) * 2}


@pytest.mark.parametrize(
    "value", [None, True, 0, -(2**80), 1.5, "text", "", [], {}, (1, "a"), [[[]]]]
)
def test_plain_values_are_accepted(value: Any) -> None:
    """Primitives, lists, tuples and dicts of them are plain data."""
    owned = own_state(value)

    assert thaw(owned) == thaw(value)
    expected = {list: tuple, tuple: tuple, dict: FrozenDict}.get(type(value), type(value))
    assert isinstance(owned, expected)


def test_already_frozen_state_is_reused() -> None:
    """Owning already-owned state again does not copy it."""
    state = own_state({"a": [1]})

    assert own_state(state) is state


@pytest.mark.parametrize(("value", "reason"), NOT_PLAIN[:6])
def test_invalid_initial_state_fails_the_agent_step(value: Any, reason: str) -> None:
    """`initial_state` returning non-plain data fails step `agent` before any decision."""
    decided: list[Any] = []
    run = define_agent(
        id="bad-initial",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: value,
        decide=lambda state, context: decided.append(state),
    ).run({})

    assert run.status == "failed"
    assert decided == []
    [error] = run.errors
    assert (error.code, error.step_id, error.source_code) == (
        "TUBELESS_STEP_FAILED",
        "agent",
        INVALID_STATE,
    )
    assert reason in error.message


def test_a_reducer_returning_non_plain_state_is_fatal() -> None:
    """The reducer's return is owned too; a set fails with the state code and no new decision."""
    decide = scripted_decide(
        [
            {"kind": "continue", "calls": [{"id": "a", "tool": "echo", "input": "x"}]},
            {"kind": "finish", "result": "never"},
        ]
    )
    tool = define_tool(
        description="Echo", input_schema=TEXT, output_schema=TEXT, run=lambda v, c: v
    )
    run = define_agent(
        id="bad-reduce",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools={"echo": tool},
        reduce=lambda state, outcomes: {"seen": {o["id"] for o in outcomes}},
    ).run({})

    assert run.status == "failed"
    assert [turn for turn, _ in decide.seen] == [1]
    assert INVALID_STATE in json.dumps([e.to_dict() for e in run.errors])


def _counting_agent(decide: Any, **fields: Any) -> Any:
    tool = define_tool(
        description="Echo", input_schema=TEXT, output_schema=TEXT, run=lambda v, c: v
    )
    return define_agent(
        id="counting",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=fields.pop("initial_state", lambda options: {"log": []}),
        decide=decide,
        tools={"echo": tool},
        **fields,
    )


def _echo(call_id: str, value: str = "x") -> dict[str, Any]:
    return {"kind": "continue", "calls": [{"id": call_id, "tool": "echo", "input": value}]}


def test_turn_starts_at_one_and_state_version_at_zero() -> None:
    """`context.turn` is 1-based, `context.state_version` 0-based, and version == turn - 1."""
    seen: list[tuple[int, int]] = []

    def decide(state: Any, context: Any) -> Any:
        seen.append((context.turn, context.state_version))
        if context.turn == 4:
            return {"kind": "finish", "result": "done"}
        return _echo(f"c{context.turn}")

    run = _counting_agent(
        decide, reduce=lambda state, outcomes: {"log": [*state["log"], outcomes[0]["value"]]}
    ).run({})

    assert run.status == "completed"
    assert seen == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert all(version == turn - 1 for turn, version in seen)


def test_without_a_reducer_state_is_kept_and_the_version_still_advances() -> None:
    """Omitting `reduce` keeps the state unchanged; outcomes are dropped, versions advance."""
    decide = scripted_decide([_echo("a"), _echo("b"), {"kind": "finish", "result": "done"}])
    versions: list[int] = []

    def watch(state: Any, context: Any) -> Any:
        versions.append(context.state_version)
        return decide(state, context)

    run = _counting_agent(watch, initial_state=lambda options: {"fixed": [1]}).run({})

    assert run.status == "completed"
    assert versions == [0, 1, 2]
    assert [state for _, state in decide.seen] == [{"fixed": (1,)}] * 3


def test_decide_and_reduce_see_frozen_copies() -> None:
    """The state passed to callbacks is read-only; the reducer's own dict is copied."""
    returned: list[dict[str, Any]] = []

    def reduce(state: Any, outcomes: Any) -> Any:
        with pytest.raises(TypeError):
            state["log"] = ()
        with pytest.raises(TypeError):
            outcomes[0]["ok"] = False
        following = {"log": [*state["log"], outcomes[0]["value"]]}
        returned.append(following)
        return following

    def decide(state: Any, context: Any) -> Any:
        assert isinstance(state, FrozenDict)
        if state["log"]:
            returned[0]["log"].append("mutated later")
            return {"kind": "finish", "result": ",".join(state["log"])}
        return _echo("a", "first")

    run = _counting_agent(decide, reduce=reduce).run({})

    assert run.status == "completed"
    assert run.value == "first"


def test_the_initial_state_object_stays_the_callers() -> None:
    """`initial_state` may return a shared object; the agent copies it and never freezes it."""
    shared: dict[str, Any] = {"log": []}
    seen: list[Any] = []

    def decide(state: Any, context: Any) -> Any:
        seen.append(state)
        shared["log"].append("caller change")
        return {"kind": "finish", "result": "ok"}

    run = _counting_agent(decide, initial_state=lambda options: shared).run({})

    assert run.status == "completed"
    assert seen == [{"log": ()}]
    assert shared == {"log": ["caller change"]}


def test_concurrent_invocations_are_isolated() -> None:
    """Two runs of one agent in parallel keep their own state, turn and call counters."""
    both_deciding = threading.Barrier(2, timeout=30)
    initialised: list[str] = []
    lock = threading.Lock()

    def initial_state(options: Any) -> Any:
        with lock:
            initialised.append(options["name"])
        return {"name": options["name"], "log": []}

    def decide(state: Any, context: Any) -> Any:
        if context.turn == 1:
            both_deciding.wait()
        if context.turn <= 2:
            return _echo(f"call-{context.turn}", f"{state['name']}-{context.turn}")
        return {"kind": "finish", "result": "|".join(state["log"])}

    agent = _counting_agent(
        decide,
        initial_state=initial_state,
        reduce=lambda state, outcomes: {
            "name": state["name"],
            "log": [*state["log"], outcomes[0]["value"]],
        },
        limits={"max_turns": 3, "max_calls": 2, "max_decisions": 3},
    )
    results: dict[str, Any] = {}

    def invoke(name: str) -> None:
        results[name] = agent.run({"name": name})

    threads = [threading.Thread(target=invoke, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(initialised) == ["left", "right"]
    assert results["left"].value == "left-1|left-2"
    assert results["right"].value == "right-1|right-2"


def _keeping_outcomes_agent(output_schema: Any, produced: list[Any], decide: Any) -> Any:
    def run(value: Any, context: Any) -> Any:
        made = [value, {"nested": [value]}]
        produced.append(made)
        return made

    tool = define_tool(
        description="Make a list",
        input_schema=TEXT,
        output_schema=output_schema,
        run=run,
    )
    return define_agent(
        id="keeping",
        input_schema={"type": "object"},
        result_schema={},
        initial_state=lambda options: {"seen": []},
        decide=decide,
        tools={"make": tool},
        reduce=lambda state, outcomes: {"seen": [*state["seen"], *outcomes]},
    )


def test_outcomes_kept_in_state_are_copied_and_frozen() -> None:
    """A reducer that keeps whole outcomes commits a frozen copy of their values too."""
    produced: list[Any] = []
    seen: list[Any] = []

    def decide(state: Any, context: Any) -> Any:
        if context.turn == 1:
            return {"kind": "continue", "calls": [{"id": "a", "tool": "make", "input": "x"}]}
        produced[0].append("changed by the tool afterwards")
        produced[0][1]["nested"].append("and deeper")
        seen.append(state)
        return {"kind": "finish", "result": json.loads(json.dumps(state))}

    run = _keeping_outcomes_agent({"type": "array"}, produced, decide).run({})

    assert run.status == "completed"
    [state] = seen
    value = state["seen"][0]["value"]
    assert value == ("x", {"nested": ("x",)})
    assert isinstance(value[1], FrozenDict)
    assert run.value == {
        "seen": [{"id": "a", "tool": "make", "ok": True, "value": ["x", {"nested": ["x"]}]}]
    }


def test_non_plain_outcome_values_cannot_enter_state() -> None:
    """A validated output that is not plain data fails the commit with the state code."""
    produced: list[Any] = []

    class AsSet:
        def validate(self, value: Any) -> Any:
            return {"items": {value[0]}}

        def json_schema(self) -> dict[str, Any]:
            return {"type": "array"}

    decide = scripted_decide(
        [
            {"kind": "continue", "calls": [{"id": "a", "tool": "make", "input": "x"}]},
            {"kind": "finish", "result": "never"},
        ]
    )

    run = _keeping_outcomes_agent(AsSet(), produced, decide).run({})

    assert run.status == "failed"
    assert [turn for turn, _ in decide.seen] == [1]
    errors = json.dumps([error.to_dict() for error in run.errors])
    assert INVALID_STATE in errors
    assert "set is not plain data at ['seen'][0]['value']['items']" in errors


def test_state_nested_too_deeply_is_invalid_state() -> None:
    """Nesting past the interpreter's recursion limit is an invalid state, not a crash."""
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]

    with pytest.raises(AgentError, match="nested too deeply") as raised:
        own_state(value)

    assert raised.value.code == INVALID_STATE


def test_owned_parts_of_a_previous_state_are_reused_not_walked() -> None:
    """A commit that keeps the previous state's parts reuses them without a copy or a walk."""
    previous = own_state({"observations": [{"n": i} for i in range(1000)], "turn": 1})
    grown = {"observations": (*previous["observations"], {"n": 1000}), "turn": 2}

    state = own_state(grown)

    assert all(
        new is old
        for new, old in zip(state["observations"], previous["observations"], strict=False)
    )
    assert own_state(state) is state
    assert own_state(previous["observations"]) is previous["observations"]


def test_outcomes_are_not_trusted_as_owned_state() -> None:
    """A read-only mapping the harness did not own (an outcome) is still checked and copied."""
    outcome = FrozenDict(id="c", tool="t", ok=True, value=[1, 2])

    state = own_state({"kept": outcome})

    assert state["kept"] is not outcome
    assert state["kept"]["value"] == (1, 2)


def test_an_owned_head_with_a_new_tail_freezes_only_the_tail() -> None:
    """Owned entries followed by new ones: the head is kept by identity, the tail frozen."""
    previous = own_state([{"n": i} for i in range(10)])
    tail = [{"n": [10]}, None, {"n": 11}]

    state = own_state([*previous, *tail])

    assert all(new is old for new, old in zip(state, previous, strict=False))
    assert state[10:] == ({"n": (10,)}, None, {"n": 11})
    assert isinstance(state[10], FrozenDict) and tail[0] == {"n": [10]}


@pytest.mark.parametrize("bad", [float("nan"), {1, 2}, b"x", object()])
def test_a_bad_entry_among_owned_ones_is_still_rejected(bad: Any) -> None:
    """A non-plain entry between owned entries fails the commit wherever it sits."""
    previous = own_state([{"n": i} for i in range(5)])

    for value in ([*previous[:2], bad, *previous[2:]], [bad, *previous], [*previous, bad]):
        with pytest.raises(AgentError) as raised:
            own_state({"observations": value})
        assert raised.value.code == INVALID_STATE


def test_a_plain_entry_among_owned_ones_is_frozen() -> None:
    """A mutable entry in the middle of owned ones is copied, never kept as it is."""
    previous = own_state([{"n": i} for i in range(5)])
    middle = {"n": [1]}

    state = own_state([*previous[:2], middle, *previous[2:]])

    assert state[2] == {"n": (1,)} and state[2] is not middle
    assert isinstance(state[2], FrozenDict)
    assert state[3] is previous[2]


def test_a_sequence_that_starts_with_the_previous_entries_keeps_them_by_identity() -> None:
    """Given the previous state, its entries at the head of a grown sequence are reused."""
    previous = own_state({"observations": [{"n": i} for i in range(5)], "turn": 1})
    tail = [{"n": [5]}, FrozenDict(n=6)]

    state = own_state(
        {"observations": [*previous["observations"], *tail], "turn": 2}, previous=previous
    )

    assert all(
        new is old
        for new, old in zip(state["observations"], previous["observations"], strict=False)
    )
    assert state["observations"][5:] == ({"n": (5,)}, {"n": 6})
    assert state["observations"][6] is not tail[1]
    assert tail[0] == {"n": [5]}


@pytest.mark.parametrize("bad", [float("nan"), {1, 2}, object()])
def test_a_bad_entry_after_the_previous_entries_is_rejected(bad: Any) -> None:
    """Entries after the reused head are checked as any other state."""
    previous = own_state({"observations": [{"n": i} for i in range(5)]})
    grown = {"observations": [*previous["observations"], bad]}

    with pytest.raises(AgentError) as raised:
        own_state(grown, previous=previous)

    assert raised.value.code == INVALID_STATE


def test_an_equal_entry_that_is_another_object_is_not_taken_for_the_previous_one() -> None:
    """Only the same objects are reused: an equal value of another type keeps its own type."""
    previous = own_state({"flags": [1, 2.0, {"a": 1}]})
    mapping = {"a": True}

    state = own_state({"flags": [True, 2, mapping, 3]}, previous=previous)

    assert [type(flag) for flag in state["flags"][:2]] == [bool, int]
    assert state["flags"][2] == {"a": True} and state["flags"][2] is not previous["flags"][2]
    assert type(state["flags"][2]["a"]) is bool
    with pytest.raises(AgentError):
        own_state({"flags": [*previous["flags"][:1], {1, 2}, 3.0]}, previous=previous)


def test_a_shorter_or_changed_sequence_is_checked_in_full() -> None:
    """A sequence that does not start with all the previous entries is walked as usual."""
    previous = own_state({"observations": [{"n": i} for i in range(5)]})
    entries = previous["observations"]

    shorter = own_state({"observations": list(entries[:3])}, previous=previous)
    changed = own_state({"observations": [{"n": 0}, *entries[1:]]}, previous=previous)

    assert shorter["observations"] == entries[:3]
    assert changed["observations"] == entries
    assert changed["observations"][0] is not entries[0]
    assert changed["observations"][1] is entries[1]


def test_the_previous_state_is_followed_into_nested_mappings() -> None:
    """A grown list inside nested mappings is matched against the list at the same path."""
    previous = own_state({"memory": {"log": [{"n": 0}, {"n": 1}], "other": [1]}})
    log = previous["memory"]["log"]

    state = own_state({"memory": {"log": [*log, {"n": [2]}], "other": [*log]}}, previous=previous)

    assert state["memory"]["log"][0] is log[0] and state["memory"]["log"][1] is log[1]
    assert state["memory"]["log"][2] == {"n": (2,)}
    assert state["memory"]["other"] == log and state["memory"]["other"][0] is log[0]


def test_owned_plus_entries_freezes_the_new_entries_and_the_commit_keeps_the_sum() -> None:
    """`state[...] + entries` checks and freezes the entries added; a commit takes it as is."""
    previous = own_state({"log": [{"n": 0}, {"n": 1}]})
    tail = [{"n": [2]}]

    grown = previous["log"] + tail
    state = own_state({"log": grown})

    assert grown == ({"n": 0}, {"n": 1}, {"n": (2,)}) and tail == [{"n": [2]}]
    assert state["log"] is grown
    assert grown[0] is previous["log"][0] and grown[1] is previous["log"][1]
    assert isinstance(grown[2], FrozenDict) and grown[2] is not tail[0]
    assert json.loads(json.dumps(state)) == {"log": [{"n": 0}, {"n": 1}, {"n": [2]}]}
    assert own_state({"log": previous["log"] + ()})["log"] == previous["log"]
    with pytest.raises(TypeError):
        previous["log"] + 1  # only sequences are added, as to any tuple


@pytest.mark.parametrize("bad", [math.nan, {1, 2}, object()])
def test_owned_plus_entries_that_are_not_plain_fail_at_the_commit(bad: Any) -> None:
    """Entries that are not plain data make a plain tuple; the commit names where they are."""
    previous = own_state({"log": [{"n": 0}, {"n": 1}]})

    grown = previous["log"] + [{"x": [bad]}]

    assert grown[2] == {"x": [bad]} or bad != bad  # kept as given (nan is not equal to itself)
    with pytest.raises(AgentError, match=r"at \['log'\]\[2\]\['x'\]\[0\]") as raised:
        own_state({"log": grown})
    assert raised.value.code == INVALID_STATE


def _nested(levels: int) -> Any:
    """Owned data `levels` containers deep: {"d": {"d": ... {"d": 1}}}."""
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return own_state(value)


def test_owned_parts_reused_deeper_still_keep_the_depth_limit() -> None:
    """Reused owned parts count their own depth where they land, without a walk."""
    deepest = _nested(PLAIN_DEPTH_LIMIT)
    assert own_state(deepest) is deepest

    added = [deepest]
    for deeper in ({"wrap": deepest}, [deepest], {"log": own_state([]) + added}):
        with pytest.raises(AgentError, match="nested too deeply") as raised:
            own_state(deeper)
        assert raised.value.code == INVALID_STATE
    # The same message, naming the same place, as the equal value never owned gives.
    fresh: Any = 1
    for _ in range(PLAIN_DEPTH_LIMIT):
        fresh = {"d": fresh}
    messages = []
    for value in (deepest, fresh):
        with pytest.raises(AgentError) as raised:
            own_state({"wrap": value})
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "['d']…(56 more)…['d']" in messages[0]


def test_an_owned_part_added_after_the_previous_entries_is_named_where_it_stands() -> None:
    """Past the reused head, a part too deep for its place is named by its own index."""
    previous = own_state({"log": [1, 2, 3]})
    deepest = _nested(PLAIN_DEPTH_LIMIT - 1)
    fresh = json.loads(json.dumps(deepest))  # the same value, never owned

    messages = []
    for added in (deepest, fresh):
        with pytest.raises(AgentError) as raised:
            own_state({"log": [*previous["log"], added]}, previous=previous)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "at ['log'][3]['d']" in messages[0]
    assert own_state({"wrap": _nested(PLAIN_DEPTH_LIMIT - 1)})["wrap"]["d"]


def test_a_reducer_that_nests_the_previous_state_stops_at_the_depth_limit() -> None:
    """State that wraps the previous state every turn is refused once too deep, not crashed."""
    state = own_state({"turn": 0})
    with pytest.raises(AgentError, match="nested too deeply") as raised:
        for turn in range(1, 2 * PLAIN_DEPTH_LIMIT):
            state = own_state({"turn": turn, "before": state}, previous=state)
    assert raised.value.code == INVALID_STATE
    assert state["turn"] == PLAIN_DEPTH_LIMIT - 1
    assert json.loads(json.dumps(state))["turn"] == PLAIN_DEPTH_LIMIT - 1


def test_a_decision_may_list_its_calls_as_owned_plus_entries() -> None:
    """Calls built as `state[...] + [call]` are a sequence like any other."""
    call = {"id": "c1", "tool": "echo", "input": {"x": 1}}
    echo = define_tool(
        description="echo",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        run=lambda value, context: value,
    )

    def decide(state: Any, context: Any) -> Any:
        if context.turn == 1:
            return {"kind": "continue", "calls": state["queued"] + [call]}
        return {"kind": "finish", "result": {"turns": context.turn}}

    agent = define_agent(
        id="grown-calls",
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {"queued": []},
        decide=decide,
        tools={"echo": echo},
        limits={"max_turns": 3, "max_decisions": 3, "max_calls": 1},
    )

    run = agent.run({})

    assert run.status == "completed" and run.value == {"turns": 2}

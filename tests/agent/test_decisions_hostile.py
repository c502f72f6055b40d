"""Hostile decisions: whatever `decide` returns, the run fails cleanly before any handler.

Property tests generate malformed decisions (shapes, ids, names, kinds, nesting, values
that are not plain data, over-budget batches) and run a real agent traced to a real NDJSON
file. Each run must fail with a `TUBELESS_AGENT_*` code in its cause chain, start no
handler, raise nothing out of `run()`, and leave a trace that reads back.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tubeless import define_agent, define_tool
from tubeless.errors import Diagnostic, ErrorCause
from tubeless.pipeline import PipelineRun
from tubeless.trace import NdjsonTraceSink, read_ndjson

TOOLS = ("echo", "shout")
MAX_CALLS = 3
FAST = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
THOROUGH = settings(FAST, max_examples=600)


class _Harness:
    """One agent with permissive tools whose handlers count their starts.

    With `repairs`, every rejection `decide` is sent back is kept in `rejections`.
    """

    def __init__(self, repairs: int = 0) -> None:
        self.decision: Any = None
        self.starts = 0
        self.rejections: list[Any] = []
        self._lock = threading.Lock()
        tools = {name: self._tool(name) for name in TOOLS}
        self.agent = define_agent(
            id="hostile",
            input_schema={},
            result_schema={},
            initial_state=lambda options: {},
            decide=self._decide,
            tools=tools,
            limits={"max_calls": MAX_CALLS, "max_concurrency": 2, "max_repairs": repairs},
        )

    def _decide(self, state: Any, context: Any) -> Any:
        if context.rejection is not None:
            self.rejections.append(context.rejection)
        return self.decision

    def _tool(self, name: str) -> Any:
        def run(value: Any, context: Any) -> Any:
            with self._lock:
                self.starts += 1
            return value

        # `{}` accepts anything: only the plain-data check stands between model and handler.
        return define_tool(description=f"Tool {name}", input_schema={}, output_schema={}, run=run)

    def run(self, decision: Any, path: Path) -> PipelineRun:
        self.decision = decision
        with NdjsonTraceSink(path) as sink:
            return self.agent.run({}, context={"tracing": sink})


HARNESS = _Harness()
REPAIRS = 2
REPAIRING = _Harness(repairs=REPAIRS)


def _chain_codes(error: Diagnostic) -> list[str]:
    codes = [error.code, *([error.source_code] if error.source_code else [])]
    cause: ErrorCause | None = error.cause
    while cause is not None:
        if cause.source_code:
            codes.append(cause.source_code)
        cause = cause.cause
    return codes


def _record_codes(cause: dict[str, Any] | None) -> list[str]:
    codes = []
    while cause is not None:
        if "sourceCode" in cause:
            codes.append(cause["sourceCode"])
        cause = cause.get("cause")
    return codes


def assert_refused(decision: Any, harness: _Harness = HARNESS) -> PipelineRun:
    """Run `decision`; assert the run failed with an agent code, untouched handlers, a trace."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace.ndjson"
        starts = harness.starts
        run = harness.run(decision, path)
        records = read_ndjson(path)
    assert run.status == "failed"
    assert harness.starts == starts
    codes = [code for error in run.errors for code in _chain_codes(error)]
    assert any(code.startswith("TUBELESS_AGENT_") for code in codes), codes
    assert records[-1]["name"] == "pipeline.completed"
    assert records[-1]["payload"]["status"] == "failed"
    traced = [
        code
        for record in records
        if "error" in record
        for code in [
            record["error"].get("sourceCode", ""),
            *_record_codes(record["error"].get("cause")),
        ]
    ]
    assert any(code.startswith("TUBELESS_AGENT_") for code in traced)
    assert all(len(json.dumps(error.to_dict())) < 20_000 for error in run.errors)
    return run


# ---------------------------------------------------------------------------------------
# Values that are not plain data, and hostile objects


@dataclasses.dataclass
class _Point:
    x: int


class _RaisingEq:
    """Compares by raising, as a hostile object might."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared")

    __hash__ = object.__hash__


class _CollidingKey:
    """A key hashing like `kind` that, once armed, raises when compared."""

    def __init__(self) -> None:
        self.armed = False

    def __eq__(self, other: object) -> bool:
        if self.armed:
            raise RuntimeError("compared")
        return self is other

    def __hash__(self) -> int:
        return hash("kind")


class _LyingStr(str):
    """A `str` subclass that claims to equal anything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def _nested(depth: int, mapping: bool) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value} if mapping else [value]
    return value


def _cycle() -> Any:
    value: dict[str, Any] = {"a": [1]}
    value["a"].append(value)
    return value


NON_PLAIN: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.builds(set, st.lists(st.integers(), max_size=3)),
    st.builds(frozenset, st.lists(st.integers(), max_size=3)),
    st.binary(max_size=8),
    st.builds(bytearray, st.binary(max_size=8)),
    st.builds(object),
    st.just(len),
    st.just(lambda: 1),
    st.builds(_Point, st.integers()),
    st.just(datetime.date(2024, 1, 1)),
    st.builds(complex, st.integers(), st.integers()),
    st.builds(_cycle),
    st.builds(lambda key: {key: 1}, st.one_of(st.integers(), st.none(), st.tuples(st.integers()))),
    st.builds(_LyingStr, st.text(max_size=5)),
    st.builds(_nested, st.sampled_from([65, 200, 10_000]), st.booleans()),
)
"""Values a permissive schema would pass to a handler, but plain data excludes."""

HUGE_TEXT = st.builds(
    lambda size, text: "A" * size + text,
    st.sampled_from([65, 257, 5_000, 2_000_000]),
    st.text(max_size=20),
)
ODD_TEXT = st.one_of(st.text(max_size=40), HUGE_TEXT)

PLAIN_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False)
)
PLAIN = st.recursive(
    st.one_of(PLAIN_LEAF, st.text(max_size=10)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _call(call_id: str, tool: str = "echo", value: Any = "x") -> dict[str, Any]:
    return {"id": call_id, "tool": tool, "input": value}


VALID_CALLS = st.lists(
    st.builds(
        _call, st.text(min_size=1, max_size=8).filter(str.strip), st.sampled_from(TOOLS), PLAIN
    ),
    max_size=2,
    unique_by=lambda call: call["id"],
)


# ---------------------------------------------------------------------------------------
# Malformed decisions, each with at least one defect


def _dict_subclass(value: dict[str, Any]) -> Any:
    """A dict subclass: not a plain dict, whatever it holds."""

    class Subclass(dict[str, Any]):
        pass

    return Subclass(value)


NOT_A_DICT = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=10),
    st.lists(PLAIN, max_size=3),
    st.builds(tuple, st.lists(st.integers(), max_size=3)),
    st.builds(_dict_subclass, st.just({"kind": "finish", "result": 1})),
    NON_PLAIN,
)


BAD_KIND = st.one_of(
    ODD_TEXT.filter(lambda kind: kind not in ("finish", "continue")),
    st.integers(),
    st.none(),
    st.builds(_nested, st.sampled_from([1, 5_000]), st.booleans()),
    st.builds(_RaisingEq),
    st.builds(_LyingStr, st.sampled_from(["finish", "continue", "other"])),
)

EXTRA_KEY = st.one_of(
    ODD_TEXT.filter(lambda key: key not in ("kind", "result", "calls")),
    st.integers(),
    st.builds(_RaisingEq),
)


def _with_extra(decision: dict[Any, Any], key: Any) -> dict[Any, Any]:
    decision[key] = "extra"
    return decision


BAD_ENVELOPE = st.one_of(
    NOT_A_DICT,
    st.builds(lambda kind, result: {"kind": kind, "result": result}, BAD_KIND, PLAIN),
    st.just({"kind": "finish"}),
    st.builds(lambda key: _with_extra({"kind": "finish", "result": 1}, key), EXTRA_KEY),
    st.builds(lambda result: {"kind": "finish", "result": result}, NON_PLAIN),
    st.builds(
        lambda calls: {"kind": "continue", "calls": calls},
        st.one_of(st.none(), st.just([]), st.text(max_size=5), st.builds(dict), NON_PLAIN),
    ),
    st.builds(lambda key: _with_extra({"kind": "continue", "calls": [_call("a")]}, key), EXTRA_KEY),
)

BAD_CALL = st.one_of(
    NOT_A_DICT,
    st.builds(lambda: {"id": "b", "tool": "echo"}),
    st.builds(lambda: {"tool": "echo", "input": 1}),
    st.builds(
        lambda key: _with_extra(_call("b"), key),
        EXTRA_KEY.filter(lambda k: type(k) is not str or k not in ("id", "tool", "input")),
    ),
    st.builds(
        lambda call_id: _call(call_id),
        st.one_of(
            st.sampled_from(["", " \t", "half\ud800"]),
            HUGE_TEXT.filter(lambda t: len(t) > 256),
            st.integers(),
            st.none(),
            NON_PLAIN,
        ),
    ),
    st.builds(
        lambda tool: _call("b", tool),
        st.one_of(ODD_TEXT.filter(lambda t: t not in TOOLS), st.integers(), st.none(), NON_PLAIN),
    ),
    st.builds(lambda value: _call("b", "echo", value), NON_PLAIN),
    st.builds(lambda value: _call("b", "shout", {"nested": [value]}), NON_PLAIN),
)


def _insert(calls: list[dict[str, Any]], bad: Any, position: int) -> dict[str, Any]:
    calls = [call for call in calls if call.get("id") != "b"]
    calls.insert(min(position, len(calls)), bad)
    return {"kind": "continue", "calls": calls}


def _duplicated(calls: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return {"kind": "continue", "calls": [*calls, _call(call_id), _call(call_id, "shout")]}


def _over_budget(size: int) -> dict[str, Any]:
    return {"kind": "continue", "calls": [_call(f"c{index}") for index in range(size)]}


MALFORMED = st.one_of(
    BAD_ENVELOPE,
    st.builds(_insert, VALID_CALLS, BAD_CALL, st.integers(0, 3)),
    st.builds(_duplicated, VALID_CALLS, ODD_TEXT.filter(lambda t: t.strip() and len(t) <= 256)),
    st.builds(_over_budget, st.integers(MAX_CALLS + 1, 40)),
)


def _refuses_malformed(decision: Any) -> None:
    assert_refused(decision)


def _repairs_then_refuses(decision: Any) -> None:
    """Sent back `REPAIRS` times (or refused at once for a limit), then refused; each
    rejection bounded, escaped JSON data."""
    REPAIRING.rejections.clear()
    run = assert_refused(decision, REPAIRING)
    rejections = REPAIRING.rejections
    limited = "max_calls" in json.dumps([error.to_dict() for error in run.errors])
    assert len(rejections) == (0 if limited else REPAIRS)
    for attempt, rejection in enumerate(rejections, 1):
        assert rejection["attempt"] == attempt
        assert rejection["code"].startswith("TUBELESS_AGENT_INVALID_")
        assert 1 <= len(rejection["issues"]) <= 32
        text = json.dumps(rejection, ensure_ascii=False)
        assert len(text) < 60_000
        strings = [rejection["message"], *(v for i in rejection["issues"] for v in i.values())]
        assert all(v is None or (isinstance(v, str) and v.isprintable()) for v in strings)


@FAST
@given(MALFORMED)
def test_malformed_decisions_are_refused_before_any_handler(decision: Any) -> None:
    """A random malformed decision fails the run with an agent code; no handler starts."""
    _refuses_malformed(decision)


@pytest.mark.slow
@THOROUGH
@given(MALFORMED)
def test_many_malformed_decisions_are_refused_before_any_handler(decision: Any) -> None:
    """The same property over many more examples."""
    _refuses_malformed(decision)


@FAST
@given(MALFORMED)
def test_malformed_decisions_go_back_for_repair_and_never_start_a_handler(decision: Any) -> None:
    """With repairs, a random malformed decision is sent back, then refused; nothing starts."""
    _repairs_then_refuses(decision)


@pytest.mark.slow
@THOROUGH
@given(MALFORMED)
def test_many_malformed_decisions_go_back_for_repair_and_never_start_a_handler(
    decision: Any,
) -> None:
    """The same repair property over many more examples."""
    _repairs_then_refuses(decision)


# ---------------------------------------------------------------------------------------
# Targeted cases of the issue


def _errors_text(run: PipelineRun) -> str:
    return json.dumps([error.to_dict() for error in run.errors], ensure_ascii=False)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(math.nan, "nan is not a finite number at the root", id="nan"),
        pytest.param({"a": [math.inf]}, "inf is not a finite number at ['a'][0]", id="inf"),
        pytest.param({1, 2}, "set is not plain data", id="set"),
        pytest.param(b"raw", "bytes is not plain data", id="bytes"),
        pytest.param(_cycle(), "cycle at ['a'][1]", id="cycle"),
        pytest.param(object(), "object is not plain data", id="object"),
        pytest.param(len, "builtin_function_or_method is not plain data", id="function"),
        pytest.param({2: "two"}, "key 2 is not a string", id="int-key"),
        pytest.param(_nested(10_000, True), "nested too deeply (more than 64 levels)", id="deep"),
    ],
)
def test_call_inputs_must_be_plain_data(value: Any, reason: str) -> None:
    """A call input that is not plain data is an invalid argument naming where and why."""
    run = assert_refused({"kind": "continue", "calls": [_call("c1", "echo", value)]})

    assert "TUBELESS_AGENT_INVALID_ARGUMENTS" in _errors_text(run)
    assert f"Agent call 'c1' input must be plain JSON data: {reason}" in _errors_text(run)


@pytest.mark.parametrize(
    "value", [math.nan, {1, 2}, b"raw", _cycle(), _nested(10_000, False), {"a": object()}]
)
def test_finish_results_must_be_plain_data(value: Any) -> None:
    """A finish result that is not plain data is an invalid result, before the schema."""
    run = assert_refused({"kind": "finish", "result": value})

    assert "TUBELESS_AGENT_INVALID_RESULT" in _errors_text(run)
    assert "Agent finish result must be plain JSON data" in _errors_text(run)


def test_plain_data_nested_to_the_depth_limit_reaches_the_handler(tmp_path: Path) -> None:
    """An input 64 containers deep is plain data: the call runs and the agent goes on."""
    decisions = iter(
        [{"kind": "continue", "calls": [_call("c1", "echo", _nested(63, True))]}, None]
    )
    finish = {"kind": "finish", "result": "done"}

    def decide(state: Any, context: Any) -> Any:
        return next(decisions) or finish

    tool = define_tool(description="Echo", input_schema={}, output_schema={}, run=lambda v, c: 1)
    agent = define_agent(
        id="deep",
        input_schema={},
        result_schema={},
        initial_state=lambda options: {},
        decide=decide,
        tools={"echo": tool},
    )

    assert agent.run_or_raise({}) == "done"


def test_a_kind_nested_5000_deep_is_an_invalid_decision() -> None:
    """Building the message never recurses into the kind."""
    run = assert_refused({"kind": _nested(5_000, False), "result": 1})

    assert "got kind a value of type list" in _errors_text(run)


def test_a_kind_whose_comparison_raises_is_an_invalid_decision() -> None:
    """The kind's type is checked before it is compared, so its `__eq__` never runs."""
    run = assert_refused({"kind": _RaisingEq(), "result": 1})

    assert "got kind a value of type _RaisingEq" in _errors_text(run)
    assert "TUBELESS_STEP_FAILED" not in [error.source_code for error in run.errors]


def test_a_key_that_raises_when_compared_is_an_invalid_decision() -> None:
    """A key colliding with `kind` whose `__eq__` raises cannot escape the decision code."""
    key = _CollidingKey()
    decision = {key: 1, "kind": "finish", "result": 1}
    key.armed = True
    run = assert_refused(decision)

    assert "TUBELESS_AGENT_INVALID_DECISION" in _errors_text(run)


@pytest.mark.parametrize(
    ("decision", "quoted"),
    [
        pytest.param({"kind": "x" * 2_000_000}, "got kind 'xxx", id="kind"),
        pytest.param(
            {"kind": "continue", "calls": [_call("c1", "t" * 2_000_000)]},
            "Unknown agent tool: 'ttt",
            id="tool",
        ),
        pytest.param(
            {"kind": "continue", "calls": [{**_call("i" * 2_000_000), "extra": 1}]},
            "Agent call 'iii",
            id="call-id",
        ),
        pytest.param(
            {"kind": "finish", "result": 1, "k" * 2_000_000: 1},
            "unexpected keys: 'kkk",
            id="key",
        ),
    ],
)
def test_model_text_is_quoted_as_a_short_prefix(decision: Any, quoted: str) -> None:
    """A 2 MB kind, tool name, call id or key shows as 64 characters and its length."""
    run = assert_refused(decision)
    text = _errors_text(run)

    assert quoted in text
    assert "… (2000000 characters)" in text
    assert len(text) < 5_000


def test_control_characters_in_model_text_are_escaped() -> None:
    """A tool name holding a newline and a terminal escape reaches messages escaped."""
    run = assert_refused({"kind": "continue", "calls": [_call("c1", "evil\n\x1b[2J")]})

    [error] = run.errors
    assert "Unknown agent tool: 'evil\\n\\x1b[2J'" in error.message
    assert "\x1b" not in error.format()

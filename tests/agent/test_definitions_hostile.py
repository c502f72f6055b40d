"""Bad definitions: every one raises with a code and a message naming the problem."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tubeless import define_agent, define_tool
from tubeless.agent._tools import TOOL_NAME
from tubeless.errors import TubelessError

SETTINGS = settings(max_examples=60, deadline=None, database=None)


def _tool(**fields: Any) -> Any:
    values: dict[str, Any] = {
        "description": "Echo",
        "input_schema": {},
        "output_schema": {},
        "run": lambda value, context: value,
    }
    values.update(fields)
    return define_tool(**values)


def _agent(**fields: Any) -> Any:
    values: dict[str, Any] = {
        "id": "agent",
        "input_schema": {},
        "result_schema": {},
        "initial_state": lambda options: {},
        "decide": lambda state, context: {"kind": "finish", "result": None},
    }
    values.update(fields)
    return define_agent(**values)


def _refused(define: Any, **fields: Any) -> TubelessError:
    with pytest.raises(TubelessError) as raised:
        define(**fields)
    error = raised.value
    assert isinstance(error.code, str)
    assert error.code.startswith("TUBELESS_")
    assert len(str(error)) < 2_000
    return error


INVALID_SCHEMAS = [
    pytest.param({"type": "nope"}, "JSON Schema is invalid at #/type", id="type"),
    pytest.param(
        {"$ref": "https://example.com/schema.json"},
        "unresolvable $ref 'https://example.com/schema.json': no document with that URI",
        id="remote-ref",
    ),
    pytest.param(
        {"$ref": "#/$defs/missing"},
        "unresolvable $ref '#/$defs/missing': the JSON pointer leads nowhere",
        id="dangling-ref",
    ),
    pytest.param(
        {"type": "string", "pattern": "("}, "invalid at #/pattern: '(' is not a 'regex'", id="re"
    ),
    pytest.param({"minLength": -1}, "invalid at #/minLength: -1 is less than", id="min-length"),
    pytest.param(5, "requires a schema: a JSON Schema dict", id="not-a-schema"),
]


@pytest.mark.parametrize(("schema", "reason"), INVALID_SCHEMAS)
@pytest.mark.parametrize(
    ("define", "field", "label"),
    [
        pytest.param(_tool, "input_schema", "Tool input", id="tool-input"),
        pytest.param(_tool, "output_schema", "Tool output", id="tool-output"),
        pytest.param(_agent, "input_schema", "Agent input", id="agent-input"),
        pytest.param(_agent, "result_schema", "Agent result", id="agent-result"),
    ],
)
def test_an_invalid_schema_says_what_is_wrong_and_where(
    define: Any, field: str, label: str, schema: Any, reason: str
) -> None:
    """An invalid JSON Schema names its path and fault, not a missing validator."""
    error = _refused(define, **{field: schema})

    assert error.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert str(error).startswith(label)
    assert reason in str(error)
    if isinstance(schema, dict):
        assert "requires a schema" not in str(error)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"id": None}, "Agent id must be a string, got NoneType"),
        pytest.param({"id": 5}, "Agent id must be a string, got int"),
        pytest.param({"id": b"agent"}, "Agent id must be a string, got bytes"),
        pytest.param({"description": 5}, "Agent description must be a string or None"),
        pytest.param({"name": ["x"]}, "Agent name must be a string or None"),
        pytest.param({"implementation_version": 1}, "Agent implementation_version must be"),
    ],
)
def test_text_arguments_of_the_wrong_type_name_the_argument(
    fields: dict[str, Any], message: str
) -> None:
    """`id=None`, `id=5` or `description=5` is a definition error naming the argument."""
    error = _refused(_agent, **fields)

    assert error.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert message in str(error)


def test_a_blank_id_keeps_its_catalog_code() -> None:
    """A blank id is the pipeline's own definition error, with its catalog code."""
    error = _refused(_agent, id="  ")

    assert error.code == "TUBELESS_DEFINITION_PIPELINE_ID_BLANK"
    assert "Pipeline id must not be blank" in str(error)


RULE = "letters, digits, '_' and '-', starting with a letter, at most 128 characters"


def test_a_tool_name_of_129_characters_states_the_rule_and_a_bounded_prefix() -> None:
    """The message quotes 64 characters and the length, and states the naming rule."""
    error = _refused(_agent, tools={"t" * 129: _tool()})

    assert str(error) == f"Invalid tool name: {'t' * 64!r}… (129 characters) (use {RULE})"


def test_a_tool_name_of_128_characters_is_accepted() -> None:
    """The longest allowed name defines an agent."""
    _agent(tools={"t" * 128: _tool()})


@SETTINGS
@given(st.one_of(st.text(max_size=300), st.integers(), st.none(), st.tuples(st.integers())))
def test_any_invalid_tool_name_is_refused_with_the_rule(name: Any) -> None:
    """A random name either matches the rule, or fails naming the rule with a short quote."""
    if isinstance(name, str) and TOOL_NAME.fullmatch(name):
        _agent(tools={name: _tool()})
        return
    error = _refused(_agent, tools={name: _tool()})

    assert error.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert str(error).startswith("Invalid tool name: ")
    assert RULE in str(error)
    assert len(str(error)) < 1_000
    assert str(error).isprintable()


BAD_DEFINITIONS = [
    pytest.param(_tool, {"description": "  "}, "Tool description must be a non-blank string"),
    pytest.param(_tool, {"description": 5}, "Tool description must be a non-blank string"),
    pytest.param(_tool, {"description": "d" * 4097}, "at most 4096 characters"),
    pytest.param(_tool, {"run": None}, "Tool requires a callable run handler"),
    pytest.param(_tool, {"dry_run": "always"}, "dry-run policy of None, 'skip'"),
    pytest.param(_agent, {"decide": None}, "Agent requires callable initial_state and decide"),
    pytest.param(_agent, {"reduce": 5}, "Agent reduce must be callable when given"),
    pytest.param(_agent, {"tools": ["echo"]}, "Agent tools given as a list must carry names"),
    pytest.param(_agent, {"tools": "echo"}, "Agent tools must be a mapping"),
    pytest.param(_agent, {"tools": {"echo": object()}}, "Tool echo must come from define_tool"),
    pytest.param(_agent, {"limits": {"max_turn": 1}}, "Unsupported agent limit: max_turn"),
    pytest.param(_agent, {"limits": {"max_turns": 0}}, "max_turns must be a positive safe"),
    pytest.param(_agent, {"limits": {"max_calls": True}}, "max_calls must be a nonnegative"),
    pytest.param(_agent, {"limits": {"max_turns": 10**5000}}, "safe integer, got an int of"),
    pytest.param(_agent, {"limits": 5}, "Agent limits must be an AgentLimits or a dict"),
]


@pytest.mark.parametrize(("define", "fields", "message"), BAD_DEFINITIONS)
def test_each_bad_definition_names_its_problem(
    define: Any, fields: dict[str, Any], message: str
) -> None:
    """Descriptions, handlers, tools and limits each fail with the definition code."""
    error = _refused(define, **fields)

    assert error.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert message in str(error)

"""`define_tool`, tool handles, tool registration in agents and `ToolError`."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from tubeless import TubelessError
from tubeless._frozen import FrozenDict
from tubeless.agent import AgentTool, define_agent, define_tool
from tubeless.errors import AgentDefinitionError, SchemaIssues, ToolError
from tubeless.schema import validator
from tubeless.testing import scripted_decide

TEXT = {"type": "string"}


def _run(value: Any, context: Any) -> Any:
    return value


def _tool(**fields: Any) -> AgentTool:
    fields.setdefault("description", "Echo text")
    fields.setdefault("input_schema", TEXT)
    fields.setdefault("output_schema", TEXT)
    fields.setdefault("run", _run)
    return define_tool(**fields)


def _agent(tools: Any) -> Any:
    return define_agent(
        id="tools-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=lambda state, context: {"kind": "finish", "result": "done"},
        tools=tools,
    )


class _NoDescriptor:
    """A validator without any JSON Schema converter."""

    def validate(self, value: Any) -> Any:
        return value


def test_define_tool_returns_a_read_only_opaque_handle() -> None:
    """The handle exposes description and descriptor but refuses new or changed attributes."""
    tool = _tool(description="Echo the text back")

    assert isinstance(tool, AgentTool)
    assert tool.description == "Echo the text back"
    assert tool.input_json_schema == {"type": "string"}
    assert not hasattr(tool, "__dict__")
    with pytest.raises(AttributeError):
        tool.description = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        tool.run = _run  # type: ignore[attr-defined]


def test_agent_tool_has_no_public_constructor() -> None:
    """`AgentTool(...)` and subclasses fail with a code; copies are the tool itself."""
    for args, kwargs in (((), {}), (("Echo",), {"run": _run})):
        with pytest.raises(AgentDefinitionError, match="use define_tool") as raised:
            AgentTool(*args, **kwargs)
        assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("Forged", (AgentTool,), {})
    tool = _tool()
    assert copy.copy(tool) is tool
    assert copy.deepcopy({"echo": tool})["echo"] is tool
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(tool)
    with pytest.raises(AttributeError, match="read-only"):
        del tool.description


@pytest.mark.parametrize("description", [None, 42, "", "   \n\t", "x" * 4097])
def test_description_must_be_non_blank_and_at_most_4096_characters(description: Any) -> None:
    """A missing, blank or oversized description is the first definition error."""
    with pytest.raises(AgentDefinitionError, match="description") as raised:
        _tool(description=description)

    assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"


def test_description_of_4096_characters_is_accepted() -> None:
    """The bound is inclusive."""
    assert len(_tool(description="d" * 4096).description) == 4096


def test_description_is_checked_before_everything_else() -> None:
    """With every field wrong, the description error wins."""
    with pytest.raises(AgentDefinitionError, match="description"):
        define_tool(description="", input_schema=1, output_schema=2, run=3, dry_run=4)  # type: ignore[arg-type]


def test_output_schema_is_checked_second() -> None:
    """After the description, a non-schema output fails before the handler is looked at."""
    with pytest.raises(
        AgentDefinitionError, match="Tool output requires a schema: a JSON Schema dict"
    ):
        define_tool(description="ok", input_schema=1, output_schema=2, run=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("run", "dry_run"),
    [(None, None), ("not callable", None), (_run, "preview"), (_run, 42), (_run, "SKIP")],
)
def test_handler_and_dry_run_policy_are_checked_third(run: Any, dry_run: Any) -> None:
    """A non-callable `run` or a dry-run policy other than None/'skip'/callable fails next."""
    with pytest.raises(AgentDefinitionError, match="run handler and a dry-run policy"):
        define_tool(description="ok", input_schema=1, output_schema=TEXT, run=run, dry_run=dry_run)


@pytest.mark.parametrize("dry_run", [None, "skip", _run])
def test_valid_dry_run_policies_are_accepted(dry_run: Any) -> None:
    """None, 'skip' and a preview callable are the three policies."""
    assert isinstance(_tool(dry_run=dry_run), AgentTool)


def test_input_schema_is_checked_last() -> None:
    """With description, output and handler fine, a non-schema input is reported."""
    with pytest.raises(
        AgentDefinitionError, match="Tool input requires a schema: a JSON Schema dict"
    ):
        define_tool(description="ok", input_schema=1, output_schema=TEXT, run=_run)


def test_input_schema_without_a_descriptor_needs_an_explicit_one() -> None:
    """A validator with no JSON Schema converter needs `input_json_schema`."""
    with pytest.raises(AgentDefinitionError, match="descriptor") as raised:
        _tool(input_schema=_NoDescriptor())
    assert "Tool input requires a JSON Schema input descriptor or explicit fallback" in str(
        raised.value
    )

    tool = _tool(input_schema=_NoDescriptor(), input_json_schema={"type": "string"})
    assert tool.input_json_schema == {"type": "string"}


@pytest.mark.parametrize(
    "explicit",
    [
        ["type", "string"],
        {"type": "number", "minimum": float("nan")},
        {"type": "string", "default": {1, 2}},
        {"type": 7},
    ],
)
def test_an_explicit_descriptor_must_be_a_valid_json_object(explicit: Any) -> None:
    """Arrays, non-finite numbers, non-JSON values and invalid schemas are rejected."""
    with pytest.raises(AgentDefinitionError, match="descriptor"):
        _tool(input_schema=_NoDescriptor(), input_json_schema=explicit)


def test_explicit_descriptor_is_used_instead_of_the_schema_one() -> None:
    """`input_json_schema` wins over the input schema's own converter."""
    explicit = {"type": "string", "description": "A word"}

    tool = _tool(input_schema={"type": "string", "minLength": 1}, input_json_schema=explicit)

    assert tool.input_json_schema == explicit


def test_descriptor_keys_are_sorted_at_every_level() -> None:
    """The descriptor is owned JSON data with every object's keys in sorted order."""
    explicit = {
        "type": "object",
        "properties": {"zeta": {"type": "string"}, "alpha": {"type": "number"}},
        "required": ["zeta", "alpha"],
        "additionalProperties": False,
    }

    descriptor = _tool(input_json_schema=explicit).input_json_schema

    assert list(descriptor) == ["additionalProperties", "properties", "required", "type"]
    assert list(descriptor["properties"]) == ["alpha", "zeta"]
    assert descriptor["required"] == ("zeta", "alpha")
    assert json.loads(json.dumps(descriptor)) == explicit


def test_descriptor_is_frozen() -> None:
    """Neither the descriptor nor its nested parts can be changed."""
    descriptor = _tool(
        input_json_schema={"type": "object", "properties": {"a": {"type": "string"}}}
    ).input_json_schema

    assert isinstance(descriptor, FrozenDict)
    with pytest.raises(TypeError):
        descriptor["type"] = "array"  # type: ignore[index]
    with pytest.raises(TypeError):
        descriptor["properties"]["a"]["type"] = "number"
    with pytest.raises(TypeError):
        descriptor.update(x=1)


def test_later_mutation_of_the_callers_dicts_is_not_visible() -> None:
    """The descriptor is made once, at definition time, from a deep copy."""
    explicit: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    source: dict[str, Any] = {"type": "object", "properties": {"b": {"type": "string"}}}
    explicit_tool = _tool(input_json_schema=explicit)
    source_tool = _tool(input_schema=source)

    explicit["properties"]["a"]["type"] = "number"
    explicit["extra"] = True
    source["properties"]["b"]["type"] = "number"

    assert explicit_tool.input_json_schema == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    assert source_tool.input_json_schema == {
        "type": "object",
        "properties": {"b": {"type": "string"}},
    }


def test_descriptor_comes_from_a_validator_json_schema() -> None:
    """A hand-written validator's JSON Schema is the descriptor."""

    def words(value: Any) -> Any:
        if not isinstance(value, str):
            raise SchemaIssues(["Expected text"])
        return value.split()

    tool = _tool(input_schema=validator(words, json_schema={"type": "string"}))

    assert tool.input_json_schema == {"type": "string"}


def test_tools_not_made_by_define_tool_are_rejected() -> None:
    """Only handles from `define_tool` register; look-alikes and bare handles fail."""
    bare = object.__new__(AgentTool)
    for impostor in (object(), {"run": _run}, _run, bare):
        with pytest.raises(AgentDefinitionError, match="define_tool") as raised:
            _agent({"fake": impostor})
        assert str(raised.value) == "Tool fake must come from define_tool or pipeline_tool"


@pytest.mark.parametrize(
    "name", ["", "1abc", "_abc", "-abc", "a b", "a.b", "a/b", "é", "a" * 129, 7, None]
)
def test_tool_names_must_match_the_pattern(name: Any) -> None:
    """Names start with a letter, then letters, digits, `_` or `-`, 128 characters at most."""
    with pytest.raises(AgentDefinitionError, match="tool name"):
        _agent({name: _tool()})


@pytest.mark.parametrize("name", ["a", "Z", "a" * 128, "get_weather-v2", "A1_b-2"])
def test_valid_tool_names_register(name: str) -> None:
    """Valid names are accepted and become capability names."""
    agent = _agent({name: _tool()})

    capabilities = agent.definition.to_dict()["steps"][0]["agent"]["capabilities"]
    assert [entry["name"] for entry in capabilities] == [name]


def test_names_are_checked_in_sorted_order_before_handles() -> None:
    """Each name is checked, in sorted order, before its handle."""
    with pytest.raises(AgentDefinitionError, match="Invalid tool name: 'b b'"):
        _agent({"c c": _tool(), "b b": object(), "a": _tool()})
    with pytest.raises(AgentDefinitionError, match="Tool b must come from define_tool"):
        _agent({"c c": _tool(), "b": object(), "a": _tool()})


def test_tools_must_be_a_mapping() -> None:
    """A list of tools is not a registry."""
    with pytest.raises(AgentDefinitionError, match="mapping"):
        _agent([_tool()])


def test_more_than_4096_tools_are_rejected() -> None:
    """The capability inventory holds at most 4096 tools."""
    tool = _tool()
    assert _agent({f"t{index}": tool for index in range(4096)}).id == "tools-agent"
    with pytest.raises(AgentDefinitionError, match="4096"):
        _agent({f"t{index}": tool for index in range(4097)})


def test_one_handle_may_serve_several_agents_and_names() -> None:
    """A handle is reusable: each agent compiles its own tool pipeline per name."""
    tool = _tool()

    first = _agent({"echo": tool, "repeat": tool})
    second = _agent({"echo": tool})

    assert len(first.definition.to_dict()["steps"][0]["agent"]["capabilities"]) == 2
    assert len(second.definition.to_dict()["steps"][0]["agent"]["capabilities"]) == 1


def test_tool_error_keeps_code_and_message() -> None:
    """`ToolError(code, message)` is a tubeless error with both as attributes."""
    error = ToolError("NOT_FOUND", "Word unavailable")

    assert isinstance(error, TubelessError)
    assert error.code == "NOT_FOUND"
    assert error.message == "Word unavailable"
    assert str(error) == "Word unavailable"
    assert type(error).__name__ == "ToolError"


@pytest.mark.parametrize(
    ("code", "message"),
    [("", "m"), ("   ", "m"), ("c" * 257, "m"), ("CODE", "m" * 4097), (None, "m"), ("C", None)],
)
def test_tool_error_rejects_bad_codes_and_messages(code: Any, message: Any) -> None:
    """Blank or over-256-character codes and over-4096-character messages are refused."""
    with pytest.raises(ValueError, match="ToolError"):
        ToolError(code, message)


def test_tool_error_accepts_the_bounds() -> None:
    """A 256-character code and a 4096-character message are allowed, as is an empty message."""
    assert ToolError("c" * 256, "m" * 4096).code == "c" * 256
    assert ToolError("C", "").message == ""


def test_tool_context_has_empty_options_and_the_step_services(
    recorder: Callable[[], Any],
) -> None:
    """Handlers get their input first and a context whose options are an empty mapping."""
    seen = recorder()

    def run(value: Any, context: Any) -> Any:
        seen.add(
            {
                "value": value,
                "options": dict(context.options),
                "dry_run": context.dry_run,
                "run_id": context.run_id,
                "parent_run_id": context.parent_run_id,
                "attempt_id": context.attempt_id,
                "has_handler_refs": hasattr(context, "tools"),
            }
        )
        return value

    decide = scripted_decide(
        [
            {"kind": "continue", "calls": [{"id": "c1", "tool": "echo", "input": "hi"}]},
            {"kind": "finish", "result": "done"},
        ]
    )
    agent = define_agent(
        id="ctx-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools={"echo": _tool(run=run)},
    )

    run_result = agent.run({"secret": "not for tools"})

    assert run_result.status == "completed"
    [entry] = seen.items
    assert entry["value"] == "hi"
    assert entry["options"] == {}
    assert entry["dry_run"] is False
    assert entry["run_id"].startswith("ctx-agent/tool/echo:")
    assert entry["parent_run_id"].startswith("ctx-agent/turn:")
    assert entry["attempt_id"].startswith(entry["run_id"] + ":attempt:")
    assert entry["has_handler_refs"] is False


def test_a_pydantic_model_gives_descriptor_and_transformed_input() -> None:
    """A pydantic model validates arguments into a model instance; its schema is the
    descriptor, keys sorted."""
    pydantic = pytest.importorskip("pydantic")

    class Query(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        text: str
        limit: int = 2

    received: list[Any] = []
    tool = _tool(
        input_schema=Query,
        output_schema={"type": "array"},
        run=lambda query, context: received.append(query) or [query.text] * query.limit,
    )
    assert list(tool.input_json_schema) == sorted(tool.input_json_schema)
    assert tool.input_json_schema["required"] == ("text",)

    decide = scripted_decide(
        [
            {"kind": "continue", "calls": [{"id": "q", "tool": "search", "input": {"text": "hi"}}]},
            {"kind": "finish", "result": "done"},
        ]
    )
    outcomes: list[Any] = []
    agent = define_agent(
        id="pydantic-agent",
        input_schema={"type": "object"},
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=decide,
        tools={"search": tool},
        reduce=lambda state, batch: outcomes.extend(batch) or state,
    )

    assert agent.run({}).status == "completed"
    assert [type(query).__name__ for query in received] == ["Query"]
    assert outcomes[0]["value"] == ["hi", "hi"]


def test_tool_error_is_exported_with_the_agent_api() -> None:
    """`tubeless.agent.ToolError` is the one error class, as in the reference's module."""
    import tubeless
    import tubeless.agent

    assert tubeless.agent.ToolError is ToolError is tubeless.ToolError


def _tool_factories() -> dict[str, Callable[..., AgentTool]]:
    """Each tool factory with the arguments of its own it requires."""
    import tubeless
    from tubeless.agent import pipeline_tool, tool_from_function
    from tubeless.pipeline import create_steps, define_pipeline

    def shout(text: str) -> str:
        """Shout the text."""
        return text.upper()

    step = create_steps({"type": "object"})
    child = define_pipeline(id="child", steps=[step("leaf", run=lambda i, c: 1)])
    return {
        "define_tool": lambda **kw: _tool(**kw),
        "tool_from_function": lambda **kw: tool_from_function(shout, **kw),
        "tool": lambda **kw: tubeless.tool(**kw)(shout),
        "pipeline_tool": lambda **kw: pipeline_tool(child, description="Child", **kw),
    }


@pytest.mark.parametrize("factory", ["define_tool", "tool_from_function", "tool", "pipeline_tool"])
def test_every_tool_factory_takes_the_tool_options(factory: str) -> None:
    """`replay`, `needs_approval`, `timeout` and `retry` reach the tool; defaults otherwise."""
    from tubeless.agent import Retry, ToolOptions
    from tubeless.agent._tools import tool_spec

    retry = Retry(attempts=2, codes=("BUSY",))
    options: ToolOptions = {
        "replay": "safe",
        "needs_approval": True,
        "timeout": 2.5,
        "retry": retry,
    }
    spec = tool_spec(_tool_factories()[factory](**options))
    assert (spec.replay, spec.needs_approval, spec.timeout, spec.retry) == (
        "safe",
        True,
        2.5,
        retry,
    )
    plain = tool_spec(_tool_factories()[factory]())
    assert (plain.replay, plain.needs_approval, plain.timeout, plain.retry) == (
        "unsafe",
        False,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("factory", "function"),
    [
        ("define_tool", "define_tool"),
        ("tool_from_function", "tool_from_function"),
        ("tool", "tool_from_function"),
        ("pipeline_tool", "pipeline_tool"),
    ],
)
def test_a_stray_tool_keyword_fails_as_python_would(factory: str, function: str) -> None:
    """An unknown keyword raises Python's own `TypeError` words, before any other check."""
    with pytest.raises(TypeError) as raised:
        _tool_factories()[factory](replays="safe", timeout=-1)
    assert str(raised.value) == f"{function}() got an unexpected keyword argument 'replays'"

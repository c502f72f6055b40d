"""`tool_from_function`: schemas from a typed function's signature and docstring."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest

import tubeless
from tubeless import ToolContext, ToolError, define_agent, tool_from_function
from tubeless.errors import AgentDefinitionError, MissingExtraError
from tubeless.testing import scripted_decide


class Weather(pydantic.BaseModel):
    """The weather in one city."""

    city: str
    celsius: float


def get_weather(city: str, days: int = 1) -> Weather:
    """Look up the weather in a city.

    Only a few cities are known.

    Args:
        city: the city's name, as the
            post office writes it.
        days: how many days ahead.

    Returns:
        The weather.
    """
    if city == "Atlantis":
        raise ToolError("UNKNOWN_CITY", f"No weather for {city}")
    return Weather(city=city, celsius=20.5 + days)


def _weather_agent(tool: Any, calls: list[dict[str, Any]]) -> Any:
    return define_agent(
        id="weather",
        input_schema={"type": "object"},
        result_schema={"type": "array"},
        initial_state=lambda options: {"seen": []},
        decide=scripted_decide(
            [
                {"kind": "continue", "calls": calls},
                lambda state, context: {"kind": "finish", "result": state["seen"]},
            ]
        ),
        reduce=lambda state, outcomes: {"seen": [*state["seen"], *outcomes]},
        tools={"get_weather": tool},
        limits={"max_turns": 3, "max_calls": 5},
    )


def test_the_input_schema_comes_from_the_signature_and_docstring() -> None:
    """Parameters become required or defaulted properties, described by the `Args:` entries."""
    tool = tool_from_function(get_weather)

    assert tool.description == "Look up the weather in a city."
    schema = tool.input_json_schema
    assert schema["type"] == "object"
    assert schema["required"] == ("city",)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["city"]["type"] == "string"
    assert schema["properties"]["city"]["description"] == (
        "the city's name, as the post office writes it."
    )
    assert schema["properties"]["days"] == {
        "default": 1,
        "description": "how many days ahead.",
        "title": "Days",
        "type": "integer",
    }


def test_an_agent_calls_the_function_and_gets_its_output_as_json() -> None:
    """Validated arguments reach the function; a returned model arrives as a plain dict."""
    tool = tool_from_function(get_weather, description="Weather by city")
    calls = [
        {"id": "a", "tool": "get_weather", "input": {"city": "Oslo", "days": "2"}},
        {"id": "b", "tool": "get_weather", "input": {"city": "Atlantis"}},
    ]

    outcomes = _weather_agent(tool, calls).run_or_raise({})

    assert tool.description == "Weather by city"
    assert outcomes == (
        {"id": "a", "tool": "get_weather", "ok": True, "value": {"city": "Oslo", "celsius": 22.5}},
        {
            "id": "b",
            "tool": "get_weather",
            "ok": False,
            "error": {"code": "UNKNOWN_CITY", "message": "No weather for Atlantis"},
        },
    )


def test_arguments_the_signature_does_not_take_are_rejected_before_the_call() -> None:
    """An unknown property fails the decision, and the function never runs."""
    ran: list[str] = []

    def shout(word: str) -> str:
        """Uppercase a word."""
        ran.append(word)
        return word.upper()

    calls = [{"id": "a", "tool": "get_weather", "input": {"word": "hi", "loud": True}}]
    run = _weather_agent(tool_from_function(shout), calls).run({})

    assert run.status == "failed"
    assert ran == []
    assert "loud" in run.errors[0].message


def test_a_tool_context_parameter_receives_the_context() -> None:
    """A parameter annotated `ToolContext` is not part of the input and gets the context."""
    seen: list[Any] = []

    def echo(text: str, context: ToolContext) -> str:
        """Echo text."""
        seen.append(context)
        return text

    tool = tool_from_function(echo)
    calls = [{"id": "a", "tool": "get_weather", "input": {"text": "hi"}}]
    outcomes = _weather_agent(tool, calls).run_or_raise({})

    assert list(tool.input_json_schema["properties"]) == ["text"]
    assert outcomes[0]["value"] == "hi"
    assert isinstance(seen[0], ToolContext)


def test_a_durable_agent_saves_waits_on_and_resumes_a_function_tool(tmp_path: Path) -> None:
    """The validated input is the arguments' JSON form: the checkpoint and the approval
    hold it, `needs_approval` sees it, and the function still gets typed arguments."""
    typed: list[Any] = []
    asked: list[Any] = []

    def nights(arrive: datetime.date, leave: datetime.date) -> int:
        """Count the nights of a stay."""
        typed.append((arrive, leave))
        return (leave - arrive).days

    def far(value: Any, context: Any) -> bool:
        asked.append(value)
        return value["leave"] > "2026-12-31"

    store = tubeless.SqliteCheckpointStore(tmp_path / "runs.sqlite")
    tool = tool_from_function(nights, replay="safe", needs_approval=far)
    calls = [
        {
            "id": "near",
            "tool": "get_weather",
            "input": {"arrive": "2026-12-01", "leave": "2026-12-04"},
        },
        {
            "id": "far",
            "tool": "get_weather",
            "input": {"arrive": "2026-12-30", "leave": "2027-01-02"},
        },
    ]
    agent = define_agent(
        id="stays",
        input_schema={"type": "object"},
        result_schema={"type": "array"},
        initial_state=lambda options: {"seen": []},
        decide=scripted_decide(
            [
                {"kind": "continue", "calls": calls},
                lambda state, context: {"kind": "finish", "result": state["seen"]},
            ]
        ),
        reduce=lambda state, outcomes: {"seen": [*state["seen"], *outcomes]},
        tools={"get_weather": tool},
        implementation_version="1",
        durability=tubeless.Durability(store=store, key="trip"),
    )

    waiting = agent.run({})
    assert waiting.status == "failed"
    assert "TUBELESS_AGENT_APPROVAL_REQUIRED" in str(waiting.errors[0].to_dict())
    assert asked == [calls[0]["input"], calls[1]["input"]]
    assert [(p.call_id, p.input) for p in waiting.pending_approvals] == [
        ("far", {"arrive": "2026-12-30", "leave": "2027-01-02"})
    ]
    assert json.loads(store.read("trip") or "")  # the checkpoint is JSON text
    assert typed == []

    outcomes = agent.run_or_raise({}, context={"approvals": {"far": tubeless.approve()}})
    assert [outcome["value"] for outcome in outcomes] == [3, 3]
    assert typed == [
        (datetime.date(2026, 12, 1), datetime.date(2026, 12, 4)),
        (datetime.date(2026, 12, 30), datetime.date(2027, 1, 2)),
    ]


def _unannotated(city, days: int) -> str:  # type: ignore[no-untyped-def]
    """Weather."""
    return str(city)


def _no_return(city: str):  # type: ignore[no-untyped-def]
    """Weather."""
    return city


def _undocumented(city: str) -> str:
    return city


def _variadic(*cities: str) -> str:
    """Weather."""
    return ""


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_unannotated, "_unannotated): parameter 'city' has no type annotation"),
        (_no_return, "_no_return): no return annotation"),
        (_undocumented, "_undocumented): no description: give description= or a docstring"),
        (_variadic, "_variadic): parameter 'cities': a tool takes named parameters"),
        (lambda city: city, "<lambda>): parameter 'city' has no type annotation"),
    ],
)
def test_what_is_missing_is_a_definition_error_naming_it(fn: Any, words: str) -> None:
    """An unannotated parameter or return value, or no description, names the function and part."""
    with pytest.raises(AgentDefinitionError) as caught:
        tool_from_function(fn)

    assert caught.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    assert words in str(caught.value)


class Opaque:
    """A class pydantic knows nothing about."""


def test_a_type_pydantic_cannot_model_is_a_definition_error() -> None:
    """A parameter of an arbitrary class fails at definition, not at the first call."""

    def use(thing: Opaque) -> str:
        """Use a thing."""
        return ""

    with pytest.raises(AgentDefinitionError, match="pydantic cannot model its parameters"):
        tool_from_function(use)


def test_without_pydantic_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """With pydantic missing, the error has its code and says which extra to install."""
    monkeypatch.setitem(sys.modules, "pydantic", None)

    with pytest.raises(MissingExtraError) as caught:
        tool_from_function(get_weather)

    assert caught.value.code == "TUBELESS_EXTRA_MISSING"
    assert caught.value.extra == "pydantic"
    assert isinstance(caught.value, ImportError)
    assert "pip install 'tubeless-pipelines[pydantic]'" in str(caught.value)


@pytest.mark.slow
def test_importing_tubeless_does_not_import_pydantic() -> None:
    """pydantic is imported by the first `tool_from_function` call, not by `import tubeless`."""
    code = "import sys, tubeless\nassert 'pydantic' not in sys.modules, sorted(sys.modules)\n"
    subprocess.run([sys.executable, "-c", code], check=True)


@tubeless.tool
def lookup(city: str) -> str:
    """Look a city up."""
    return city.upper()


@tubeless.tool(replay="safe", name="weather-now")
def weather_now(city: str, context: ToolContext) -> str:
    """The weather now, with the call's turn."""
    assert context.signal is not None
    return f"{city}: sunny"


def test_the_decorator_names_the_tool_and_forwards_its_options() -> None:
    """`@tubeless.tool` names the tool after the function; keywords go to tool_from_function."""
    assert isinstance(lookup, tubeless.AgentTool)
    assert lookup.name == "lookup"
    assert lookup.description == "Look a city up."
    assert weather_now.name == "weather-now"
    from tubeless.agent._tools import tool_spec

    assert tool_spec(weather_now).replay == "safe"  # type: ignore[union-attr]
    assert "context" not in weather_now.input_json_schema["properties"]
    assert (
        tubeless.define_tool(
            description="d", input_schema={}, output_schema={}, run=lambda v, c: v
        ).name
        is None
    )


def test_an_agent_takes_a_list_of_named_tools() -> None:
    """`define_agent(tools=[...])` names each tool by its `name` and runs it."""
    agent = define_agent(
        id="listed",
        input_schema={"type": "object"},
        result_schema={"type": "array"},
        initial_state=lambda options: {"seen": []},
        decide=scripted_decide(
            [
                {
                    "kind": "continue",
                    "calls": [
                        {"id": "a", "tool": "lookup", "input": {"city": "oslo"}},
                        {"id": "b", "tool": "weather-now", "input": {"city": "rome"}},
                    ],
                },
                lambda state, context: {"kind": "finish", "result": state["seen"]},
            ]
        ),
        reduce=lambda state, outcomes: {"seen": [o["value"] for o in outcomes]},
        tools=[lookup, weather_now],
    )
    assert list(agent.run_or_raise({})) == ["OSLO", "rome: sunny"]


def test_a_list_of_tools_needs_names_and_no_duplicates() -> None:
    """An unnamed tool in a list, or two tools with one name, is a definition error."""
    unnamed = tool_from_function(get_weather)
    for tools, words in (
        ([lookup, unnamed], "must carry names"),
        ([lookup, lookup], "two tools named 'lookup'"),
    ):
        with pytest.raises(AgentDefinitionError, match=words) as raised:
            _weather_agent_with(tools)
        assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
    with pytest.raises(AgentDefinitionError, match="Invalid tool name"):
        tubeless.tool(lambda city: city)


def _weather_agent_with(tools: Any) -> Any:
    return define_agent(
        id="weather",
        input_schema={"type": "object"},
        result_schema={},
        initial_state=lambda options: {},
        decide=scripted_decide([]),
        tools=tools,
    )


async def fetch(city: str) -> str:
    """Fetch a city."""
    return city


async def stream(city: str) -> Any:
    """Stream a city."""
    yield city


def test_async_functions_are_refused_at_definition() -> None:
    """An `async def` function or async generator is a definition error, not a runtime one."""
    for fn in (fetch, stream):
        with pytest.raises(AgentDefinitionError, match="is an async function") as raised:
            tool_from_function(fn)
        assert raised.value.code == "TUBELESS_AGENT_INVALID_DEFINITION"
        with pytest.raises(AgentDefinitionError, match="is an async function"):
            tubeless.tool(fn)

    async def handler(value: Any, context: Any) -> Any:
        return value

    with pytest.raises(AgentDefinitionError, match="Tool run handler is an async function"):
        tubeless.define_tool(description="d", input_schema={}, output_schema={}, run=handler)


def test_a_handler_of_the_wrong_arity_is_refused_at_definition() -> None:
    """`define_tool(run=lambda w: w)` fails when defined, naming the two arguments."""
    with pytest.raises(AgentDefinitionError) as raised:
        tubeless.define_tool(description="d", input_schema={}, output_schema={}, run=lambda w: w)
    assert "Tool run handler must take two arguments, (validated_input, context)" in str(
        raised.value
    )
    with pytest.raises(AgentDefinitionError, match="Tool dry-run preview must take two"):
        tubeless.define_tool(
            description="d",
            input_schema={},
            output_schema={},
            run=lambda value, context: value,
            dry_run=lambda: None,
        )
    tool = tubeless.define_tool(
        description="d", input_schema={}, output_schema={}, run=lambda *args, **kwargs: 1
    )
    assert tool.description == "d"

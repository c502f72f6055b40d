"""The examples as regression tests: replayed from committed cassettes, without a model.

The cassettes live in `cassettes/test_cassettes/`, where the pytest plugin puts them. They
replay in `replay` mode, so a missing one fails instead of recording quietly; run
`pytest tests/examples/test_cassettes.py --tubeless-record` (with `-p
tubeless.pytest_plugin` when tubeless is not installed) to record them again.
"""

from __future__ import annotations

import json
import pathlib
from types import ModuleType
from typing import Any

import pytest

from tubeless import define_agent, define_tool
from tubeless.errors import PipelineExecutionError, ReplayDivergedError
from tubeless.pytest_plugin import cassette_path
from tubeless.testing import Cassette, assert_trajectory

KEY = "test-key-never-record"
QUESTION = "Uppercase red and blue, then count the joined result."


def _call(name: str, args: Any, call_id: str) -> dict[str, Any]:
    """A Responses API `function_call` output item."""
    return {
        "type": "function_call",
        "name": name,
        "arguments": json.dumps(args),
        "call_id": call_id,
    }


def _recording(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("tubeless_record", default=False))


def _committed(request: pytest.FixtureRequest, name: str | None = None) -> Cassette:
    """The committed cassette of a test (this test's by default)."""
    path = cassette_path(pathlib.Path(__file__), name or request.node.name)
    return Cassette(path, mode="record" if _recording(request) else "replay")


def _queue_model(responses_api: Any) -> None:
    """The three answers of the OpenAI example's recorded run."""
    responses_api.respond(
        _call("uppercase", {"input": "red"}, "red"), _call("uppercase", {"input": "blue"}, "blue")
    )
    responses_api.respond(_call("count", {"input": "RED BLUE"}, "count"))
    responses_api.respond(_call("_finish", {"result": "RED BLUE: 8 characters"}, "finish"))


def _divergence(error: BaseException | None) -> ReplayDivergedError:
    while error is not None and not isinstance(error, ReplayDivergedError):
        error = error.__cause__
    assert isinstance(error, ReplayDivergedError)
    return error


def test_scripted_example(scripted_example: ModuleType, request: pytest.FixtureRequest) -> None:
    """The scripted agent replays its batch and its finish, tools live."""
    cassette = _committed(request)
    value = scripted_example.agent.run_or_raise(
        {"question": "hello tubeless"}, context={"cassette": cassette}
    )
    assert value == {"answer": "14 characters; HELLO; TUBELESS"}
    assert_trajectory(
        cassette, [("count", "hello tubeless"), ("uppercase", "hello"), ("uppercase", "tubeless")]
    )


def test_scripted_example_with_a_changed_tool(
    scripted_example: ModuleType, request: pytest.FixtureRequest
) -> None:
    """Replaying the scripted cassette with `uppercase` changed names agent, turn and call."""
    if _recording(request):
        pytest.skip("replays the cassette of test_scripted_example")
    changed = define_tool(
        description="Lowercase a word.",
        input_schema={"type": "string"},
        output_schema={"type": "string"},
        run=lambda word, context: word.lower(),
    )
    agent = define_agent(
        id="scripted-agent",
        input_schema=scripted_example.question_options,
        result_schema=scripted_example.text_answer,
        tools={**scripted_example.text_tools, "uppercase": changed},
        initial_state=scripted_example.start,
        decide=scripted_example.scripted_decision,
        reduce=scripted_example.observe,
    )
    cassette = _committed(request, "test_scripted_example")
    with pytest.raises(PipelineExecutionError) as failure:
        agent.run_or_raise({"question": "hello tubeless"}, context={"cassette": cassette})
    error = _divergence(failure.value)
    assert (error.agent_path, error.turn, error.call_id) == ("scripted-agent", 1, "word-0")
    assert "returned" in error.difference and "HELLO" in error.difference


def test_delegation_example(delegation_example: ModuleType, request: pytest.FixtureRequest) -> None:
    """The planner and its researcher subagent replay, each at its own path."""
    cassette = _committed(request)
    value = delegation_example.planner.run_or_raise(
        {"topic": "pipelines"}, context={"cassette": cassette}
    )
    assert value == {"answer": "pipelines: 2 facts, 11 words"}
    assert cassette.document is not None
    assert [agent.path for agent in cassette.document.agents] == [
        "planner",
        "planner/1/research-1",
    ]
    assert_trajectory(cassette, ["research", "lookup", "summarize"])


def test_openai_example(
    openai_example: ModuleType, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenAI agent replays with no key and no server: no request can be made."""
    cassette = _committed(request)
    if _recording(request):
        _queue_model(request.getfixturevalue("responses_api"))
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    value = openai_example.agent.run_or_raise(
        {"question": QUESTION}, context={"cassette": cassette}
    )
    assert value == {"answer": "RED BLUE: 8 characters"}
    text = cassette.path.read_text("utf-8")
    assert KEY not in text and "instructions" not in text and "Bearer" not in text


@pytest.mark.slow
def test_openai_records_against_the_server_and_replays_with_it_stopped(
    openai_example: ModuleType, responses_api: Any, tmp_path: pathlib.Path
) -> None:
    """Recorded against the loopback fake, replayed after it stops: zero requests, same value."""
    _queue_model(responses_api)
    cassette = Cassette(tmp_path / "openai.json")
    recorded = openai_example.agent.run_or_raise(
        {"question": QUESTION}, context={"cassette": cassette}
    )
    assert len(responses_api.requests) == 3
    responses_api.close()
    replayed = openai_example.agent.run_or_raise(
        {"question": QUESTION}, context={"cassette": cassette}
    )
    assert replayed == recorded == {"answer": "RED BLUE: 8 characters"}
    assert len(responses_api.requests) == 3
    text = cassette.path.read_text("utf-8")
    assert KEY not in text and QUESTION not in text

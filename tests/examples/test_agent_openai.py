"""The OpenAI recipe against a fake Responses API on 127.0.0.1, through `requests`.

Real tools, reducer and finalization run; only the model is replaced by queued replies.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from types import ModuleType
from typing import Any

import pytest

from tubeless import define_agent
from tubeless.errors import AgentLimitError
from tubeless.testing import MemoryTraceSink

pytestmark = pytest.mark.slow

KEY = "test-key-never-record"
BODY_TEXT = "sensitive-provider-body"
WAIT_SECONDS = 10.0
"""Generous bound for events that, when things work, happen within about a second."""


def call(name: str, args: Any, call_id: str | None = None) -> dict[str, Any]:
    """A Responses API `function_call` output item."""
    return {
        "type": "function_call",
        "name": name,
        "arguments": json.dumps(args),
        "call_id": name if call_id is None else call_id,
    }


def completed(*output: Any) -> dict[str, Any]:
    """A completed Responses API body."""
    return {"status": "completed", "output": list(output)}


def model_input(request: Any) -> Any:
    """The decoded `input` string of a recorded request: `{"state": ..., "turn": ...}`."""
    assert isinstance(request.body["input"], str)
    return json.loads(request.body["input"])


def traced_run(
    module: ModuleType, options: Any, controls: Any = None, signal: threading.Event | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    """Run the OpenAI agent with an in-memory trace; return the report and the records."""
    sink = MemoryTraceSink()
    context: dict[str, Any] = {"tracing": sink}
    if signal is not None:
        context["signal"] = signal
    run = module.agent.run(options, controls=controls, context=context)
    return run, sink.records


def tool_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of tool runs."""
    return [record for record in records if "/tool/" in record["pipelineId"]]


def errors_text(run: Any) -> str:
    """The run's errors as JSON text."""
    return json.dumps(run.to_dict()["errors"])


def test_runs_model_selected_batches_and_sends_the_documented_request(
    openai_example: ModuleType, responses_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three decisions run two batches and finish, each request carrying all outcomes so far."""
    monkeypatch.setenv("OPENAI_MODEL", "example-model")
    responses_api.respond(
        call("uppercase", {"input": "red"}, "red"), call("uppercase", {"input": "blue"}, "blue")
    )
    responses_api.respond(call("count", {"input": "RED BLUE"}, "count"))
    responses_api.respond(
        {"type": "reasoning", "summary": []}, call("_finish", {"result": "RED BLUE: 8 characters"})
    )
    question = "Uppercase red and blue, then count the joined result."

    run, records = traced_run(openai_example, {"question": question})

    assert run.status == "completed"
    assert run.value == {"answer": "RED BLUE: 8 characters"}
    sent = responses_api.requests
    assert len(sent) == 3
    assert [(request.method, request.path) for request in sent] == [("POST", "/v1/responses")] * 3
    assert sent[0].headers["authorization"] == f"Bearer {KEY}"
    assert sent[0].headers["content-type"] == "application/json"
    body = sent[0].body
    assert sorted(body) == sorted(
        [
            "model",
            "store",
            "max_output_tokens",
            "instructions",
            "input",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
        ]
    )
    assert body["model"] == "example-model"
    assert body["store"] is False
    assert body["max_output_tokens"] == 2048
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is True
    assert isinstance(body["instructions"], str) and "_finish" in body["instructions"]
    assert [tool["name"] for tool in body["tools"]] == ["count", "uppercase", "_finish"]
    assert body["tools"][0] == {
        "type": "function",
        "name": "count",
        "description": "Count the characters in a text.",
        "parameters": {
            "type": "object",
            "properties": {"input": {"type": "string"}},
            "required": ["input"],
            "additionalProperties": False,
        },
        "strict": True,
    }
    finish = body["tools"][2]
    assert finish["strict"] is True and finish["type"] == "function"
    assert finish["parameters"] == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert model_input(sent[0]) == {"state": {"question": question, "observations": []}, "turn": 1}
    assert model_input(sent[1])["turn"] == 2
    assert model_input(sent[1])["state"]["observations"] == [
        {"id": "red", "tool": "uppercase", "ok": True, "value": "RED"},
        {"id": "blue", "tool": "uppercase", "ok": True, "value": "BLUE"},
    ]
    assert model_input(sent[2])["state"]["observations"] == [
        *model_input(sent[1])["state"]["observations"],
        {"id": "count", "tool": "count", "ok": True, "value": 8},
    ]
    starts = [record for record in records if record["name"] == "pipeline.started"]
    assert [record["pipelineId"] for record in starts].count("openai-agent/turn") == 3
    tool_keys = [record["itemKey"] for record in tool_records(starts)]
    # red and blue run concurrently, so their start records may come in either order.
    assert sorted(tool_keys[:2]) == ["blue", "red"] and tool_keys[2:] == ["count"]
    assert KEY not in json.dumps(records)
    assert question not in json.dumps(records)


def test_feeds_a_recoverable_tool_failure_back_to_the_model(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """A `ToolError` outcome reaches the next request, and the model's answer is returned."""
    responses_api.respond(call("uppercase", {"input": "missing"}))
    responses_api.respond(call("_finish", {"result": "The word is unavailable."}))

    assert openai_example.agent.run_or_raise({}) == {"answer": "The word is unavailable."}

    sent = responses_api.requests
    assert sent[0].body["model"] == "gpt-4.1-mini"
    assert model_input(sent[0])["state"]["question"] == "hello tubeless"
    assert model_input(sent[1])["state"]["observations"] == [
        {
            "id": "uppercase",
            "tool": "uppercase",
            "ok": False,
            "error": {"code": "NOT_FOUND", "message": "Word unavailable"},
        }
    ]


@pytest.mark.parametrize("question", ["a" * 4097, "\N{SLIGHTLY SMILING FACE}" * 1025])
def test_rejects_an_oversized_question_before_any_request(
    openai_example: ModuleType, responses_api: Any, question: str
) -> None:
    """A question over 4096 UTF-8 bytes fails the run with no request made."""
    run = openai_example.agent.run({"question": question})

    assert run.status == "failed"
    assert "Question exceeds 4096 UTF-8 bytes" in errors_text(run)
    assert responses_api.requests == []


@pytest.mark.parametrize("question", ["a" * 4096, "\N{SLIGHTLY SMILING FACE}" * 1024])
def test_accepts_a_question_of_exactly_4096_bytes(
    openai_example: ModuleType, responses_api: Any, question: str
) -> None:
    """A question of exactly 4096 UTF-8 bytes is sent as it is."""
    responses_api.respond(call("_finish", {"result": "done"}))

    assert openai_example.agent.run_or_raise({"question": question}) == {"answer": "done"}
    assert model_input(responses_api.requests[0])["state"]["question"] == question


def test_bounds_the_encoded_request_body_including_escaping(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """Double JSON escaping pushes the second body past 32768 bytes: it is never sent."""
    question = "\\" * 4096
    responses_api.respond(call("uppercase", {"input": question}))

    run = openai_example.agent.run({"question": question})

    assert run.status == "failed"
    assert "OpenAI request exceeds 32768 UTF-8 bytes" in errors_text(run)
    assert len(responses_api.requests) == 1


@pytest.mark.parametrize(("batches", "length"), [(1, 8192), (3, 3000)])
def test_stops_an_oversized_observation_history_before_another_request(
    openai_example: ModuleType, responses_api: Any, batches: int, length: int
) -> None:
    """History over 16384 bytes fails the run before its state is committed or sent."""
    word = "\N{LATIN SMALL LETTER E WITH ACUTE}" * length
    for index in range(batches):
        responses_api.respond(call("uppercase", {"input": word}, f"call-{index}"))

    run = openai_example.agent.run({})

    assert run.status == "failed"
    assert run.finalized is False
    assert "Observation history exceeds 16384 UTF-8 bytes" in errors_text(run)
    sent = responses_api.requests
    assert len(sent) == batches
    if batches > 1:
        assert model_input(sent[1])["state"]["observations"][0]["value"] == word.upper()
        assert len(model_input(sent[2])["state"]["observations"]) == 2


INADMISSIBLE = [
    pytest.param(None, "OpenAI did not return a completed response", id="null"),
    pytest.param(
        {"status": "incomplete", "output": [call("uppercase", {"input": "red"})]},
        "OpenAI did not return a completed response",
        id="incomplete",
    ),
    pytest.param(completed(), "OpenAI returned no function calls", id="no-output"),
    pytest.param(
        completed({"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}),
        "OpenAI refused the decision request or returned invalid message content",
        id="refusal",
    ),
    pytest.param(
        completed({"type": "function_call"}), "Invalid OpenAI function call", id="bare-call"
    ),
    pytest.param(
        completed({**call("uppercase", {"input": "red"}), "arguments": "invalid JSON"}),
        "OpenAI function arguments must be JSON",
        id="arguments-not-json",
    ),
    pytest.param(
        completed(call("uppercase", {})),
        "OpenAI function arguments require exactly one input field",
        id="no-input",
    ),
    pytest.param(
        completed(call("uppercase", {"input": "red", "extra": True})),
        "OpenAI function arguments require exactly one input field",
        id="extra-field",
    ),
    pytest.param(
        completed(call("uppercase", {"input": "red"}), call("count", {"input": 42})),
        "Agent tool count input validation failed",
        id="bad-second-argument",
    ),
    pytest.param(
        completed(call("unknown", {"input": "red"})),
        "OpenAI called a function that is not a registered tool",
        id="unknown-tool",
    ),
    pytest.param(
        completed(
            call("uppercase", {"input": "red"}, "same"), call("count", {"input": "red"}, "same")
        ),
        "Duplicate agent call id: 'same'",
        id="duplicate-id",
    ),
    pytest.param(
        completed(call("_finish", {"result": "done"}), call("uppercase", {"input": "red"})),
        "OpenAI must finish without other calls",
        id="finish-and-call",
    ),
    pytest.param(
        completed(call("_finish", {"result": 42})),
        "Agent finish result validation failed",
        id="answer-not-text",
    ),
    pytest.param(
        completed(*(call("uppercase", {"input": "red"}, str(index)) for index in range(13))),
        "consumed=0, requested=13",
        id="over-max-calls",
    ),
]


@pytest.mark.parametrize(("body", "message"), INADMISSIBLE)
def test_rejects_inadmissible_responses_before_any_tool_runs(
    openai_example: ModuleType, responses_api: Any, body: Any, message: str
) -> None:
    """An unusable or inadmissible response fails the run after one request, no tool started."""
    responses_api.reply_json(body)

    run, records = traced_run(openai_example, {})

    assert run.status == "failed"
    assert run.finalized is False
    assert message in errors_text(run)
    assert len(responses_api.requests) == 1
    assert tool_records(records) == []


@pytest.mark.parametrize("status", [401, 429, 500])
def test_fails_on_http_errors_without_retry_or_body(
    openai_example: ModuleType, responses_api: Any, status: int
) -> None:
    """An HTTP error fails the run once, naming the status and never the response body."""
    responses_api.reply_text(BODY_TEXT, status)

    run, records = traced_run(openai_example, {})

    assert run.status == "failed"
    assert f"HTTP {status}" in errors_text(run)
    assert BODY_TEXT not in json.dumps(run.to_dict())
    assert BODY_TEXT not in json.dumps(records)
    assert KEY not in json.dumps(run.to_dict()) + json.dumps(records)
    assert len(responses_api.requests) == 1


def test_fails_on_a_body_that_is_not_json_without_recording_it(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """A 200 response that is not JSON fails the run, and its text appears nowhere."""
    responses_api.reply_text(BODY_TEXT, 200)

    run, records = traced_run(openai_example, {})

    assert run.status == "failed"
    assert "OpenAI returned invalid JSON" in errors_text(run)
    assert BODY_TEXT not in json.dumps(run.to_dict()) + json.dumps(records)


def test_needs_the_key_only_to_execute(
    openai_example: ModuleType, responses_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan, graph and dry run work without a key; a real run fails naming the variable."""
    monkeypatch.delenv("OPENAI_API_KEY")
    agent = openai_example.agent

    assert agent.plan().ok
    assert agent.to_mermaid().startswith("flowchart TD")
    preview = agent.run({}, controls={"dry_run": True})
    assert preview.steps[0].status == "skipped"
    assert preview.finalized is False
    run = agent.run({})
    assert run.status == "failed"
    assert "OPENAI_API_KEY is required" in errors_text(run)
    assert responses_api.requests == []


def test_importing_the_example_modules_makes_no_request(
    responses_api: Any, load_fresh: Any
) -> None:
    """Loading the recipe and the example project makes no request."""
    load_fresh("agent_openai")
    load_fresh("tubeless_project")

    assert responses_api.requests == []


def test_fails_on_an_unusable_deadline_setting(
    openai_example: ModuleType, responses_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-positive or non-numeric `OPENAI_TIMEOUT_SECONDS` fails the run before a request."""
    for value in ("soon", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", value)

        run = openai_example.agent.run({})

        assert "OPENAI_TIMEOUT_SECONDS must be a positive number of seconds" in errors_text(run)
    assert responses_api.requests == []


def test_fails_when_the_server_cannot_be_reached(
    openai_example: ModuleType, responses_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused connection fails the run naming the transport error, never the key."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")

    run, records = traced_run(openai_example, {})

    assert run.status == "failed"
    assert "OpenAI request failed (ConnectionError)" in errors_text(run)
    assert KEY not in json.dumps(run.to_dict()) + json.dumps(records)


def _run_in_thread(
    module: ModuleType, signal: threading.Event
) -> tuple[threading.Thread, threading.Event, dict[str, Any]]:
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        outcome["run"], outcome["records"] = traced_run(module, {}, signal=signal)
        done.set()

    runner = threading.Thread(target=target, name="test-agent-run")
    runner.start()
    return runner, done, outcome


@pytest.mark.parametrize("stall", ["stall_before_headers", "stall_mid_body"])
def test_the_run_signal_aborts_a_stalled_request(
    openai_example: ModuleType, responses_api: Any, stall: str
) -> None:
    """Setting the run's signal ends a stalled request: the run is cancelled, no thread left."""
    responses_api.reply(getattr(responses_api, stall))
    baseline = threading.active_count()
    signal = threading.Event()

    runner, done, outcome = _run_in_thread(openai_example, signal)
    assert responses_api.stalled.wait(WAIT_SECONDS)
    signal.set()
    # The server is still stalling: only the abort can end the run this early.
    assert done.wait(WAIT_SECONDS)
    runner.join()

    assert outcome["run"].status == "cancelled"
    assert len(responses_api.requests) == 1
    assert tool_records(outcome["records"]) == []
    responses_api.join_handlers()
    assert threading.active_count() == baseline


@pytest.mark.parametrize("stall", ["stall_before_headers", "stall_mid_body"])
def test_a_stalled_request_fails_at_its_deadline(
    openai_example: ModuleType,
    responses_api: Any,
    monkeypatch: pytest.MonkeyPatch,
    stall: str,
) -> None:
    """A request still incomplete at `OPENAI_TIMEOUT_SECONDS` fails the run, no thread left."""
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "0.5")
    responses_api.reply(getattr(responses_api, stall))
    baseline = threading.active_count()

    runner, done, outcome = _run_in_thread(openai_example, threading.Event())
    # The server stalls for far longer: only the deadline can end the run this early.
    assert done.wait(WAIT_SECONDS)
    runner.join()

    assert outcome["run"].status == "failed"
    assert "OpenAI request exceeded its 0.5-second deadline" in errors_text(outcome["run"])
    assert len(responses_api.requests) == 1
    responses_api.join_handlers()
    assert threading.active_count() == baseline


def test_concurrent_runs_keep_their_states_apart(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """Two runs in flight at once each see only their own state and get their own answer."""
    both_in_flight = threading.Barrier(2)

    def echo(handler: Any, request: Any) -> None:
        state = model_input(request)["state"]
        if not state["observations"]:
            both_in_flight.wait(WAIT_SECONDS)
            reply = completed(call("count", {"input": state["question"]}))
        else:
            reply = completed(call("_finish", {"result": str(state["observations"][0]["value"])}))
        responses_api.send_json(handler, reply)

    responses_api.default = echo
    answers: dict[str, Any] = {}

    def run(question: str) -> None:
        answers[question] = openai_example.agent.run_or_raise({"question": question})

    runners = [threading.Thread(target=run, args=(question,)) for question in ("ab", "abcd")]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()

    assert answers == {"ab": {"answer": "2"}, "abcd": {"answer": "4"}}
    assert len(responses_api.requests) == 4


@pytest.mark.slow
def test_planning_and_drawing_need_no_requests_package(tmp_path: Any) -> None:
    """Without `requests` installed the project still loads, plans and draws; a run says why."""
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    script = (
        "import sys\n"
        "sys.modules['requests'] = None\n"  # as if the package were not installed
        f"sys.path.insert(0, {str(examples)!r})\n"
        "import tubeless_project\n"
        "agent = tubeless_project.project.get('openai-agent')\n"
        "print(agent.plan().ok, agent.to_mermaid().splitlines()[0])\n"
        "import os; os.environ['OPENAI_API_KEY'] = 'test-key-never-record'\n"
        "run = agent.run({'question': 'hi'})\n"
        "print(run.status, 'tubeless-pipelines[openai]' in run.errors[0].message)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.splitlines() == ["True flowchart TD", "failed True"]


def test_usage_is_reserved_before_each_request_and_settled_from_its_response(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """`run.usage` and each decide attempt hold exactly the usage the server reported."""
    responses_api.respond(call("uppercase", {"input": "red"}, "red"))
    responses_api.respond(call("_finish", {"result": "RED"}))

    run, records = traced_run(openai_example, {"question": "Uppercase red."})

    assert run.status == "completed", run.errors
    reported = responses_api.usages
    assert len(reported) == 2
    assert run.usage.input_tokens == sum(usage["input_tokens"] for usage in reported)
    assert run.usage.output_tokens == sum(usage["output_tokens"] for usage in reported)
    assert run.to_dict()["usage"]["totalTokens"] == sum(u["total_tokens"] for u in reported)
    attempts = [
        record["payload"]["attributes"]
        for record in records
        if record["name"] == "step.attempted" and record.get("stepId") == "decide"
    ]
    assert [a["agent.usage.inputTokens"] for a in attempts] == [
        usage["input_tokens"] for usage in reported
    ]
    assert [r.size // 4 for r in responses_api.requests] == [u["input_tokens"] for u in reported]


def test_a_reservation_over_the_token_limit_sends_no_request(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """Bounds that do not fit `max_output_tokens` fail the turn before the request is sent."""
    module = sys.modules["agent_openai_decision"]
    tight = define_agent(
        id="openai-tight",
        input_schema=openai_example.question_options,
        result_schema=openai_example.text_answer,
        tools=openai_example.text_tools,
        initial_state=openai_example.start,
        decide=module.openai_decision,
        limits={"max_output_tokens": module.MAX_OUTPUT_TOKENS - 1},
    )

    run = tight.run({"question": "Uppercase red."})

    assert run.status == "failed"
    error = run.first_exception()
    while error is not None and not isinstance(error, AgentLimitError):
        error = error.__cause__
    assert isinstance(error, AgentLimitError) and error.limit == "max_output_tokens"
    assert responses_api.requests == []
    assert run.usage.total_tokens == 0


def test_a_response_without_usage_keeps_the_reservation_charged(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """Without a `usage` in the answer, the request's bounds stay charged in full."""
    responses_api.reply_json(completed(call("_finish", {"result": "done"})))

    run, _ = traced_run(openai_example, {"question": "Just finish."})

    assert run.status == "completed", run.errors
    (request,) = responses_api.requests
    assert run.usage.input_tokens == request.size
    assert run.usage.output_tokens == 2048

"""The OpenAI recipe's repairs, against the fake Responses API on 127.0.0.1.

A decision tubeless rejects goes back to the model: the next request answers each of the
model's function calls with a `function_call_output` carrying that call's issues.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

import pytest

from tubeless.testing import MemoryTraceSink

pytestmark = pytest.mark.slow


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


def traced_run(module: ModuleType, options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Run the OpenAI agent with an in-memory trace; return the report and the records."""
    sink = MemoryTraceSink()
    run = module.agent.run(options, context={"tracing": sink})
    return run, sink.records


def tool_starts(records: list[dict[str, Any]]) -> list[str]:
    """The item keys (call ids) of the tool runs that started."""
    return [
        record["itemKey"]
        for record in records
        if record["name"] == "pipeline.started" and "/tool/" in record["pipelineId"]
    ]


def outputs(request: Any) -> dict[str, Any]:
    """The `function_call_output` items of a request, by call id, their outputs decoded."""
    return {
        item["call_id"]: json.loads(item["output"])
        for item in request.body["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def test_a_bad_argument_goes_back_as_the_output_of_its_call(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """A bad argument: nothing runs, the issue returns to the model, the fixed batch runs."""
    first = completed(call("uppercase", {"input": "red"}, "up"), call("count", {"input": 42}, "n"))
    responses_api.reply_json(first)
    responses_api.respond(
        call("uppercase", {"input": "red"}, "up"), call("count", {"input": "red"}, "n")
    )
    responses_api.respond(call("_finish", {"result": "RED: 3 characters"}))

    run, records = traced_run(openai_example, {"question": "Uppercase red and count it."})

    assert run.status == "completed", run.errors
    assert sorted(tool_starts(records)) == ["n", "up"]  # each call of the fixed batch, once
    sent = responses_api.requests
    assert len(sent) == 3
    repair = sent[1].body
    assert len(json.dumps(repair, ensure_ascii=False, separators=(",", ":")).encode()) <= 32768
    items = repair["input"]
    assert items[0]["role"] == "user"
    assert json.loads(items[0]["content"])["turn"] == 1
    echoed = [item for item in items if item.get("type") == "function_call"]
    assert [(item["call_id"], item["name"], item["arguments"]) for item in echoed] == [
        ("up", "uppercase", json.dumps({"input": "red"})),
        ("n", "count", json.dumps({"input": 42})),
    ]
    feedback = outputs(sent[1])
    assert feedback["n"] == {
        "ok": False,
        "error": {"code": "TUBELESS_AGENT_INVALID_ARGUMENTS", "attempt": 1},
        "issues": [{"path": "/calls/1/input", "message": "Expected text"}],
    }
    assert feedback["up"]["error"]["code"] == "NOT_RUN"
    assert isinstance(sent[2].body["input"], str)  # the next turn starts afresh


def test_a_bad_finish_result_goes_back_as_the_output_of_the_finish_call(
    openai_example: ModuleType, responses_api: Any
) -> None:
    """`_finish` with a result the answer schema refuses is answered with its issue."""
    responses_api.respond(call("_finish", {"result": 42}, "done"))
    responses_api.respond(call("_finish", {"result": "forty-two"}, "done"))

    run, _ = traced_run(openai_example, {"question": "What is six times seven?"})

    assert run.status == "completed", run.errors
    assert run.value == {"answer": "forty-two"}
    feedback = outputs(responses_api.requests[1])
    assert list(feedback) == ["done"]
    assert feedback["done"]["error"]["code"] == "TUBELESS_AGENT_INVALID_RESULT"
    assert [issue["path"] for issue in feedback["done"]["issues"]] == ["/result"]


REPAIRABLE = [
    pytest.param(
        completed(call("uppercase", {"input": "red"}), call("count", {"input": 42})),
        "Agent tool count input validation failed",
        id="bad-second-argument",
    ),
    pytest.param(
        completed(
            call("uppercase", {"input": "red"}, "same"), call("count", {"input": "red"}, "same")
        ),
        "Duplicate agent call id: 'same'",
        id="duplicate-id",
    ),
    pytest.param(
        completed(call("_finish", {"result": 42})),
        "Agent finish result validation failed",
        id="answer-not-text",
    ),
]


@pytest.mark.parametrize(("body", "message"), REPAIRABLE)
def test_a_model_that_never_fixes_its_decision_fails_after_two_repairs(
    openai_example: ModuleType, responses_api: Any, body: Any, message: str
) -> None:
    """The same rejected answer three times: three requests, no tool started, then failure."""
    for _ in range(3):
        responses_api.reply_json(body)

    run, records = traced_run(openai_example, {})

    assert run.status == "failed"
    assert run.finalized is False
    text = json.dumps(run.to_dict()["errors"])
    assert message in text
    assert "Agent max_repairs=2 exceeded" in text
    assert len(responses_api.requests) == 3
    assert tool_starts(records) == []


def test_feedback_stays_within_its_byte_budget(openai_example: ModuleType) -> None:
    """Thirty-two long issues are cut to `MAX_FEEDBACK_BYTES`, outputs for every call kept."""
    decision = importlib.import_module("agent_openai_decision")
    issue = {"callId": "a", "tool": "count", "path": "/calls/0/input", "message": "é" * 500}
    rejection = {
        "code": "TUBELESS_AGENT_INVALID_ARGUMENTS",
        "message": "rejected",
        "attempt": 1,
        "issues": [issue] * 32,
    }

    texts = decision.feedback(rejection, ["a", "b"])

    assert sorted(texts) == ["a", "b"]
    size = sum(len(text.encode("utf-8")) for text in texts.values())
    assert size <= decision.MAX_FEEDBACK_BYTES
    assert len(json.loads(texts["a"])["issues"]) >= 1

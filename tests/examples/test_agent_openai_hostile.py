"""Hostile provider responses never leak: a marker in the body shows up nowhere.

Each scenario answers the OpenAI example, run through the real CLI with `--trace` and
`--store`, from the loopback fake Responses API with a body carrying a marker, and checks
stdout, stderr, the NDJSON trace and the SQLite store (its raw bytes and its records).
The marker goes everywhere in a response except the two places the recipe passes on by
contract: call ids (a call's `itemKey` in the trace) and the values tools and the final
answer are made of.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tubeless.trace import SqliteTraceStore, read_ndjson

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MARKER = "MARKER-c0ffee-7f3a"


def call(name: str, arguments: Any, call_id: str = "call-1", **extra: Any) -> dict[str, Any]:
    """A function call output item; `arguments` is JSON-encoded unless it is text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"type": "function_call", "name": name, "arguments": text, "call_id": call_id, **extra}


def completed(*output: Any, **extra: Any) -> dict[str, Any]:
    """A completed Responses API body."""
    return {"status": "completed", "output": list(output), **extra}


def _raw(status: int, body: bytes) -> Any:
    def reply(handler: Any, _request: Any) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return reply


FINISH = call("_finish", {"result": "done"}, "call-9")
SCENARIOS = [
    pytest.param([_raw(500, MARKER.encode())], id="http-error-body"),
    pytest.param([_raw(200, f"not json {MARKER}".encode())], id="invalid-json"),
    pytest.param([_raw(200, b"\xff\xfe" + MARKER.encode())], id="not-utf8"),
    pytest.param([_raw(200, (MARKER * 100_000).encode())], id="huge-body"),
    pytest.param([{"status": MARKER, "output": [MARKER]}], id="not-completed"),
    pytest.param([completed({"type": MARKER, "name": MARKER})], id="unknown-item"),
    pytest.param(
        [completed({"type": "message", "content": [{"type": "refusal", "refusal": MARKER}]})],
        id="refusal",
    ),
    pytest.param([completed(call(MARKER, {"input": "red"}))], id="unknown-tool"),
    pytest.param([completed(call(MARKER * 50_000, {"input": "red"}))], id="huge-tool-name"),
    pytest.param(
        [
            completed(
                call("uppercase", {"input": "red"}), call(f"x{MARKER}", {"input": "b"}, "call-2")
            )
        ],
        id="unknown-second-tool",
    ),
    pytest.param([completed(call("uppercase", "{" + MARKER))], id="arguments-not-json"),
    pytest.param(
        [completed(call("uppercase", {"input": "red", MARKER: MARKER}))], id="extra-argument"
    ),
    pytest.param([completed(call("uppercase", {MARKER: "red"}))], id="argument-renamed"),
    pytest.param([completed(call("uppercase", [MARKER]))], id="arguments-not-object"),
    # A rejected decision goes back to the model (twice, `max_repairs`), then fails.
    pytest.param(
        [completed(call("uppercase", {"input": {MARKER: [MARKER]}}))] * 3, id="input-wrong-type"
    ),
    pytest.param(
        [completed(call("count", {"input": MARKER * 3})), _raw(500, MARKER.encode())],
        id="tool-input-then-error-body",
    ),
    pytest.param(
        [completed(call("_finish", {"result": MARKER}), call("uppercase", {"input": "a"}))],
        id="finish-with-calls",
    ),
    pytest.param([completed(call("_finish", {"result": {MARKER: 1}}))] * 3, id="answer-not-text"),
    pytest.param(
        [
            completed(
                {"type": "reasoning", "summary": [MARKER]},
                call("uppercase", {"input": "red"}, extra_field=MARKER),
                id=MARKER,
                metadata={MARKER: MARKER},
            ),
            completed(FINISH, usage={"note": MARKER}),
        ],
        id="extra-fields-then-finish",
    ),
]


def _run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # The fixture set OPENAI_BASE_URL and OPENAI_API_KEY in this process's environment.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tubeless",
            "run",
            "--trace",
            str(tmp_path / "trace.ndjson"),
            "--store",
            str(tmp_path / "runs.sqlite"),
            "examples/agent_openai.py",
            "--",
            "--question",
            "Uppercase red",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _stored_bytes(tmp_path: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(tmp_path.glob("runs.sqlite*")))


@pytest.mark.parametrize("replies", SCENARIOS)
def test_no_part_of_a_hostile_response_reaches_any_output(
    responses_api: Any, tmp_path: Path, replies: list[Any]
) -> None:
    """stdout, stderr, the NDJSON trace and the SQLite store never hold the marker."""
    for reply in replies:
        responses_api.reply(reply if callable(reply) else _json_reply(responses_api, reply))

    result = _run(tmp_path)

    records = read_ndjson(tmp_path / "trace.ndjson")
    with SqliteTraceStore(tmp_path / "runs.sqlite", read_only=True) as store:
        stored = store.events()
    assert records and stored == records
    assert records[-1]["name"] == "pipeline.completed"
    for where, text in [
        ("stdout", result.stdout),
        ("stderr", result.stderr),
        ("trace", (tmp_path / "trace.ndjson").read_text("utf-8")),
        ("store records", json.dumps(stored, ensure_ascii=False)),
    ]:
        assert MARKER not in text, where
    assert MARKER.encode() not in _stored_bytes(tmp_path)
    assert len(responses_api.requests) == len(replies)


def _json_reply(api: Any, body: Any) -> Any:
    return lambda handler, _request: api.send_json(handler, body)


def test_the_extra_fields_scenario_really_finishes(responses_api: Any, tmp_path: Path) -> None:
    """The one scenario that succeeds prints its answer, so the others prove their failure."""
    responses_api.reply_json(completed(call("uppercase", {"input": "red"}), id=MARKER))
    responses_api.reply_json(completed(FINISH))

    result = _run(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"

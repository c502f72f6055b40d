"""`tubeless export otel` through the real CLI, to a real OTLP/HTTP receiver on loopback."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tubeless.trace import SqliteTraceStore

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent.py"
MARKER = "zebra7f3aquartz"
"""Goes into the options, so into tool inputs and results: it must never be exported."""


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class Receiver:
    """The spans an OTLP/HTTP endpoint received, decoded from their protobuf payloads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.refuse = False
        self.url = ""

    def take(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.paths.append(path)
            self.requests.append(request)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, as a dict of its fields, attributes and resource."""
        found = []
        with self.lock:
            requests = list(self.requests)
        for request in requests:
            for resource in request.resource_spans:
                service = {a.key: _value(a.value) for a in resource.resource.attributes}
                for scope in resource.scope_spans:
                    found += [self._span(span, service) for span in scope.spans]
        return found

    @staticmethod
    def _span(span: Any, resource: dict[str, Any]) -> dict[str, Any]:
        return {
            "traceId": span.trace_id.hex(),
            "spanId": span.span_id.hex(),
            "parentSpanId": span.parent_span_id.hex(),
            "name": span.name,
            "kind": span.kind,
            "start": span.start_time_unix_nano,
            "end": span.end_time_unix_nano,
            "status": span.status.code,
            "attributes": {a.key: _value(a.value) for a in span.attributes},
            "resource": resource,
        }

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.paths.clear()


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if receiver.refuse:
                self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            receiver.take(self.path, body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A loopback OTLP/HTTP receiver; `receiver.url` is its base URL."""
    made = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(made))
    made.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    yield made
    server.shutdown()
    server.server_close()
    thread.join()


ENV = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", "OPENAI_API_KEY": f"sk-{MARKER}"}


def _record(cli: Any, question: str) -> None:
    result = cli(
        "run", "--store", "runs.sqlite", "--trace", "trace.ndjson", str(EXAMPLE), "--",
        "--question", question, env=ENV,
    )  # fmt: skip
    assert result.code == 0, result.stderr


def _export(cli: Any, receiver: Receiver, *args: str) -> Any:
    return cli("export", "otel", *args, "--endpoint", receiver.url, env=ENV)


def _identity(spans: list[dict[str, Any]]) -> set[tuple[str, ...]]:
    return {(s["traceId"], s["spanId"], s["parentSpanId"], s["name"]) for s in spans}


def _stored(cli: Any) -> list[dict[str, Any]]:
    with SqliteTraceStore(cli.directory / "runs.sqlite", read_only=True) as store:
        return store.events()


def test_a_stored_run_is_delivered_whole_with_stable_ids(cli: Any, receiver: Receiver) -> None:
    """Every run of the store arrives as spans; a second export sends the same ids."""
    _record(cli, f"hello {MARKER}")
    result = _export(cli, receiver, "--store", "runs.sqlite")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == "Exported 12 spans of 6 runs.\n"
    first = receiver.spans()
    assert set(receiver.paths) == {"/v1/traces"}
    assert len(first) == 12
    assert len({span["spanId"] for span in first}) == 12
    run_ids = {record["runId"] for record in _stored(cli)}
    assert {s["attributes"].get("tubeless.run.id") for s in first} - {None} == run_ids
    names = sorted(span["name"] for span in first)
    assert names.count("execute_tool uppercase") == 2
    assert names[0] == "execute_tool count"
    assert "invoke_agent scripted-agent" in names
    receiver.clear()
    assert _export(cli, receiver, "--store", "runs.sqlite").code == 0
    assert _identity(receiver.spans()) == _identity(first)


def test_a_postgres_store_url_gives_the_same_spans_as_the_sqlite_store(
    cli: Any, receiver: Receiver, postgres_url: str
) -> None:
    """`--store postgresql://...` replays a run recorded there as the SQLite store does."""
    result = cli(
        "run", "--store", postgres_url, "--trace", "trace.ndjson", str(EXAMPLE), "--",
        "--question", "hello tubeless", env=ENV,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    exported = _export(cli, receiver, "--store", postgres_url)
    assert (exported.code, exported.stderr) == (0, "")
    from_postgres = receiver.spans()
    receiver.clear()
    assert _export(cli, receiver, "--trace", "trace.ndjson").code == 0
    assert len(from_postgres) == 12
    assert _identity(receiver.spans()) == _identity(from_postgres)


def test_an_ndjson_trace_gives_the_same_spans_as_the_store(cli: Any, receiver: Receiver) -> None:
    """`--trace FILE` replays the same records, so the same spans, as `--store FILE`."""
    _record(cli, "hello tubeless")
    assert _export(cli, receiver, "--store", "runs.sqlite").code == 0
    from_store = receiver.spans()
    receiver.clear()
    result = _export(cli, receiver, "--trace", "trace.ndjson")
    assert (result.code, result.stderr) == (0, "")
    from_trace = receiver.spans()
    assert _identity(from_trace) == _identity(from_store)
    assert sorted((s["spanId"], s["start"], s["end"], s["status"]) for s in from_trace) == sorted(
        (s["spanId"], s["start"], s["end"], s["status"]) for s in from_store
    )


LEAKY_MODULE = """
from tubeless import ToolError, define_agent, define_pipeline_command, define_tool
from tubeless.testing import scripted_decide

TEXT = {"type": "string"}


def echo(value, context):
    # Every place a handler can put data into the trace gets it.
    context.log.info(f"echo {value}")
    context.report_progress(1, 2, f"echoing {value}", [{"id": "row", "label": value}])
    context.report_attempt(1, {"input.echo": value})
    if value.endswith("!"):
        raise ToolError("NOT_FOUND", f"no {value}")
    return value.upper()


def decide(state, context):
    if context.turn > 1:
        return {"kind": "finish", "result": " ".join(state)}
    word = context.options["word"]
    return {"kind": "continue", "calls": [
        {"id": "plain", "tool": "echo", "input": word},
        {"id": "failing", "tool": "echo", "input": word + "!"},
    ]}


agent = define_agent(
    id="leaky",
    input_schema={"type": "object", "properties": {"word": TEXT}, "required": ["word"]},
    result_schema=TEXT,
    initial_state=lambda options: [],
    decide=decide,
    reduce=lambda state, outcomes: [str(o.get("value", o.get("error"))) for o in outcomes],
    tools={
        "echo": define_tool(description="Echo", input_schema=TEXT, output_schema=TEXT, run=echo)
    },
)
command = define_pipeline_command(agent)
"""


def test_no_option_input_output_or_secret_is_exported(cli: Any, receiver: Receiver) -> None:
    """A marker in options, inputs, results, logs, progress, attributes and errors is not sent."""
    cli.write("leaky.py", LEAKY_MODULE)
    result = cli(
        "run", "--store", "runs.sqlite", "leaky.py", "--", "--word", MARKER, env=ENV
    )  # fmt: skip
    assert result.code == 0, result.stderr
    stored = json.dumps(_stored(cli))
    for leak in (f"echo {MARKER}", f"echoing {MARKER}", f"no {MARKER}!", '"input.echo"'):
        assert leak in stored, f"the fixture no longer records {leak!r}: the test proves nothing"
    assert _export(cli, receiver, "--store", "runs.sqlite").code == 0
    spans = receiver.spans()
    assert len(spans) == 11
    assert "execute_tool echo" in {span["name"] for span in spans}
    text = json.dumps(spans, default=str).lower()
    assert MARKER not in text
    assert "input.echo" not in text


def test_a_run_id_selects_its_whole_run_tree(cli: Any, receiver: Receiver) -> None:
    """RUN_ID (even a turn's) exports the root agent run and all its children only."""
    _record(cli, "one")
    _record(cli, "two words")
    records = _stored(cli)
    started = [r for r in records if r["name"] == "pipeline.started"]
    roots = [r["runId"] for r in started if "parentRunId" not in r]
    second = roots[1]
    turn = next(r["runId"] for r in records if r.get("parentRunId") == second)
    result = _export(cli, receiver, "--store", "runs.sqlite", turn)
    assert (result.code, result.stdout) == (0, "Exported 12 spans of 6 runs.\n")
    spans = receiver.spans()
    assert {s["attributes"].get("tubeless.run.id") for s in spans} >= {second, turn}
    assert roots[0] not in {s["attributes"].get("tubeless.run.id") for s in spans}
    assert len({s["traceId"] for s in spans}) == 1


def test_an_unknown_run_or_a_missing_store_is_refused(cli: Any, receiver: Receiver) -> None:
    """An unknown RUN_ID is a usage error (1), a missing store a load error (2), nothing sent."""
    _record(cli, "hello")
    unknown = _export(cli, receiver, "--store", "runs.sqlite", "nope\x1b[31m")
    assert unknown.code == 1
    assert unknown.stderr.startswith('Error: Unknown run "nope[31m".') or (
        unknown.stderr.startswith('Error: Unknown run "nope')
    )
    assert "\x1b" not in unknown.stderr
    missing = _export(cli, receiver, "--store", "elsewhere.sqlite")
    assert missing.code == 2
    assert "Run store not found" in missing.stderr
    assert not (cli.directory / "elsewhere.sqlite").exists()
    bad = cli("export", "otel", "--store", "runs.sqlite", "--endpoint", "ftp://x", env=ENV)
    assert bad.code == 1
    assert "--endpoint must be an http:// or https:// URL" in bad.stderr
    assert receiver.spans() == []


def test_a_refusing_endpoint_is_an_execution_error(cli: Any, receiver: Receiver) -> None:
    """When the endpoint refuses the spans the CLI says so on stderr and exits 6."""
    _record(cli, "hello")
    receiver.refuse = True
    result = _export(cli, receiver, "--store", "runs.sqlite")
    assert result.code == 6
    assert "Error: The OTLP endpoint" in result.stderr
    assert "did not take 11 spans" in result.stderr
    assert "400" in result.stderr  # the exporter's own log line says why

"""Fixtures for the example tests: examples loaded by file path, and a fake Responses API."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib.util
import json
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The examples import their siblings; the CLI (and `python FILE`) put a module's own
# directory on sys.path before loading it, and so do these tests.
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

STALL_SECONDS = 30.0
"""Backstop for a stalled handler, so a broken test can never hang the server forever."""


def _load(name: str, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> ModuleType:
    """Import `examples/<name>.py` from its file path, as the CLI does, once per session."""
    module_name = f"tubeless_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    return _load(name, module_name)


@pytest.fixture
def load_fresh() -> Iterator[Callable[[str], ModuleType]]:
    """A function that executes an example module again, from its path, under a new name."""
    loaded: list[str] = []

    def load(name: str) -> ModuleType:
        module_name = f"tubeless_example_fresh_{len(loaded)}_{name}"
        loaded.append(module_name)
        return _load(name, module_name)

    yield load
    for module_name in loaded:
        sys.modules.pop(module_name, None)


@pytest.fixture(scope="session")
def scripted_example() -> ModuleType:
    """The scripted agent example module."""
    return load_example("agent")


@pytest.fixture(scope="session")
def openai_example() -> ModuleType:
    """The OpenAI agent example module."""
    return load_example("agent_openai")


@pytest.fixture(scope="session")
def delegation_example() -> ModuleType:
    """The delegation example module (planner, researcher subagent, summarizer)."""
    return load_example("agent_delegation")


@pytest.fixture(scope="session")
def http_example() -> ModuleType:
    """The interruptible HTTP POST module of the OpenAI example."""
    return load_example("interruptible_http")


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the fake server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    """The decoded JSON body (`None` when it was not JSON)."""
    size: int = 0
    """The body's length in bytes."""


Reply = Callable[[BaseHTTPRequestHandler, RecordedRequest], None]


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _handle(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            size=len(raw),
        )
        reply = self.server.fake.take(request)
        # OSError: the client cut the connection (cancellation or deadline).
        with contextlib.suppress(OSError):
            reply(self, request)

    def do_POST(self) -> None:
        """Record and answer a POST."""
        self._handle()

    def do_GET(self) -> None:
        """Record and answer a GET, which the adapter must never send."""
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output clean."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeResponsesApi) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self.handler_threads: list[threading.Thread] = []

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fake-responses-api-handler",
            daemon=True,
        )
        self.handler_threads.append(thread)
        thread.start()


class FakeResponsesApi:
    """A Responses API stand-in on 127.0.0.1 that answers queued replies and records requests.

    Each request takes the next queued reply; with none queued it gets `default`, else a
    500. Stalling replies block until `release` is set.
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._lock = threading.Lock()
        self._replies: collections.deque[Reply] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self.usages: list[dict[str, int]] = []
        """The `usage` of every `respond` reply sent, in order."""
        self.default: Reply | None = None
        self.stalled = threading.Event()
        """Set when a stalling reply has started to stall."""
        self.release = threading.Event()
        """Set to let stalled replies finish."""
        self._server = _Server(self)
        self._scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._serving = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-responses-api",
            daemon=True,
        )
        self._serving.start()

    @property
    def base_url(self) -> str:
        """The value for `OPENAI_BASE_URL`."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def take(self, request: RecordedRequest) -> Reply:
        """Record `request` and return the reply for it."""
        with self._lock:
            self._requests.append(request)
            if self._replies:
                return self._replies.popleft()
        if self.default is not None:
            return self.default
        return lambda handler, _: _send(handler, 500, b"no reply queued", "text/plain")

    def reply(self, reply: Reply) -> None:
        """Queue a reply function."""
        with self._lock:
            self._replies.append(reply)

    @staticmethod
    def send_json(handler: BaseHTTPRequestHandler, body: Any, status: int = 200) -> None:
        """Write `body` as a complete JSON response (for reply functions)."""
        _send(handler, status, json.dumps(body).encode(), "application/json")

    def respond(self, *output: Any) -> None:
        """Queue a completed Responses API body with these output items and a `usage`.

        The usage is made up from the exchange, a token per 4 bytes as a rough tokenizer
        would count: the request body's size in, the output items' JSON out.
        """

        def reply(handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
            usage = {
                "input_tokens": request.size // 4,
                "output_tokens": max(1, len(json.dumps(list(output))) // 4),
            }
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
            with self._lock:
                self.usages.append(usage)
            body = {"status": "completed", "output": list(output), "usage": usage}
            self.send_json(handler, body)

        self.reply(reply)

    def reply_json(self, body: Any, status: int = 200) -> None:
        """Queue a JSON response."""
        self.reply(lambda handler, _: self.send_json(handler, body, status))

    def reply_text(self, text: str, status: int) -> None:
        """Queue a plain-text response."""
        self.reply(lambda handler, _: _send(handler, status, text.encode(), "text/plain"))

    def stall_before_headers(self, _handler: BaseHTTPRequestHandler, _: RecordedRequest) -> None:
        """Reply: send nothing until released."""
        self.stalled.set()
        self.release.wait(STALL_SECONDS)

    def stall_mid_body(self, handler: BaseHTTPRequestHandler, _: RecordedRequest) -> None:
        """Reply: send the headers and part of the body, then nothing until released."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(b'{"status": "completed", ')
        handler.wfile.flush()
        self.stalled.set()
        self.release.wait(STALL_SECONDS)

    def join_handlers(self) -> None:
        """Release stalled replies and wait for every handler thread to end."""
        self.release.set()
        for thread in list(self._server.handler_threads):
            thread.join()

    def close(self) -> None:
        """Stop serving and join every server thread."""
        self.join_handlers()
        self._server.shutdown()
        self._server.server_close()
        self._serving.join()


def _serve(
    monkeypatch: pytest.MonkeyPatch, tls: ssl.SSLContext | None = None
) -> Iterator[FakeResponsesApi]:
    fake = FakeResponsesApi(tls)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-never-record")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_TIMEOUT_SECONDS", raising=False)
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def responses_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeResponsesApi]:
    """A fake Responses API over HTTP; `OPENAI_BASE_URL` points at it and a test key is set."""
    yield from _serve(monkeypatch)


@pytest.fixture
def tls_responses_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[FakeResponsesApi]:
    """The fake Responses API over HTTPS, with a throwaway certificate `requests` trusts."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command makes the test certificate")
    certificate, key = tmp_path / "certificate.pem", tmp_path / "key.pem"
    request = "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
    extension = "subjectAltName=IP:127.0.0.1"
    subprocess.run(
        [openssl, *request.split(), "-addext", extension, "-keyout", key, "-out", certificate],
        check=True,
        capture_output=True,
    )
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, key)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate))
    yield from _serve(monkeypatch, tls)

"""The OpenAI example's HTTP POST: deadline, cancellation and plain HTTP semantics."""

from __future__ import annotations

import socket
import threading
from types import ModuleType
from typing import Any

import pytest
import requests

from tubeless.errors import RunCancelledError

pytestmark = pytest.mark.slow

WAIT_SECONDS = 10.0
"""Generous bound for events that, when things work, happen within about a second."""

JSON = {"Content-Type": "application/json"}


def _post_in_thread(
    module: ModuleType, url: str, signal: threading.Event, deadline_seconds: float
) -> tuple[threading.Thread, threading.Event, dict[str, Any]]:
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["response"] = module.post(
                url, b"{}", headers=JSON, signal=signal, deadline_seconds=deadline_seconds
            )
        except Exception as error:
            outcome["error"] = error
        done.set()

    worker = threading.Thread(target=target, name="test-post")
    worker.start()
    return worker, done, outcome


def test_returns_status_and_body(http_example: ModuleType, responses_api: Any) -> None:
    """A complete response comes back as `(status, body)`, with the request sent as given."""
    responses_api.reply_json({"ok": True}, status=201)

    status, body = http_example.post(
        f"{responses_api.base_url}/responses",
        b'{"hello": "world"}',
        headers=JSON,
        auth=http_example.BearerAuth("token"),
        signal=threading.Event(),
        deadline_seconds=WAIT_SECONDS,
    )

    assert (status, body) == (201, b'{"ok": true}')
    (request,) = responses_api.requests
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == "Bearer token"
    assert request.body == {"hello": "world"}


def test_does_not_follow_redirects(http_example: ModuleType, responses_api: Any) -> None:
    """A redirect is returned as it is, never re-sent elsewhere."""

    def redirect(handler: Any, _: Any) -> None:
        handler.send_response(307)
        handler.send_header("Location", "/elsewhere")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    responses_api.reply(redirect)

    status, _ = http_example.post(
        responses_api.base_url, b"{}", headers=JSON, signal=threading.Event(), deadline_seconds=5
    )

    assert status == 307
    assert len(responses_api.requests) == 1


def test_a_set_signal_sends_nothing(http_example: ModuleType, responses_api: Any) -> None:
    """With the signal already set, no request is made."""
    signal = threading.Event()
    signal.set()

    with pytest.raises(RunCancelledError):
        http_example.post(
            responses_api.base_url, b"{}", headers=JSON, signal=signal, deadline_seconds=5
        )
    assert responses_api.requests == []


def test_transport_failures_raise_the_requests_error(http_example: ModuleType) -> None:
    """A refused connection raises the `requests` exception."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    with pytest.raises(requests.ConnectionError):
        http_example.post(
            f"http://127.0.0.1:{port}/",
            b"{}",
            headers=JSON,
            signal=threading.Event(),
            deadline_seconds=5,
        )


@pytest.mark.parametrize("stall", ["stall_before_headers", "stall_mid_body"])
def test_the_deadline_bounds_the_whole_request(
    http_example: ModuleType, responses_api: Any, stall: str
) -> None:
    """A response still incomplete at the deadline raises `TimeoutError`; no thread is left."""
    responses_api.reply(getattr(responses_api, stall))
    baseline = threading.active_count()

    worker, done, outcome = _post_in_thread(
        http_example, responses_api.base_url, threading.Event(), 0.5
    )
    # The server stalls for far longer: only the deadline can end the request this early.
    assert done.wait(WAIT_SECONDS)
    worker.join()

    assert isinstance(outcome["error"], TimeoutError)
    assert "0.5-second deadline" in str(outcome["error"])
    responses_api.join_handlers()
    assert threading.active_count() == baseline


@pytest.mark.parametrize("server", ["responses_api", "tls_responses_api"])
@pytest.mark.parametrize("stall", ["stall_before_headers", "stall_mid_body"])
def test_the_signal_aborts_a_stalled_request(
    http_example: ModuleType, request: pytest.FixtureRequest, server: str, stall: str
) -> None:
    """Over HTTP and HTTPS, setting the signal ends a stalled request; no thread is left."""
    fake = request.getfixturevalue(server)
    fake.reply(getattr(fake, stall))
    baseline = threading.active_count()
    signal = threading.Event()

    worker, done, outcome = _post_in_thread(http_example, fake.base_url, signal, 60)
    assert fake.stalled.wait(WAIT_SECONDS)
    signal.set()
    # The server is still stalling: only the abort can end the request this early.
    assert done.wait(WAIT_SECONDS)
    worker.join()

    assert isinstance(outcome["error"], RunCancelledError)
    fake.join_handlers()
    assert threading.active_count() == baseline


def test_talks_https(http_example: ModuleType, tls_responses_api: Any) -> None:
    """Over HTTPS, with a certificate `requests` trusts, a response comes back as over HTTP."""
    tls_responses_api.reply_json({"secure": True})

    status, body = http_example.post(
        tls_responses_api.base_url,
        b"{}",
        headers=JSON,
        signal=threading.Event(),
        deadline_seconds=WAIT_SECONDS,
    )

    assert (status, body) == (200, b'{"secure": true}')

"""One HTTP POST with `requests`, bounded by a whole-request deadline and a cancel signal.

`requests` only has per-socket timeouts: a server that trickles bytes, or stalls after the
headers, can hold a request far past any timeout, and a blocked socket read does not notice
another thread's flag. So the request runs on a worker thread while the calling thread waits
for it, for the run's signal, or for the deadline. On the last two the caller shuts the
request's socket down, which returns the worker's blocked read at once (whether the server
stalled before the headers or in the middle of the body), and then joins the worker: no
thread outlives the call.

Used by `agent_openai_decision.py`; nothing here is OpenAI-specific.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import requests
import requests.auth
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from tubeless import RunCancelledError

CONNECT_TIMEOUT_SECONDS = 5.0
"""Bound on opening the connection. Name resolution, the TCP connect and the TLS handshake
cannot be cut short, so a cancellation that arrives then waits for them to end."""

POLL_SECONDS = 0.1
"""How often the waiting thread looks at the cancel signal."""


class _InFlightRequest:
    """One request on its worker thread, and the sockets another thread may cut."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.response: tuple[int, bytes] | None = None
        self.error: Exception | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._aborted = False

    def attach(self, sock: socket.socket) -> None:
        """Track a connected socket of this request; cut it at once if already aborted."""
        with self._lock:
            if not self._aborted:
                if not any(known is sock for known in self._sockets):
                    self._sockets.append(sock)
                return
        _shut_down(sock)

    def abort(self) -> None:
        """Cut every socket of this request, now and on later connects."""
        with self._lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut_down(sock)


def _shut_down(sock: socket.socket) -> None:
    # The plain socket method, also for TLS sockets: it wakes the blocked reader without
    # touching the TLS state that the worker thread owns. OSError: already closed.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_worker = threading.local()
"""On a worker thread, `.request` is the `_InFlightRequest` that thread is sending."""


def _attach_to_current_request(sock: socket.socket) -> None:
    request: _InFlightRequest | None = getattr(_worker, "request", None)
    if request is not None:
        request.attach(sock)


class _TrackedHTTPConnection(HTTPConnection):
    """A urllib3 connection that hands its sockets to the request sent on this thread."""

    def _new_conn(self) -> socket.socket:
        # The TCP socket, as soon as it is connected (a proxy tunnel is set up on it).
        sock = super()._new_conn()
        _attach_to_current_request(sock)
        return sock

    def connect(self) -> None:
        super().connect()
        # For TLS this is a new socket object: wrapping detaches the TCP one above.
        if self.sock is not None:
            _attach_to_current_request(self.sock)


class _TrackedHTTPSConnection(_TrackedHTTPConnection, HTTPSConnection):
    """The TLS kind; its handshake is bounded by the connect timeout, not cut short."""


class _TrackedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


_TRACKED_POOLS = {"http": _TrackedHTTPConnectionPool, "https": _TrackedHTTPSConnectionPool}


class _TrackingAdapter(HTTPAdapter):
    """A `requests` transport adapter whose connections hand over their sockets."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _TRACKED_POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS managers bring their own pools
            manager.pool_classes_by_scheme = _TRACKED_POOLS
        return manager


class BearerAuth(requests.auth.AuthBase):
    """Sets `Authorization: Bearer <token>`.

    Passing the token as `auth` rather than as a header also stops `requests` from
    replacing it with credentials from a `.netrc` file.
    """

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request


def _send(
    request: _InFlightRequest,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    auth: requests.auth.AuthBase | None,
    deadline_seconds: float,
) -> None:
    """Worker thread: send the request and keep its status and body, or its error."""
    _worker.request = request
    try:
        with requests.Session() as session:
            adapter = _TrackingAdapter()
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            response = session.post(
                url,
                data=body,
                headers=dict(headers),
                auth=auth,
                # Per-socket backstops only; the caller enforces the whole-request deadline.
                timeout=(min(CONNECT_TIMEOUT_SECONDS, deadline_seconds), deadline_seconds),
                allow_redirects=False,
            )
            request.response = (response.status_code, response.content)
    except Exception as error:  # handed to the calling thread
        request.error = error
    finally:
        request.finished.set()


def _wait(request: _InFlightRequest, signal: threading.Event, deadline: float) -> str:
    """Wait for the worker; return `finished`, `cancelled` or `expired`."""
    while not request.finished.wait(max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))):
        if signal.is_set():
            return "cancelled"
        if time.monotonic() >= deadline:
            return "expired"
    return "finished"


def post(
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    auth: requests.auth.AuthBase | None = None,
    signal: threading.Event,
    deadline_seconds: float,
) -> tuple[int, bytes]:
    """POST `body` and return `(status, body)` of the complete response.

    No retries and no redirects: a 3xx comes back as it is.

    Args:
        url: where to post.
        body: the encoded request body.
        headers: request headers (`Content-Type` and the like).
        auth: a `requests` auth object, such as `BearerAuth`.
        signal: setting it aborts the request within about `POLL_SECONDS`.
        deadline_seconds: bound on the whole request, from connect to the last body byte.

    Raises:
        RunCancelledError: `signal` was set before the response was complete.
        TimeoutError: the deadline passed first.
        requests.RequestException: the request failed in transport.
    """
    if signal.is_set():
        raise RunCancelledError("HTTP request cancelled")
    request = _InFlightRequest()
    worker = threading.Thread(
        target=_send,
        args=(request, url, body, headers, auth, deadline_seconds),
        name="interruptible-http-post",
        daemon=True,
    )
    deadline = time.monotonic() + deadline_seconds
    worker.start()
    try:
        outcome = _wait(request, signal, deadline)
    finally:
        if not request.finished.is_set():
            request.abort()
        worker.join()
    if outcome == "cancelled":
        raise RunCancelledError("HTTP request cancelled")
    if outcome == "expired" or isinstance(request.error, requests.ReadTimeout):
        raise TimeoutError(f"HTTP request exceeded its {deadline_seconds:g}-second deadline")
    if request.error is not None:
        raise request.error
    assert request.response is not None
    return request.response

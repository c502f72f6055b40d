"""`examples/agent_web.py`: the real server on loopback, read by HTTP and by a real browser."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_web.py"
BACKSTOP = 60.0
"""Seconds before a stuck server or page fails the test instead of hanging it."""

pytestmark = pytest.mark.slow


class Server:
    """The example started as a process on a free loopback port."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=BACKSTOP)

    def events(self, path: str) -> list[dict[str, Any]]:
        """Every event of an SSE stream, read to its end."""
        with self.client.stream("GET", path) as reply:
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/event-stream")
            return [json.loads(line[5:]) for line in reply.iter_lines() if line.startswith("data:")]

    def run(self, run_id: str) -> dict[str, Any]:
        """The run's entry in `GET /runs`."""
        (found,) = [run for run in self.client.get("/runs").json() if run["run_id"] == run_id]
        return dict(found)

    def ended(self, run_id: str) -> dict[str, Any]:
        """The run's entry once it is no longer running (waited for with a backstop)."""
        done = threading.Event()
        for _ in range(int(BACKSTOP * 20)):
            found = self.run(run_id)
            if found["status"] != "running":
                return found
            done.wait(0.05)
        raise AssertionError(f"run {run_id} still running")

    def stop(self) -> str:
        """SIGINT, then the process's whole output once it exited."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        output, _ = self.process.communicate(timeout=BACKSTOP)
        return output


@contextlib.contextmanager
def serve(store: Path, *, delay: float) -> Iterator[Server]:
    """Start the example (`--port 0`), read its address, stop it at the end."""
    root = str(EXAMPLE.parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    flags = ["--port", "0", "--delay", str(delay), "--store-dir", str(store)]
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    if not first.startswith("Serving on "):
        process.kill()
        raise AssertionError(first + process.communicate()[0])
    server = Server(process, first.split()[-1])
    try:
        yield server
    finally:
        if process.poll() is None:
            server.stop()


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose `fetch` calls take 20 ms."""
    with serve(tmp_path_factory.mktemp("fast"), delay=0.02) as server:
        yield server


def test_the_events_arrive_in_order_and_end_with_the_run(fast: Server) -> None:
    """A run streamed as SSE: root, subagent and calls in order; the last event is the
    root's `run.finished`, and `/runs` lists the run as completed."""
    events = fast.events("/runs/stream?publish=false&pages=2&topic=tides")
    kinds = [(e["kind"], tuple(e["path"])) for e in events if e["kind"] != "call.progress"]
    sub = ("desk", "research", "researcher")
    assert kinds == [
        ("run.started", ("desk",)),
        ("turn.started", ("desk",)),
        ("decision", ("desk",)),
        ("call.started", ("desk", "research")),
        ("run.started", sub),
        ("turn.started", sub),
        ("decision", sub),
        ("call.started", (*sub, "page-1")),
        ("call.finished", (*sub, "page-1")),
        ("call.started", (*sub, "page-2")),
        ("call.finished", (*sub, "page-2")),
        ("turn.started", sub),
        ("decision", sub),
        ("run.finished", sub),
        ("call.finished", ("desk", "research")),
        ("turn.started", ("desk",)),
        ("decision", ("desk",)),
        ("run.finished", ("desk",)),
    ]
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    last = events[-1]
    assert last["status"] == "completed"
    assert fast.run(last["runId"])["status"] == "completed"


def test_a_bad_option_is_refused_before_a_run_starts(fast: Server) -> None:
    """`pages=many` is not an integer: `400`, and no run is started."""
    before = fast.client.get("/runs").json()
    reply = fast.client.get("/runs/stream?pages=many")
    assert reply.status_code == 400
    assert fast.client.get("/runs").json() == before


def test_approving_a_waiting_call_resumes_the_run(fast: Server) -> None:
    """A run that stops for approval lists its call in `/approvals`; `POST` approve
    resumes the execution, whose own events end with a completed run."""
    events = fast.events("/runs/stream?job=approve-me")
    assert [e["kind"] for e in events[-2:]] == ["approval.pending", "run.finished"]
    assert events[-1]["code"] == "TUBELESS_AGENT_APPROVAL_REQUIRED"
    assert fast.run(events[-1]["runId"])["status"] == "failed"
    waiting = [a for a in fast.client.get("/approvals").json() if a["job"] == "approve-me"]
    assert [(a["callId"], a["tool"]) for a in waiting] == [("publish-approve-me", "publish")]

    reply = fast.client.post("/approvals/publish-approve-me", json={"decision": "approve"})
    assert reply.status_code == 202
    resumed = fast.events(reply.json()["events"])
    finished = [e for e in resumed if e["kind"] == "call.finished"]
    assert [(e["callId"], e["ok"]) for e in finished] == [("publish-approve-me", True)]
    assert resumed[-1]["kind"] == "run.finished" and resumed[-1]["status"] == "completed"
    assert fast.ended(reply.json()["run_id"])["resumed"] is True
    assert all(a["job"] != "approve-me" for a in fast.client.get("/approvals").json())


def test_rejecting_a_waiting_call_runs_nothing_of_it(fast: Server) -> None:
    """`POST` reject with a message resumes the execution, the call ends rejected; a
    decision that is neither approve nor reject, or an unknown call, is refused."""
    fast.events("/runs/stream?job=reject-me&pages=1")
    call = "/approvals/publish-reject-me"
    assert fast.client.post(call, json={"decision": "maybe"}).status_code == 400
    assert fast.client.post("/approvals/nobody", json={"decision": "approve"}).status_code == 404
    reply = fast.client.post(call, json={"decision": "reject", "message": "not today"})
    assert reply.status_code == 202
    resumed = fast.events(reply.json()["events"])
    finished = [(e["callId"], e["ok"], e["code"]) for e in resumed if e["kind"] == "call.finished"]
    assert finished == [("publish-reject-me", False, "TUBELESS_AGENT_CALL_REJECTED")]
    assert resumed[-1]["status"] == "completed"


def test_a_client_that_disconnects_cancels_its_run(tmp_path: Path) -> None:
    """Leaving the stream while a minute-long call runs cancels the run: `/runs` says
    `cancelled`, and the server stops with nothing left to cancel."""
    with serve(tmp_path, delay=60.0) as server:
        with server.client.stream("GET", "/runs/stream?pages=1") as reply:
            run_id = reply.headers["x-run-id"]
            for line in reply.iter_lines():
                if line.startswith("data:") and json.loads(line[5:])["kind"] == "call.progress":
                    break
        assert server.run(run_id)["status"] in {"running", "cancelled"}
        assert server.ended(run_id)["status"] == "cancelled"
        assert server.ended(run_id)["code"] == "TUBELESS_RUN_CANCELLED"
        output = server.stop()
    assert server.process.returncode == 0
    assert "Stopped: 0 run(s) cancelled and joined" in output


def test_stopping_the_server_cancels_and_joins_its_runs(tmp_path: Path) -> None:
    """SIGINT while a client watches a minute-long call: the run is cancelled and
    joined, the client's stream ends with the cancelled run, and the process exits 0."""
    with serve(tmp_path, delay=60.0) as server:
        seen: list[dict[str, Any]] = []
        with server.client.stream("GET", "/runs/stream?pages=1") as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    seen.append(json.loads(line[5:]))
                    if seen[-1]["kind"] == "call.progress":
                        server.process.send_signal(signal.SIGINT)
        output = server.stop()
    assert server.process.returncode == 0, output
    assert "Stopped: 1 run(s) cancelled and joined" in output
    assert seen[-1]["kind"] == "run.finished" and seen[-1]["status"] == "cancelled"


BROWSER = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")


@pytest.mark.skipif(BROWSER is None or DRIVER is None, reason="needs chromium and chromedriver")
def test_the_page_shows_a_run_and_approves_its_call(tmp_path: Path) -> None:
    """In headless Chromium: start a run, see its events (the subagent's indented) end
    with the run waiting for approval, click Approve, see the resumed run complete."""
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = str(BROWSER)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    with serve(tmp_path / "store", delay=0.05) as server:
        browser = webdriver.Chrome(
            options=options, service=webdriver.ChromeService(executable_path=str(DRIVER))
        )
        try:
            wait = WebDriverWait(browser, BACKSTOP)
            browser.get(server.url)
            browser.find_element(By.ID, "start").click()
            wait.until(lambda b: b.find_element(By.ID, "status").get_attribute("data-status"))
            status = browser.find_element(By.ID, "status").text
            assert "failed" in status and "TUBELESS_AGENT_APPROVAL_REQUIRED" in status
            kinds = [
                e.get_attribute("data-kind")
                for e in browser.find_elements(By.CSS_SELECTOR, "#events li")
            ]
            assert kinds[0] == "run.started" and kinds[-2:] == ["approval.pending", "run.finished"]
            nested = browser.find_elements(
                By.CSS_SELECTOR, "#events li[style*='margin-left: 4.5em']"
            )
            assert nested, "the subagent's calls are indented by their path"

            approve = wait.until(
                lambda b: b.find_elements(By.CSS_SELECTOR, "#approvals li button.approve")
            )
            item = browser.find_element(By.CSS_SELECTOR, "#approvals li")
            assert str(item.get_attribute("data-call")).startswith("publish-job-")
            approve[0].click()
            wait.until(
                lambda b: (
                    b.find_element(By.ID, "status").get_attribute("data-status") == "completed"
                )
            )
            assert "completed" in browser.find_element(By.ID, "status").text
            wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, "#approvals li"))
            ok = browser.find_elements(By.CSS_SELECTOR, "#events li.call-ok")
            assert any("publish" in e.text for e in ok)
        finally:
            browser.quit()

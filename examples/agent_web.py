"""Watch runs live in a browser: a Starlette app over `pipeline.astream`.

Needs the `web` extra (`pip install "tubeless[web]"`: Starlette and uvicorn). From the
repository root::

    python examples/agent_web.py --port 8000 --delay 0.5 --store-dir /tmp/agent-web
    # open http://127.0.0.1:8000/ and press "Start a run"

It serves on 127.0.0.1 only (`--port 0` picks a free port; the first line printed is the
address). The page starts a run, shows its events as they happen (turns, decisions, calls
running and finished with their codes, the subagent's events indented by their path) and
lists the calls that wait for approval, with approve and reject buttons.

Routes:

- `GET /`: the page (inline HTML and JavaScript, nothing loaded from elsewhere).
- `GET /runs/stream?OPTION=VALUE...`: start a run of the agent below with these options
  (`job`, `topic`, `pages`, `publish`; `job` is the execution key, a fresh one when not
  given) and stream its events as Server-Sent Events: each `data:` line is one
  `RunEvent.to_dict()` as JSON, with its `kind` (the `X-Run-Id` header names the run).
  A client that disconnects cancels the run.
- `GET /runs`: the runs this server started, oldest first, as JSON: `run_id`, `status`
  (`running`, `completed`, `failed` or `cancelled`), `code`, `job`, `resumed`.
- `GET /runs/{run_id}/events`: the events of one of them so far, then live, as SSE (a
  disconnect here cancels nothing: the client only watches).
- `GET /approvals`: the calls waiting for approval in the store, as JSON
  (`PendingApproval.to_dict()` and the `job`).
- `POST /approvals/{call_id}` with `{"decision": "approve" | "reject", "message": ...}`:
  decide one call and resume its execution; answers `202` with the resumed run's
  `run_id` and the address of its events.

The agent (`desk`) is durable (a SQLite checkpoint store in `--store-dir`, a temporary
directory by default) and scripted, so no model or credential is needed: it asks a
subagent (`researcher`) to fetch `pages` pages with `fetch`, a tool that takes `--delay`
seconds and reports its progress, then calls `publish`, which waits for a person's
approval. Approving resumes the execution: `publish` runs and the agent finishes.

Nothing outlives the server: on shutdown (Ctrl-C, SIGTERM) every run still going is
cancelled and joined before the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tubeless import (
    DecisionContext,
    Durability,
    Pipeline,
    SqliteCheckpointStore,
    ToolContext,
    ToolError,
    approve,
    define_agent,
    define_tool,
    pipeline_tool,
    reject,
)
from tubeless.agent import Approval
from tubeless.errors import TubelessError
from tubeless.trace import RunEvent

KEEPALIVE_SECONDS = 1.0
"""An SSE comment goes out after this long without an event, so a gone client is noticed."""
STEPS = 4
"""Progress reports of one `fetch` call."""

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "job": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,40}$",
            "description": "The execution key: the same job resumes its execution.",
        },
        "topic": {"type": "string", "maxLength": 80, "default": "tides"},
        "pages": {"type": "integer", "minimum": 1, "maximum": 8, "default": 2},
        "publish": {"type": "boolean", "default": True},
    },
    "required": ["job"],
    "additionalProperties": False,
}
TEXT = {"type": "string"}
DEFAULTS = {"topic": "tides", "pages": 2, "publish": True}
"""The options' defaults (a schema's `default` documents them; the agent applies them)."""


def make_agent(store: SqliteCheckpointStore, *, delay: float) -> Pipeline:
    """The durable `desk` agent, its `researcher` subagent and their tools.

    Args:
        store: where the executions' checkpoints live.
        delay: how many seconds one `fetch` call takes.
    """

    def fetch(value: Mapping[str, Any], context: ToolContext) -> str:
        """Fetch one page slowly, reporting progress; stops early when cancelled."""
        for step in range(STEPS):
            context.report_progress(completed=step, total=STEPS, message=f"page {value['page']}")
            if context.signal.wait(delay / STEPS):
                raise ToolError("FETCH_CANCELLED", "the run was cancelled")
        return f"{value['topic']}, page {value['page']}"

    researcher = define_agent(
        id="researcher",
        description="Fetch the pages of a topic.",
        input_schema={
            "type": "object",
            "properties": {"topic": TEXT, "pages": {"type": "integer"}},
            "required": ["topic", "pages"],
        },
        result_schema={"type": "integer"},
        tools={
            "fetch": define_tool(
                description="Fetch one page of a topic (slowly).",
                input_schema={
                    "type": "object",
                    "properties": {"topic": TEXT, "page": {"type": "integer"}},
                    "required": ["topic", "page"],
                },
                output_schema=TEXT,
                run=fetch,
                replay="safe",
            )
        },
        limits={"max_turns": 2, "max_calls": 8, "max_concurrency": 2},
        initial_state=lambda options: {**options, "notes": None},
        decide=_research,
        reduce=lambda state, outcomes: {**state, "notes": sum(o["ok"] for o in outcomes)},
    )
    return define_agent(
        id="desk",
        name="News desk",
        description="Research a topic with a subagent, then publish after approval.",
        input_schema=OPTIONS_SCHEMA,
        result_schema=TEXT,
        tools={
            "research": pipeline_tool(researcher, description="Research a topic."),
            "publish": define_tool(
                description="Publish the notes of a job.",
                input_schema={"type": "object", "properties": {"job": TEXT}},
                output_schema=TEXT,
                run=lambda value, context: f"published {value['job']}",
                needs_approval=True,
            ),
        },
        limits={"max_turns": 4, "max_calls": 4, "max_depth": 1},
        initial_state=lambda options: {**DEFAULTS, **options, "notes": None, "outcome": None},
        decide=_desk,
        reduce=_note,
        implementation_version="1",
        durability=Durability(store=store, key=lambda options: options["job"]),
    )


def _research(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Fetch every page at once, then finish with how many came back."""
    if state["notes"] is None:
        calls = [
            {"id": f"page-{n}", "tool": "fetch", "input": {"topic": state["topic"], "page": n}}
            for n in range(1, state["pages"] + 1)
        ]
        return {"kind": "continue", "calls": calls}
    return {"kind": "finish", "result": state["notes"]}


def _desk(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Research, then publish (a call id unique to the job), then say what happened."""
    if state["notes"] is None:
        research = {"topic": state["topic"], "pages": state["pages"]}
        return {
            "kind": "continue",
            "calls": [{"id": "research", "tool": "research", "input": research}],
        }
    if state["publish"] and state["outcome"] is None:
        call = {"id": f"publish-{state['job']}", "tool": "publish", "input": {"job": state["job"]}}
        return {"kind": "continue", "calls": [call]}
    return {"kind": "finish", "result": f"{state['notes']} notes; {state['outcome'] or 'kept'}"}


def _note(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keep the research's count, or the publication's value (or its error code)."""
    (outcome,) = outcomes
    if outcome["tool"] == "research":
        return {**state, "notes": outcome["value"] if outcome["ok"] else 0}
    return {**state, "outcome": outcome["value"] if outcome["ok"] else outcome["error"]["code"]}


class WebRun:
    """One run this server started, and the events it produced so far."""

    def __init__(self, job: str, *, resumed: bool) -> None:
        self.job = job
        self.resumed = resumed
        self.run_id: str | None = None
        """The run's id, from its first event (a made-up one if it failed before any)."""
        self.status = "running"
        self.code: str | None = None
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Condition()
        self.started = asyncio.Event()
        """Set once `run_id` is known."""
        self.task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        """Whether the run returned (its last event is in `events`)."""
        return self.status != "running"

    def to_dict(self) -> dict[str, Any]:
        """The run as `GET /runs` lists it."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "code": self.code,
            "job": self.job,
            "resumed": self.resumed,
        }

    async def _news(self, sent: int) -> None:
        """Wait (holding `changed`) until there are events after `sent`, or the end."""
        await self.changed.wait_for(lambda: len(self.events) > sent or self.ended)

    async def follow(self) -> AsyncIterator[str]:
        """Its events as SSE messages, from the first, until the run ended.

        Between events a comment goes out every `KEEPALIVE_SECONDS`: writing to a gone
        client is how the server notices it left.
        """
        sent = 0
        while True:
            async with self.changed:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._news(sent), KEEPALIVE_SECONDS)
                fresh, ended = self.events[sent:], self.ended
            sent += len(fresh)
            for event in fresh:
                yield f"data: {json.dumps(event)}\n\n"
            if ended and sent == len(self.events):
                return
            if not fresh:
                yield ": keep-alive\n\n"


class Runs:
    """The runs of one server: started, followed, cancelled and joined here.

    Args:
        agent: the durable agent the runs are of.
        store: its checkpoint store (read for the pending approvals).
        directory: where `executions.json` keeps the options of each job, so a decided
            approval resumes its execution with the options it started with.
    """

    def __init__(self, agent: Pipeline, store: SqliteCheckpointStore, directory: Path) -> None:
        self.agent = agent
        self.store = store
        self._jobs_file = directory / "executions.json"
        self._runs: list[WebRun] = []
        self._numbers = itertools.count(1)

    def jobs(self) -> dict[str, dict[str, Any]]:
        """The options of each job started with this store directory."""
        if not self._jobs_file.exists():
            return {}
        jobs: dict[str, dict[str, Any]] = json.loads(self._jobs_file.read_text("utf-8"))
        return jobs

    def _remember(self, job: str, options: Mapping[str, Any]) -> None:
        jobs = {**self.jobs(), job: dict(options)}
        partial = self._jobs_file.with_suffix(".tmp")
        partial.write_text(json.dumps(jobs, indent=1), "utf-8")
        os.replace(partial, self._jobs_file)  # never half-written

    def listed(self) -> list[dict[str, Any]]:
        """Every run, oldest first, as `GET /runs` shows them."""
        return [run.to_dict() for run in self._runs]

    def find(self, run_id: str) -> WebRun | None:
        """The run with this id, if this server started it."""
        return next((run for run in self._runs if run.run_id == run_id), None)

    async def start(
        self, options: dict[str, Any], *, approvals: Mapping[str, Any] | None = None
    ) -> WebRun:
        """Start a run (or resume a job with decided approvals); returns once it has an id."""
        job = str(options.setdefault("job", f"job-{next(self._numbers)}-{secrets.token_hex(3)}"))
        if approvals is None:
            self._remember(job, options)
        run = WebRun(job, resumed=approvals is not None)
        self._runs.append(run)
        context = {"approvals": dict(approvals)} if approvals else None
        run.task = asyncio.create_task(self._drive(run, options, context))
        try:
            await run.started.wait()
        except asyncio.CancelledError:  # the client left before the first event
            run.task.cancel()
            raise
        return run

    async def _drive(
        self, run: WebRun, options: Mapping[str, Any], context: Mapping[str, Any] | None
    ) -> None:
        """Read the run's events into `run.events`; cancelling this task cancels the run."""
        stream = self.agent.astream(options, context=context)
        try:
            async with stream as events:
                async for event in events:
                    await self._add(run, event)
            result = stream.result
        except asyncio.CancelledError:
            # The stream was left before its end: the run is cancelled and joined, and
            # its last events were not read, so the run's end is told here.
            with contextlib.suppress(RuntimeError):
                result = stream.result
                event = _finished(result)
                run.status, run.code = result.status, event.code
                last = run.events[-1] if run.events else {}
                if last.get("kind") != "run.finished" or len(last["path"]) > 1:
                    await self._add(run, event)
            raise
        except Exception as error:  # the run raised instead of returning
            run.status, run.code = "failed", getattr(error, "code", type(error).__name__)
        else:
            run.status = result.status
            run.code = next((e.get("code") for e in run.events[-1:]), None)
        finally:
            if run.run_id is None:
                run.run_id = f"unstarted-{secrets.token_hex(4)}"
            if not run.ended:  # cancelled before its stream had begun
                run.status, run.code = "cancelled", "TUBELESS_RUN_CANCELLED"
            run.started.set()
            async with run.changed:
                run.changed.notify_all()

    @staticmethod
    async def _add(run: WebRun, event: RunEvent) -> None:
        if run.run_id is None:
            run.run_id = event.run_id
            run.started.set()
        async with run.changed:
            run.events.append(event.to_dict())
            run.changed.notify_all()

    def pending(self) -> list[dict[str, Any]]:
        """Every call waiting for approval in the store, with its job."""
        keys = self.store.keys()
        return [
            {**approval.to_dict(), "job": key}
            for key in keys
            for approval in self.store.pending_approvals(key)
        ]

    async def close(self) -> int:
        """Cancel every run still going and wait for each to end; returns how many."""
        tasks = [run.task for run in self._runs if run.task is not None and not run.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)


def _finished(result: Any) -> RunEvent:
    """The `run.finished` event of a run whose stream was left before its end."""
    return RunEvent(
        kind="run.finished",
        run_id=result.run_id,
        path=(result.pipeline_id,),
        at=result.finished_at_ms,
        status=result.status,
        code="TUBELESS_RUN_CANCELLED" if result.status == "cancelled" else None,
        duration_ms=result.finished_at_ms - result.started_at_ms,
    )


class EventStream(StreamingResponse):
    """A run's events as Server-Sent Events; with `cancels`, a client that leaves before
    the run's end cancels the run."""

    def __init__(self, run: WebRun, *, cancels: bool) -> None:
        super().__init__(
            run.follow(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Run-Id": str(run.run_id)},
        )
        self.run = run
        self.cancels = cancels

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the events; on the way out (the end, or the client gone) cancel the run."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            task = self.run.task
            if self.cancels and not self.run.ended and task is not None:
                task.cancel()


def options_from(query: Mapping[str, str]) -> dict[str, Any]:
    """The run's options from the query string, typed by the options schema.

    Raises:
        ValueError: for an integer or boolean option that is not one.
    """
    properties: Mapping[str, Any] = OPTIONS_SCHEMA["properties"]
    options: dict[str, Any] = {}
    for name, text in query.items():
        kind = properties.get(name, {}).get("type")
        if kind == "integer":
            options[name] = int(text)
        elif kind == "boolean":
            if text.lower() not in {"true", "false", "1", "0"}:
                raise ValueError(f"{name} must be true or false")
            options[name] = text.lower() in {"true", "1"}
        else:  # a string, or an unknown option the run's validation refuses
            options[name] = text
    return options


async def _approval(request: Request) -> Approval | Response:
    """The decision of a `POST /approvals/{call_id}`, or the `400` answer to a bad one."""
    try:
        body = await request.json()
        decision = body["decision"]
        if decision not in {"approve", "reject"}:
            raise ValueError("decision must be approve or reject")
        return approve() if decision == "approve" else reject(body.get("message"))
    except TubelessError as error:
        return JSONResponse({"error": str(error), "code": error.code}, status_code=400)
    except (ValueError, KeyError, TypeError, AttributeError):
        return JSONResponse(
            {"error": 'send {"decision": "approve" | "reject", "message": ...}'},
            status_code=400,
        )


async def page(request: Request) -> Response:
    """`GET /`: the page."""
    return HTMLResponse(PAGE)


async def stream(request: Request) -> Response:
    """`GET /runs/stream?OPTION=VALUE...`: start a run, stream its events."""
    runs: Runs = request.app.state.runs
    try:
        options = options_from(request.query_params)
    except ValueError as error:
        return JSONResponse({"error": str(error)}, status_code=400)
    return EventStream(await runs.start(options), cancels=True)


async def listed(request: Request) -> Response:
    """`GET /runs`: the runs this server started."""
    runs: Runs = request.app.state.runs
    return JSONResponse(runs.listed())


async def events(request: Request) -> Response:
    """`GET /runs/{run_id}/events`: one run's events (leaving cancels nothing)."""
    runs: Runs = request.app.state.runs
    run = runs.find(request.path_params["run_id"])
    if run is None:
        return JSONResponse({"error": "no such run"}, status_code=404)
    return EventStream(run, cancels=False)


async def approvals(request: Request) -> Response:
    """`GET /approvals`: the calls waiting for approval."""
    runs: Runs = request.app.state.runs
    return JSONResponse(runs.pending())


async def decide(request: Request) -> Response:
    """`POST /approvals/{call_id}`: decide a call and resume its execution."""
    runs: Runs = request.app.state.runs
    call_id = request.path_params["call_id"]
    approval = await _approval(request)
    if isinstance(approval, Response):
        return approval
    waiting = next((p for p in runs.pending() if p["callId"] == call_id), None)
    if waiting is None:
        return JSONResponse({"error": "no such call waits for approval"}, status_code=404)
    options = runs.jobs().get(waiting["job"])
    if options is None:
        return JSONResponse({"error": "the job was started elsewhere"}, status_code=409)
    run = await runs.start(options, approvals={call_id: approval})
    reply = {"run_id": run.run_id, "events": f"/runs/{run.run_id}/events"}
    return JSONResponse(reply, status_code=202)


def make_app(*, store_dir: Path, delay: float) -> Starlette:
    """The Starlette app; its `state.runs` holds the runs it started.

    Args:
        store_dir: the directory of the checkpoint store (`checkpoints.db`) and of
            `executions.json` (each job's options).
        delay: how many seconds one `fetch` call takes.
    """
    store = SqliteCheckpointStore(store_dir / "checkpoints.db")
    runs = Runs(make_agent(store, delay=delay), store, store_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await runs.close()

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/runs/stream", stream),
            Route("/runs", listed),
            Route("/runs/{run_id}/events", events),
            Route("/approvals", approvals),
            Route("/approvals/{call_id}", decide, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.runs = runs
    return app


async def serve(app: Starlette, port: int) -> None:
    """Serve `app` on 127.0.0.1 until SIGINT or SIGTERM; print the address once bound.

    On the way out every run still going is cancelled first (so its event streams end
    and their connections close), then joined.
    """
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=10
        )
    )
    runs: Runs = app.state.runs

    async def watch() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        host, bound = server.servers[0].sockets[0].getsockname()[:2]
        print(f"Serving on http://{host}:{bound}/", flush=True)
        while not server.should_exit:
            await asyncio.sleep(0.05)
        cancelled = await runs.close()
        print(f"Stopped: {cancelled} run(s) cancelled and joined", flush=True)

    watcher = asyncio.create_task(watch())
    try:
        await server.serve()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


def main(argv: Sequence[str] | None = None) -> int:
    """`python examples/agent_web.py [--port N] [--delay S] [--store-dir DIR]`."""
    parser = argparse.ArgumentParser(description="Watch runs of a durable agent live.")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per fetch call")
    parser.add_argument("--store-dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        store_dir: Path = args.store_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-web-"))
        )
        store_dir.mkdir(parents=True, exist_ok=True)
        # uvicorn raises a caught SIGINT again once it stopped: that is the way out.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(make_app(store_dir=store_dir, delay=args.delay), args.port))
    return 0


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tubeless: watch a run</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; max-width: 60em; }
  #events li { list-style: none; font-family: monospace; }
  .call-running { color: #a60; } .call-ok { color: #070; } .call-error { color: #b00; }
  .kind { display: inline-block; min-width: 9em; font-weight: bold; }
  section { margin-top: 1.5em; }
</style>
</head>
<body>
<h1>Watch a run</h1>
<form id="form">
  <label>Topic <input name="topic" value="tides" maxlength="80"></label>
  <label>Pages <input name="pages" type="number" min="1" max="8" value="2"></label>
  <label><input name="publish" type="checkbox" checked> publish (needs approval)</label>
  <button id="start" type="submit">Start a run</button>
</form>
<p id="status">No run yet.</p>
<section><h2>Events</h2><ol id="events"></ol></section>
<section><h2>Waiting for approval</h2>
  <p id="no-approvals">Nothing waits.</p><ul id="approvals"></ul></section>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const calls = new Map();

function line(event) {
  const depth = event.path.length - 1;
  const item = document.createElement("li");
  item.style.marginLeft = (depth * 1.5) + "em";
  item.className = "event";
  item.dataset.kind = event.kind;
  const kind = document.createElement("span");
  kind.className = "kind";
  kind.textContent = event.kind;
  item.append(kind, " " + describe(event));
  return item;
}

function describe(event) {
  const where = event.path.join(" / ");
  switch (event.kind) {
    case "turn.started": return where + ", turn " + event.turn;
    case "decision": return where + ": " + event.decision + " (" + event.callCount + " call(s))";
    case "call.started": return event.tool + " " + event.callId + ": running";
    case "call.finished":
      return event.tool + " " + event.callId + ": " + (event.ok ? "ok" : event.code) +
        " in " + event.durationMs + " ms";
    case "approval.pending": return event.tool + " " + event.callId + " waits for approval";
    case "run.finished":
      return where + ": " + event.status + (event.code ? " " + event.code : "");
    default: return where;
  }
}

function show(event) {
  const key = event.path.join("/");
  if (event.kind === "call.progress") {
    const item = calls.get(key);
    if (item) {
      item.lastChild.textContent = " " + event.tool + " " + event.callId + ": running " +
        event.completed + "/" + event.total;
    }
    return;
  }
  const item = line(event);
  if (event.kind === "call.started") { item.classList.add("call-running"); calls.set(key, item); }
  if (event.kind === "call.finished") {
    const started = calls.get(key);
    if (started) {
      started.classList.replace("call-running", "call-done");
      started.lastChild.textContent = " " + event.tool + " " + event.callId + ": started";
    }
    item.classList.add(event.ok ? "call-ok" : "call-error");
  }
  $("events").append(item);
}

function watch(url) {
  const source = new EventSource(url);
  $("status").textContent = "Running...";
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    show(event);
    if (event.kind === "run.finished" && event.path.length === 1) {
      source.close();  // the stream ends here; never let EventSource start a new run
      $("status").textContent = "Run " + event.runId + ": " + event.status +
        (event.code ? " (" + event.code + ")" : "");
      $("status").dataset.status = event.status;
      refreshApprovals();
    }
  };
  source.onerror = () => { source.close(); $("status").textContent = "Disconnected."; };
}

async function refreshApprovals() {
  const pending = await (await fetch("/approvals")).json();
  const list = $("approvals");
  list.replaceChildren();
  $("no-approvals").hidden = pending.length > 0;
  for (const call of pending) {
    const item = document.createElement("li");
    item.dataset.call = call.callId;
    const approve = document.createElement("button");
    approve.className = "approve";
    approve.textContent = "Approve";
    approve.onclick = () => decide(call.callId, {decision: "approve"});
    const message = document.createElement("input");
    message.value = "Not now";
    const reject = document.createElement("button");
    reject.className = "reject";
    reject.textContent = "Reject";
    reject.onclick = () => decide(call.callId, {decision: "reject", message: message.value});
    item.append(call.tool + " " + call.callId + " (job " + call.job + ") ", approve, " ",
      message, reject);
    list.append(item);
  }
}

async function decide(callId, body) {
  const reply = await fetch("/approvals/" + encodeURIComponent(callId), {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  });
  const answer = await reply.json();
  if (!reply.ok) { $("status").textContent = answer.error; return; }
  await refreshApprovals();
  watch(answer.events);
}

$("form").onsubmit = (submitted) => {
  submitted.preventDefault();
  const form = new FormData($("form"));
  const query = new URLSearchParams({
    topic: form.get("topic"), pages: form.get("pages"), publish: form.has("publish"),
  });
  $("events").replaceChildren();
  calls.clear();
  watch("/runs/stream?" + query);
};
refreshApprovals();
</script>
</body>
</html>
"""
"""The one page: a form, the events of the run it started, the calls waiting for approval."""

if __name__ == "__main__":
    raise SystemExit(main())

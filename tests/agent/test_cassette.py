"""Cassettes: record an agent tree's decisions and outcomes, replay them without `decide`."""

from __future__ import annotations

import json
import pathlib
import threading
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.errors import CassetteError, ReplayDivergedError, ToolError
from tubeless.pipeline import PipelineRun
from tubeless.testing import Cassette, CassetteDocument, MemoryTraceSink, scripted_decide

TEXT = {"type": "string"}
TASK = {"type": "object", "properties": {"task": {"type": "string"}}}


class Counting:
    """A `decide` that counts its calls and plays a script."""

    def __init__(self, script: list[Any]) -> None:
        self.calls = 0
        self._script = scripted_decide(script)
        self._lock = threading.Lock()

    def __call__(self, state: Any, context: Any) -> Any:
        with self._lock:
            self.calls += 1
        return self._script(state, context)


def _shout(value: str, context: Any) -> str:
    if value == "missing":
        raise ToolError("NOT_FOUND", "no such word")
    return value.upper()


def _tools(run: Any = _shout) -> dict[str, Any]:
    return {
        "shout": define_tool(
            description="Shout", input_schema=TEXT, output_schema=TEXT, run=run, dry_run=run
        )
    }


def _agent(
    decide: Any, tools: dict[str, Any] | None = None, agent_id: str = "root", **more: Any
) -> Any:
    return define_agent(
        id=agent_id,
        input_schema=TASK,
        result_schema=TEXT,
        initial_state=lambda options: {"seen": []},
        decide=decide,
        tools=_tools() if tools is None else tools,
        reduce=lambda state, outcomes: {"seen": [*state["seen"], *outcomes]},
        limits={"max_concurrency": 2},
        **more,
    )


SCRIPT = [
    {
        "kind": "continue",
        "calls": [
            {"id": "a", "tool": "shout", "input": "red"},
            {"id": "b", "tool": "shout", "input": "missing"},
        ],
    },
    {"kind": "finish", "result": "done"},
]


def _run(agent: Any, cassette: Cassette, **context: Any) -> PipelineRun:
    run: PipelineRun = agent.run({"task": "t"}, context={"cassette": cassette, **context})
    return run


def _cause(run: PipelineRun) -> BaseException:
    """The innermost exception behind a failed run."""
    error: BaseException | None = run.first_exception()
    assert error is not None
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def _diverged(run: PipelineRun) -> ReplayDivergedError:
    error = run.first_exception()
    for _ in range(20):
        if isinstance(error, ReplayDivergedError):
            return error
        assert error is not None, run.to_dict()["errors"]
        below = error.__cause__
        if below is None and hasattr(error, "result"):
            below = error.result.first_exception()
        error = below
    raise AssertionError(f"no divergence in {run.to_dict()['errors']}")


def test_records_then_replays_without_calling_decide(tmp_path: pathlib.Path) -> None:
    """`auto` records when the file is absent, then replays it without calling `decide`."""
    path = tmp_path / "run.json"
    decide = Counting(SCRIPT)
    first = _run(_agent(decide), Cassette(path))
    assert first.status == "completed" and decide.calls == 2
    document = json.loads(path.read_text("utf-8"))
    (agent,) = document["agents"]
    assert agent["path"] == "root"
    assert [turn["turn"] for turn in agent["turns"]] == [1, 2]
    assert agent["turns"][0]["outcomes"] == [
        {"id": "a", "tool": "shout", "ok": True, "value": "RED"},
        {
            "id": "b",
            "tool": "shout",
            "ok": False,
            "error": {"code": "NOT_FOUND", "message": "no such word"},
        },
    ]
    replayed = _run(_agent(Counting([])), Cassette(path))
    assert replayed.status == "completed", replayed.to_dict()["errors"]
    assert replayed.value == first.value == "done"


def test_the_file_is_stable_sorted_json(tmp_path: pathlib.Path) -> None:
    """Recording twice gives the same bytes: sorted keys, indented, one trailing newline."""
    texts = []
    for name in ("one.json", "two.json"):
        _run(_agent(Counting(SCRIPT)), Cassette(tmp_path / name, mode="record"))
        texts.append((tmp_path / name).read_text("utf-8"))
    assert texts[0] == texts[1]
    assert texts[0].endswith("}\n") and texts[0].startswith('{\n  "agents"')
    assert CassetteDocument.from_text(texts[0]).to_text() == texts[0]


def test_record_mode_records_again_over_an_existing_file(tmp_path: pathlib.Path) -> None:
    """`record` runs `decide` and rewrites the file even when one exists."""
    path = tmp_path / "run.json"
    path.write_text("not json", "utf-8")
    decide = Counting(SCRIPT)
    assert _run(_agent(decide), Cassette(path, mode="record")).status == "completed"
    assert decide.calls == 2
    assert CassetteDocument.from_text(path.read_text("utf-8")).agents[0].path == "root"


def test_replay_mode_needs_the_file(tmp_path: pathlib.Path) -> None:
    """`replay` without a file fails with `TUBELESS_CASSETTE_INVALID` and calls nothing."""
    decide = Counting(SCRIPT)
    run = _run(_agent(decide), Cassette(tmp_path / "absent.json", mode="replay"))
    assert run.status == "failed" and decide.calls == 0
    error = _cause(run)
    assert isinstance(error, CassetteError) and error.code == "TUBELESS_CASSETTE_INVALID"
    assert "does not exist" in str(error)


def test_a_changed_tool_diverges_naming_path_turn_and_call(tmp_path: pathlib.Path) -> None:
    """Live tools that return something else fail the replay, naming where and what."""
    path = tmp_path / "run.json"
    _run(_agent(Counting(SCRIPT)), Cassette(path))
    changed = _agent(Counting([]), _tools(lambda value, context: value.lower()))
    run = _run(changed, Cassette(path))
    assert run.status == "failed"
    error = _diverged(run)
    assert error.code == "TUBELESS_REPLAY_DIVERGED"
    assert (error.agent_path, error.turn, error.call_id) == ("root", 1, "a")
    assert "returned" in error.difference and "RED" in error.difference
    assert "'root', turn 1, call 'a'" in str(error)


def test_tools_replay_runs_no_tool(tmp_path: pathlib.Path) -> None:
    """With `tools="replay"` the recorded outcomes stand in for the tools."""
    path = tmp_path / "run.json"
    _run(_agent(Counting(SCRIPT)), Cassette(path))
    ran: list[str] = []

    def never(value: str, context: Any) -> str:
        ran.append(value)
        return "other"

    sink = MemoryTraceSink()
    run = _run(_agent(Counting([]), _tools(never)), Cassette(path, tools="replay"), tracing=sink)
    assert run.status == "completed", run.to_dict()["errors"]
    assert ran == []
    replayed = [
        record
        for record in sink.records
        if record["name"] == "step.attempted"
        and record["payload"].get("attributes", {}).get("agent.replayed")
    ]
    assert len(replayed) == 2


def test_a_missing_decision_diverges(tmp_path: pathlib.Path) -> None:
    """A replay that needs a turn the cassette lacks names the agent and the turn."""
    path = tmp_path / "run.json"
    document = {
        "tubelessCassette": 1,
        "agents": [
            {
                "path": "root",
                "turns": [
                    {
                        "turn": 1,
                        "decision": SCRIPT[0],
                        "outcomes": [
                            {"id": "a", "tool": "shout", "ok": True, "value": "RED"},
                            {
                                "id": "b",
                                "tool": "shout",
                                "ok": False,
                                "error": {"code": "NOT_FOUND", "message": "no such word"},
                            },
                        ],
                    }
                ],
            }
        ],
    }
    path.write_text(json.dumps(document), "utf-8")
    run = _run(_agent(Counting([])), Cassette(path))
    error = _diverged(run)
    assert (error.agent_path, error.turn, error.call_id) == ("root", 2, None)
    assert "no decision" in error.difference


def test_unreached_turns_diverge(tmp_path: pathlib.Path) -> None:
    """Recorded turns the replay never reached (another agent id) fail the run."""
    path = tmp_path / "run.json"
    _run(_agent(Counting(SCRIPT)), Cassette(path))
    run = _run(_agent(Counting([]), agent_id="renamed"), Cassette(path))
    error = _diverged(run)
    assert error.agent_path == "renamed" and "no agent at this path" in error.difference


def test_subagents_are_recorded_per_path(tmp_path: pathlib.Path) -> None:
    """A subagent's turns are kept at `<parent>/<turn>/<call id>` and replayed there."""
    path = tmp_path / "tree.json"
    child_script = [
        {"kind": "continue", "calls": [{"id": "x", "tool": "shout", "input": "deep"}]},
        {"kind": "finish", "result": "child done"},
    ]
    parent_script = [
        {"kind": "continue", "calls": [{"id": "ask", "tool": "child", "input": {"task": "go"}}]},
        {"kind": "finish", "result": "done"},
    ]

    def tree(child_decide: Any, parent_decide: Any) -> Any:
        child = _agent(child_decide, agent_id="child")
        return _agent(
            parent_decide, {"child": pipeline_tool(child, description="Delegate")}, "parent"
        )

    recorded = _run(tree(Counting(child_script), Counting(parent_script)), Cassette(path))
    assert recorded.status == "completed", recorded.to_dict()["errors"]
    document = CassetteDocument.from_text(path.read_text("utf-8"))
    assert [agent.path for agent in document.agents] == ["parent", "parent/1/ask"]
    child_turn = document.agents[1].turns[0]
    assert child_turn.outcomes == ({"id": "x", "tool": "shout", "ok": True, "value": "DEEP"},)
    child_decide, parent_decide = Counting([]), Counting([])
    replayed = _run(tree(child_decide, parent_decide), Cassette(path, tools="replay"))
    assert replayed.status == "completed", replayed.to_dict()["errors"]
    assert child_decide.calls == parent_decide.calls == 0


def test_dry_runs_and_failed_runs_write_nothing(tmp_path: pathlib.Path) -> None:
    """A dry run and a run that fails leave no file (and no temporary file) behind."""
    path = tmp_path / "run.json"
    decide = Counting(SCRIPT)
    agent = _agent(decide, dry_run=decide)
    dry = agent.run({"task": "t"}, controls={"dry_run": True}, context={"cassette": Cassette(path)})
    assert dry.status == "completed" and decide.calls == 2

    def explode(value: str, context: Any) -> str:
        raise RuntimeError("boom")

    failed = _run(_agent(Counting(SCRIPT), _tools(explode)), Cassette(path))
    assert failed.status == "failed"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[]", "must be an object"),
        ('{"tubelessCassette": 2, "agents": []}', "format"),
        (
            '{"tubelessCassette": 1, "agents": [{"path": "a", "turns": [{"turn": 2, '
            '"decision": {"kind": "finish", "result": 1}}]}]}',
            "numbered",
        ),
        ('{"tubelessCassette": 1, "agents": [], "secret": 1}', "unknown keys"),
        ('{"tubelessCassette": NaN, "agents": []}', "not JSON"),
    ],
)
def test_malformed_files_are_refused(tmp_path: pathlib.Path, text: str, fragment: str) -> None:
    """A malformed cassette fails the replay with `TUBELESS_CASSETTE_INVALID`, naming why."""
    path = tmp_path / "bad.json"
    path.write_text(text, "utf-8")
    decide = Counting(SCRIPT)
    run = _run(_agent(decide), Cassette(path))
    error = _cause(run)
    assert isinstance(error, CassetteError) and error.code == "TUBELESS_CASSETTE_INVALID"
    assert fragment in str(error) and decide.calls == 0


def test_bad_arguments_are_coded() -> None:
    """An unknown mode or tools value is refused when the cassette is made."""
    with pytest.raises(CassetteError, match="mode"):
        Cassette("x.json", mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(CassetteError, match="tools"):
        Cassette("x.json", tools="mocked")  # type: ignore[arg-type]


def test_context_refuses_something_else_as_a_cassette() -> None:
    """`context={"cassette": ...}` takes only a cassette."""
    with pytest.raises(TypeError, match="cassette"):
        _agent(Counting(SCRIPT)).run({"task": "t"}, context={"cassette": "run.json"})


def test_a_resumed_durable_execution_is_refused(tmp_path: pathlib.Path) -> None:
    """A durable execution that resumes from its journal cannot be recorded mid-way."""
    from tubeless.agent import Durability
    from tubeless.testing import MemoryCheckpointStore

    store = MemoryCheckpointStore()
    blocked = threading.Event()

    def stop_once(value: str, context: Any) -> str:
        if not blocked.is_set():
            blocked.set()
            raise RuntimeError("crash")
        return value

    def durable() -> Any:
        return _agent(
            Counting(SCRIPT),
            _tools(stop_once),
            implementation_version="1",
            durability=Durability(store=store, key=lambda options: "k"),
        )

    assert durable().run({"task": "t"}).status == "failed"
    run = _run(durable(), Cassette(tmp_path / "run.json"))
    error = _cause(run)
    assert isinstance(error, CassetteError) and "resumes from its journal" in str(error)
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("word", ["héllo wörld ✓", "lone \udc80 surrogate"])
def test_any_text_round_trips(tmp_path: pathlib.Path, word: str) -> None:
    """Non-ASCII text stays readable in the file, and even a lone surrogate replays."""
    path = tmp_path / "text.json"
    script = [
        {"kind": "continue", "calls": [{"id": "a", "tool": "shout", "input": word}]},
        {"kind": "finish", "result": "done"},
    ]
    assert _run(_agent(Counting(script)), Cassette(path)).status == "completed"
    text = path.read_text("utf-8")
    assert ("héllo" in text) == word.startswith("h")
    replayed = _run(_agent(Counting([])), Cassette(path))
    assert replayed.status == "completed", replayed.to_dict()["errors"]


@pytest.mark.parametrize("tools", ["live", "replay"])
def test_an_outcome_of_another_tool_diverges(tmp_path: pathlib.Path, tools: Any) -> None:
    """A recorded outcome whose tool is not the call's names the call and both tools."""
    path = tmp_path / "run.json"
    _run(_agent(Counting(SCRIPT)), Cassette(path))
    document = json.loads(path.read_text("utf-8"))
    document["agents"][0]["turns"][0]["outcomes"][1]["tool"] = "whisper"
    path.write_text(json.dumps(document), "utf-8")
    error = _diverged(_run(_agent(Counting([])), Cassette(path, tools=tools)))
    assert (error.agent_path, error.turn, error.call_id) == ("root", 1, "b")
    assert "'shout', recorded 'whisper'" in error.difference


def test_an_agent_inside_a_pipeline_shares_the_cassette(tmp_path: pathlib.Path) -> None:
    """A cassette given to an outer pipeline reaches the agent it runs as a child."""
    from tubeless.pipeline import create_steps, define_pipeline

    def outer(decide: Any) -> Any:
        step = create_steps().from_pipeline(
            "ask", pipeline=_agent(decide), map_options=lambda inputs, context: {"task": "t"}
        )
        return define_pipeline(id="outer", steps=[step], finalize=step)

    path = tmp_path / "outer.json"
    decide = Counting(SCRIPT)
    assert outer(decide).run_or_raise(context={"cassette": Cassette(path)}) == "done"
    assert CassetteDocument.from_text(path.read_text("utf-8")).agents[0].path == "root"
    replay = Counting([])
    assert outer(replay).run_or_raise(context={"cassette": Cassette(path)}) == "done"
    assert decide.calls == 2 and replay.calls == 0


def test_a_durable_agent_records_and_replays_with_fresh_keys(tmp_path: pathlib.Path) -> None:
    """A durable agent journals as usual while a cassette records or replays it."""
    from tubeless.agent import Durability
    from tubeless.testing import MemoryCheckpointStore

    store = MemoryCheckpointStore()

    def durable(decide: Any, key: str) -> Any:
        return _agent(
            decide,
            implementation_version="1",
            durability=Durability(store=store, key=lambda options: key),
        )

    path = tmp_path / "durable.json"
    assert (
        durable(Counting(SCRIPT), "first").run_or_raise(
            {"task": "t"}, context={"cassette": Cassette(path)}
        )
        == "done"
    )
    replay = Counting([])
    assert (
        durable(replay, "second").run_or_raise({"task": "t"}, context={"cassette": Cassette(path)})
        == "done"
    )
    assert replay.calls == 0
    assert store.checkpoint("first") is not None and store.checkpoint("second") is not None

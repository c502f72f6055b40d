"""`assert_trajectory`: the calls a recorded run made, compared three ways."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tubeless.agent import define_agent, define_tool, pipeline_tool
from tubeless.testing import Cassette, CassetteDocument, assert_trajectory, scripted_decide

TEXT = {"type": "string"}
TASK = {"type": "object", "properties": {"task": {"type": "string"}}}


def _agent(agent_id: str, script: list[Any], tools: dict[str, Any]) -> Any:
    return define_agent(
        id=agent_id,
        input_schema=TASK,
        result_schema=TEXT,
        initial_state=lambda options: {},
        decide=scripted_decide(script),
        tools=tools,
    )


def _call(call_id: str, tool: str, value: Any) -> dict[str, Any]:
    return {"id": call_id, "tool": tool, "input": value}


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Cassette:
    """A recorded tree: `echo(a)`, then a subagent that calls `echo(deep)`, then `echo(z)`."""
    echo = define_tool(
        description="Echo", input_schema=TEXT, output_schema=TEXT, run=lambda v, c: v
    )
    child = _agent(
        "child",
        [
            {"kind": "continue", "calls": [_call("d", "echo", "deep")]},
            {"kind": "finish", "result": "ok"},
        ],
        {"echo": echo},
    )
    root = _agent(
        "root",
        [
            {
                "kind": "continue",
                "calls": [_call("a", "echo", "a"), _call("s", "sub", {"task": "t"})],
            },
            {"kind": "continue", "calls": [_call("z", "echo", "z")]},
            {"kind": "finish", "result": "done"},
        ],
        {"echo": echo, "sub": pipeline_tool(child, description="Delegate")},
    )
    cassette = Cassette(tmp_path_factory.mktemp("trajectory") / "tree.json", mode="record")
    run = root.run({"task": "t"}, context={"cassette": cassette})
    assert run.status == "completed", run.to_dict()["errors"]
    return cassette


def test_exact_reads_the_tree_depth_first(cassette: Cassette) -> None:
    """A subagent's calls follow the call that started it, inputs as the model gave them."""
    assert_trajectory(
        cassette, [("echo", "a"), ("sub", {"task": "t"}), ("echo", "deep"), ("echo", "z")]
    )
    assert_trajectory(cassette, ["echo", "sub", "echo", "echo"])


def test_exact_fails_showing_both_sequences(cassette: Cassette) -> None:
    """A missing call fails, and the message lists expected and actual calls."""
    with pytest.raises(AssertionError) as failure:
        assert_trajectory(cassette, [("echo", "a"), ("echo", "z")])
    text = str(failure.value)
    assert "Expected:\n  1. echo '\"a\"'\n  2. echo '\"z\"'\nActual:\n  1. echo" in text
    assert "4. echo '\"z\"'" in text


def test_in_order_allows_calls_between(cassette: Cassette) -> None:
    """`in_order` passes with calls between, and fails when the order is wrong."""
    assert_trajectory(cassette, [("echo", "a"), ("echo", "z")], match="in_order")
    with pytest.raises(AssertionError, match="in_order"):
        assert_trajectory(cassette, [("echo", "z"), ("echo", "a")], match="in_order")


def test_any_order_counts_each_call_once(cassette: Cassette) -> None:
    """`any_order` ignores order but needs a distinct call for each expected one."""
    assert_trajectory(cassette, [("echo", "z"), "sub", ("echo", "a")], match="any_order")
    assert_trajectory(cassette, ["echo", "echo", "echo"], match="any_order")
    with pytest.raises(AssertionError):
        assert_trajectory(cassette, ["echo"] * 4, match="any_order")


def test_args_false_compares_names_only(cassette: Cassette) -> None:
    """With `args=False` inputs are ignored; with inputs compared, a wrong one fails."""
    wrong = [("echo", "x"), ("sub", None), ("echo", "y"), ("echo", "w")]
    assert_trajectory(cassette, wrong, args=False)
    with pytest.raises(AssertionError):
        assert_trajectory(cassette, wrong)


def test_a_document_works_as_well(cassette: Cassette, tmp_path: pathlib.Path) -> None:
    """A document read from the file gives the same calls as the cassette that wrote it."""
    document = CassetteDocument.from_text(cassette.path.read_text("utf-8"))
    assert_trajectory(document, ["echo", "sub", "echo", "echo"])


def test_bad_arguments_are_refused(tmp_path: pathlib.Path) -> None:
    """An unknown match, a malformed expected call or an unused cassette is a `ValueError`."""
    with pytest.raises(ValueError, match="match"):
        assert_trajectory(Cassette(tmp_path / "x.json"), [], match="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="completed run"):
        assert_trajectory(Cassette(tmp_path / "x.json"), [])
    document = CassetteDocument(agents=())
    with pytest.raises(ValueError, match="expected call"):
        assert_trajectory(document, [("echo",)])  # type: ignore[list-item]

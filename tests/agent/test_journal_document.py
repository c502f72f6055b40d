"""The typed checkpoint document: every saved point reads into its parts and back unchanged.

`Checkpoint.from_dict` is the one checked read of a checkpoint and `to_dict` the one JSON
form the journal saves; a real durable agent's checkpoint, at every write a process could
have died after, must survive the round trip exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import tubeless
from tubeless.agent._journal_access import checkpoint_calls
from tubeless.agent._journal_document import Checkpoint, read_checkpoint
from tubeless.errors import AgentError
from tubeless.testing import MemoryCheckpointStore

sys.path.insert(0, str(Path(__file__).parent))

from test_journal_changes import KEY, Ran, build, run_to_the_end


@pytest.mark.parametrize("approval", [False, True])
def test_every_saved_point_reads_into_parts_and_back_unchanged(approval: bool) -> None:
    whole_store = MemoryCheckpointStore(changes=False)
    assert run_to_the_end(whole_store, approval=approval)
    total = whole_store.writes
    seen_calls = 0
    for writes in range(1, total + 1):
        store = MemoryCheckpointStore(fail_after=writes, changes=False)
        build(store, Ran(), approval=approval).run({})
        text = store.checkpoint(KEY)
        assert text is not None
        saved = json.loads(text)
        checkpoint = read_checkpoint(text)
        assert checkpoint.to_dict() == saved, f"after write {writes}"
        assert list(checkpoint.to_dict()) == list(saved)
        seen_calls += len(checkpoint_calls(checkpoint))
    assert seen_calls > 0


def test_a_rejected_call_and_the_log_of_decisions_read_back_typed() -> None:
    store = MemoryCheckpointStore()
    agent = build(store, Ran(), approval=True, turns=1)
    assert agent.run({}).status == "failed"
    waiting = read_checkpoint(store.checkpoint(KEY) or "")
    (call,) = [call for call in checkpoint_calls(waiting) if call.waiting]
    assert (call.id, call.tool, call.decision) == ("b", "send", None)
    run = agent.run({}, context={"approvals": {"b": tubeless.reject("not now")}})
    assert run.status == "completed", run.errors
    done = read_checkpoint(store.checkpoint(KEY) or "")
    (record,) = done.decisions_of("b")
    assert (record.kind, record.message, record.agent, record.turn) == (
        "reject",
        "not now",
        "changes",
        1,
    )
    assert done.finished and done.agent is not None
    assert done.agent.totals == (2, 2, 0)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda node: node["spent"].update(calls=-1), "agent has a malformed budget"),
        (lambda node: node.update(turn={"index": 1}), "agent has a malformed turn"),
        (lambda node: node.update(failure={"code": 1}), "agent has a malformed failure"),
        (lambda node: node["spent"].update(usage={"cost": 1}), "agent has a malformed usage"),
    ],
)
def test_a_damaged_part_is_a_coded_error_naming_where(damage: object, problem: str) -> None:
    store = MemoryCheckpointStore()
    build(store, Ran(), turns=1).run({})
    saved = json.loads(store.checkpoint(KEY) or "")
    damage(saved["agent"])  # type: ignore[operator]
    with pytest.raises(AgentError, match=problem) as raised:
        Checkpoint.from_dict(saved)
    assert raised.value.code == "TUBELESS_AGENT_CHECKPOINT_INVALID"

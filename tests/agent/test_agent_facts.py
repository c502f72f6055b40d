"""What an agent is travels on its definition, not in process-wide registries."""

from __future__ import annotations

import pathlib
from typing import Any

from tubeless.agent import Durability, SqliteCheckpointStore, _delegate, define_agent, define_tool
from tubeless.agent._delegate import agent_definitions, agent_facts
from tubeless.pipeline import create_steps, define_pipeline


def _finish(state: Any, context: Any) -> Any:
    return {"finish": {"result": {}}}


def _agent(agent_id: str, **extra: Any) -> Any:
    tool = define_tool(
        description="Send",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        run=lambda value, context: {},
        needs_approval=extra.pop("needs_approval", False),
    )
    return define_agent(
        id=agent_id,
        input_schema={"type": "object"},
        result_schema={"type": "object"},
        initial_state=lambda options: {},
        decide=_finish,
        reduce=lambda state, outcomes, context: state,
        tools={"send": tool},
        implementation_version="1",
        **extra,
    )


def test_an_agent_carries_its_facts_and_a_pipeline_carries_none(tmp_path: pathlib.Path) -> None:
    """`agent_facts` reads durable/approvals from the agent's own step; plain pipelines: None."""
    store = SqliteCheckpointStore(tmp_path / "c.db")
    plain = _agent("plain")
    durable = _agent(
        "durable", durability=Durability(store=store, key=lambda options: "k"), needs_approval=True
    )
    pipeline = define_pipeline(id="p", steps=[create_steps()("s", run=lambda i, c: 1)])

    plain_facts, durable_facts = agent_facts(plain), agent_facts(durable)
    assert plain_facts is not None and durable_facts is not None
    assert (plain_facts.durable, plain_facts.approvals) == (False, False)
    assert (durable_facts.durable, durable_facts.approvals) == (True, True)
    assert durable_facts.definition_id == durable.definition.identity.definition_id
    assert agent_facts(pipeline) is None


def test_nested_agents_are_found_through_wrapper_steps() -> None:
    """An agent nested by `from_pipeline` is among the definitions a pipeline tool knows."""
    agent = _agent("inner")
    outer = create_steps()
    wrapper = define_pipeline(id="wrap", steps=[outer.from_pipeline("run", pipeline=agent)])

    assert agent_definitions(wrapper) == {agent.definition.identity.definition_id}
    assert agent_definitions(
        define_pipeline(id="none", steps=[outer("s", run=lambda i, c: 1)])
    ) == (frozenset())


def test_defining_agents_grows_no_module_level_container() -> None:
    """No set, dict or list at module level of `_delegate` changes when agents are defined."""
    containers = {
        name: len(value)
        for name, value in vars(_delegate).items()
        if isinstance(value, (set, dict, list)) and not name.startswith("__")
    }
    for index in range(3):
        _agent(f"many-{index}")
    after = {
        name: len(value)
        for name, value in vars(_delegate).items()
        if isinstance(value, (set, dict, list)) and not name.startswith("__")
    }
    assert after == containers
    assert not hasattr(_delegate, "AGENT_DEFINITIONS")

"""Delegation: a planner agent hands work to a researcher subagent and to a plain pipeline.

From the repository root::

    python -m tubeless run examples/agent_delegation.py -- --topic pipelines
    python -m tubeless plan examples/agent_delegation.py

prints `pipelines: 2 facts, 11 words` and the plan; `--topic unknown` shows the
researcher's expected `NOT_FOUND` failure turned into an answer: `unknown: 1 fact, 2 words`.

The planner (`max_calls=6`) registers two pipeline tools:

- `research` is the `researcher` agent, a subagent. Its arguments `{"question": ...}` are
  validated by the tool's own schema, mapped to the researcher's options, and validated
  again by the researcher's options schema, for the whole batch before anything starts.
  The researcher runs its own `lookup` handler tool; its calls count against the
  planner's budget too, so the whole tree can never spend more than 6 calls.
- `summarize` is an ordinary pipeline (`words -> summary`) whose options are the model's
  arguments as they are.

Every decision is scripted, so no model or credential is needed; replace the `decide`
callbacks with model adapters (see `agent_openai.py`) to delegate for real.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_tools import text, text_answer

from tubeless import (
    DecisionContext,
    SchemaIssues,
    ToolContext,
    ToolError,
    create_steps,
    define_agent,
    define_pipeline,
    define_pipeline_command,
    define_tool,
    pipeline_tool,
)
from tubeless.schema import validator

LIBRARY = {
    "pipelines": ("steps run in dependency order", "each run records its own trace"),
    "agents": ("an agent is a pipeline",),
}
"""What the researcher's `lookup` tool knows (an in-process stand-in for a search API)."""


def _topic_options(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise SchemaIssues(["Expected options"])
    topic = value.get("topic", "pipelines")
    if not isinstance(topic, str) or not topic.strip():
        raise SchemaIssues([{"message": "Expected a topic", "path": ["topic"]}])
    return {"topic": topic}


topic_options = validator(
    _topic_options,
    json_schema={
        "type": "object",
        "properties": {"topic": {"type": "string", "description": "What to research."}},
    },
    vendor="example",
)
"""Options of the planner and of the researcher: `{"topic": str}`, default `pipelines`."""


def lookup(topic: str, context: ToolContext) -> str:
    """Return the facts the library has on `topic`, joined by "; "."""
    facts = LIBRARY.get(topic)
    if facts is None:
        raise ToolError("NOT_FOUND", "No facts on that topic")
    return "; ".join(facts)


def research(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Look the topic up once, then finish with what was found (or the error)."""
    if not state["found"]:
        return {
            "kind": "continue",
            "calls": [{"id": "lookup", "tool": "lookup", "input": state["topic"]}],
        }
    outcome = state["found"][0]
    result = outcome["value"] if outcome["ok"] else f"nothing ({outcome['error']['code']})"
    return {"kind": "finish", "result": result}


researcher = define_agent(
    id="researcher",
    name="Researcher",
    description="Look a topic up and report the facts found.",
    input_schema=topic_options,
    result_schema=text,
    tools={
        "lookup": define_tool(
            description="Look up the facts on a topic.",
            input_schema=text,
            output_schema=text,
            run=lookup,
            dry_run=lookup,
        )
    },
    limits={"max_turns": 2, "max_calls": 2},
    initial_state=lambda options: {"topic": options["topic"], "found": []},
    decide=research,
    dry_run=research,
    reduce=lambda state, outcomes: {**state, "found": list(outcomes)},
)
"""The subagent: one `lookup` call, then finish."""


def _count_words(inputs: Mapping[str, Any], context: Any) -> int:
    return len(context.options["text"].split())


def _summary(inputs: Mapping[str, Any], context: Any) -> str:
    facts = len(context.options["text"].split("; "))
    return f"{facts} fact{'s' if facts != 1 else ''}, {inputs['words']} words"


_steps = create_steps(
    {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
)
_words = _steps.step("words", run=_count_words, dry_run=_count_words)
_summarize = _steps.step("summary", run=_summary, dry_run=_summary, depends_on=[_words])
summarizer = define_pipeline(
    id="summarizer",
    description="Count the facts and words of a text.",
    steps=[_words, _summarize],
    finalize=_summarize,
)
"""An ordinary pipeline, registered as the planner's `summarize` tool."""


def plan_work(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Research first, then summarize the findings, then finish."""
    topic = state["topic"]
    if not state["notes"]:
        call = {"id": "research-1", "tool": "research", "input": {"question": topic}}
        return {"kind": "continue", "calls": [call]}
    if len(state["notes"]) == 1:
        call = {"id": "summary-1", "tool": "summarize", "input": {"text": state["notes"][0]}}
        return {"kind": "continue", "calls": [call]}
    return {"kind": "finish", "result": f"{topic}: {state['notes'][1]}"}


def take_notes(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Keep each outcome's value (or its error code) as a note."""
    notes = [str(o["value"]) if o["ok"] else o["error"]["code"] for o in outcomes]
    return {**state, "notes": state["notes"] + notes}


planner_tools = {
    "research": pipeline_tool(
        researcher,
        description="Research a question with the researcher agent.",
        input_schema={
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
            "additionalProperties": False,
        },
        map_options=lambda arguments: {"topic": arguments["question"]},
    ),
    "summarize": pipeline_tool(summarizer, description="Count facts and words of a text."),
}
"""The planner's tools: a subagent and an ordinary pipeline."""


planner = define_agent(
    id="planner",
    name="Planner",
    description="Delegate research to a subagent and summarizing to a pipeline.",
    input_schema=topic_options,
    result_schema=text_answer,
    tools=planner_tools,
    limits={"max_turns": 3, "max_calls": 6, "max_depth": 1, "max_concurrency": 2},
    initial_state=lambda options: {"topic": options["topic"], "notes": []},
    decide=plan_work,
    dry_run=plan_work,
    reduce=take_notes,
)
"""The planner: research -> summarize -> finish, with one budget for the whole tree."""

command = define_pipeline_command(planner, summarize=lambda value, values: [value["answer"]])
"""The CLI command: `--topic` comes from the options schema; prints the bare answer."""


if __name__ == "__main__":
    raise SystemExit(command.main())

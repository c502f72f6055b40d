"""A scripted agent: the whole agent loop, with a `decide` that needs no model or credentials.

From the repository root::

    python -m tubeless run examples/agent.py -- --question "hello tubeless"
    python -m tubeless run examples/agent.py -- --question "missing word"
    python -m tubeless run examples/agent.py -- --dry-run --question "preview"
    python -m tubeless plan examples/agent.py

print `14 characters; HELLO; TUBELESS`, `12 characters; Observed NOT_FOUND: Word unavailable;
WORD`, `7 characters; PREVIEW` and the plan.

Turn 1 asks for a batch whose size depends on the question: one `count` call, then one
`uppercase` call per word. The harness validates every argument before any tool starts, runs
the calls (two at a time) and hands the reducer their outcomes in decision order, the
expected `NOT_FOUND` failure included. Turn 2 finishes with the observations joined by "; ",
and the answer schema turns that text into `{"answer": text}`.

To connect a model, replace `scripted_decision` with a callback that asks one:
`agent_openai.py` does that with the same tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_tools import question_options, text_answer, text_tools

from tubeless import DecisionContext, define_agent, define_pipeline_command


def start(options: Mapping[str, str]) -> dict[str, Any]:
    """Return the first state: the validated question and no observations yet."""
    return {"question": options["question"], "observations": []}


def scripted_decision(state: Mapping[str, Any], context: DecisionContext) -> dict[str, Any]:
    """Decide the next step from the state alone, as a model adapter would.

    The harness treats the return value as untrusted data and checks it, so a model
    adapter can return exactly these shapes.
    """
    if state["observations"]:
        return {"kind": "finish", "result": "; ".join(state["observations"])}
    question = state["question"]
    calls = [{"id": "length", "tool": "count", "input": question}]
    calls += [
        {"id": f"word-{index}", "tool": "uppercase", "input": word}
        for index, word in enumerate(question.split())
    ]
    return {"kind": "continue", "calls": calls}


def _observation(outcome: Mapping[str, Any]) -> str:
    if not outcome["ok"]:
        error = outcome["error"]
        return f"Observed {error['code']}: {error['message']}"
    if outcome["tool"] == "count":
        return f"{outcome['value']} characters"
    return str(outcome["value"])


def observe(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Replace the observations with one line per outcome of the batch just run."""
    return {**state, "observations": [_observation(outcome) for outcome in outcomes]}


agent = define_agent(
    id="scripted-agent",
    name="Scripted agent",
    description="Run a dynamic tool batch, reduce its outcomes and finish, without credentials.",
    input_schema=question_options,
    result_schema=text_answer,
    tools=text_tools,
    limits={"max_turns": 3, "max_calls": 100, "max_decisions": 3, "max_concurrency": 2},
    initial_state=start,
    decide=scripted_decision,
    # The scripted decision has no side effects, so it also previews: dry runs execute
    # the loop with the tools' preview handlers.
    dry_run=scripted_decision,
    reduce=observe,
)
"""The agent: an ordinary pipeline with one step, `agent`."""

command = define_pipeline_command(agent, summarize=lambda value, values: [value["answer"]])
"""The CLI command: `--question` comes from the options schema; prints the bare answer."""


if __name__ == "__main__":
    raise SystemExit(command.main())

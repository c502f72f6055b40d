"""The OpenAI recipe: the scripted example's tools, with a model choosing the calls.

A model decides which tools to call, with which arguments and how many per turn, through the
Responses API (`agent_openai_decision.py`, application code over `requests`). tubeless owns
the state and the loop: every decision is one stateless request carrying the question and
all outcomes so far, and tubeless validates what comes back before any tool runs.

Live run (makes paid API requests)::

    export OPENAI_API_KEY=...
    python -m tubeless run examples/agent_openai.py -- --question "Uppercase red, blue and
    green in separate calls. Then count the characters of the results joined by spaces."

`plan`, `inspect` and `graph` need no key and make no request; neither does importing this
module. There is no preview decision source, so `--dry-run` skips the agent and fails for
want of an answer: use `agent.py` for a credential-free preview.

Model input is bounded in UTF-8 bytes: the question by 4 KiB (before any request), the
observation history by 16 KiB (before the next state is committed), and the whole encoded
request body by 32 KiB (before every request). These are application budgets, not token
counts. Tokens are bounded too: each request reserves its bounds against the agent's
`max_total_tokens` before it is sent and settles with the response's `usage`, so
`run.usage` (and `tubeless history`) gives what the run consumed.

A decision tubeless rejects (a bad argument, a duplicate call id, a final answer the answer
schema refuses) goes back to the model at most twice (`max_repairs`): nothing of it runs,
and the next request answers each of the model's function calls with its issues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_openai_decision import encode_json, openai_decision
from agent_tools import question_options, text_answer, text_tools

from tubeless import define_agent, define_pipeline_command

MAX_QUESTION_BYTES = 4096
MAX_OBSERVATION_BYTES = 16384


def start(options: Mapping[str, str]) -> dict[str, Any]:
    """Return the first state, refusing a question over the budget before any request.

    Raises:
        ValueError: the question is over `MAX_QUESTION_BYTES` in UTF-8.
    """
    question = options["question"]
    # `surrogatepass` counts a lone surrogate (from undecodable argv bytes) as 3 bytes.
    if len(question.encode("utf-8", "surrogatepass")) > MAX_QUESTION_BYTES:
        raise ValueError(f"Question exceeds {MAX_QUESTION_BYTES} UTF-8 bytes")
    return {"question": question, "observations": []}


def remember(state: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Append the batch's outcomes, verbatim, to the observations the model sees.

    Raises:
        ValueError: the history would exceed `MAX_OBSERVATION_BYTES` as compact JSON; the
            run then fails before the state is committed or another request is made.
    """
    observations = state["observations"] + outcomes
    if len(encode_json(observations)) > MAX_OBSERVATION_BYTES:
        raise ValueError(f"Observation history exceeds {MAX_OBSERVATION_BYTES} UTF-8 bytes")
    return {**state, "observations": observations}


agent = define_agent(
    id="openai-agent",
    name="OpenAI text agent",
    description="Let a model choose text tools, observe their outcomes and finish the task.",
    # Prompts and response mapping are not part of the graph: bump this when they change.
    implementation_version="openai-text-v2",
    input_schema=question_options,
    result_schema=text_answer,
    tools=text_tools,
    # A rejected decision goes back to the model twice at most (each a decision, too).
    limits={
        "max_turns": 6,
        "max_calls": 12,
        "max_decisions": 8,
        "max_concurrency": 3,
        "max_repairs": 2,
        # Eight requests at their bounds (32 KiB in, 2048 out) would need 278,528.
        "max_total_tokens": 150_000,
    },
    initial_state=start,
    decide=openai_decision,
    reduce=remember,
    # No `dry_run`: there is no preview model, so dry runs skip the agent.
)
"""The agent: an ordinary pipeline with one step, `agent`."""

command = define_pipeline_command(agent, summarize=lambda value, values: [value["answer"]])
"""The CLI command: `--question` comes from the options schema; prints the bare answer."""


if __name__ == "__main__":
    raise SystemExit(command.main())

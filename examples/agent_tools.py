"""The text tools and boundary schemas that both agent examples share.

- `text_tools`: `uppercase` (one word; the word `missing` fails with an expected domain
  error) and `count` (characters in a text). Each has a preview handler, the same function
  as its handler, so dry runs execute them too: they only transform text in process.
- `question_options`: the agent options; `question` defaults to `"hello tubeless"`. Its JSON
  Schema is what the CLI turns into an optional `--question` flag.
- `text_answer`: the final answer; the raw result is text, the validated result is
  `{"answer": text}`.

The schemas are hand-written validators (`tubeless.schema.validator`) that may transform
the value; each also carries the JSON Schema of its input side, which tools advertise to a
model and the CLI reads for flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tubeless import SchemaIssues, ToolContext, ToolError, define_tool
from tubeless.schema import validator

DEFAULT_QUESTION = "hello tubeless"


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise SchemaIssues(["Expected text"])
    return value


def _finite_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaIssues(["Expected a finite number"])
    if not math.isfinite(value):
        raise SchemaIssues(["Expected a finite number"])
    return value


def _question_options(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise SchemaIssues(["Expected options"])
    # Only an absent key takes the default: an explicit non-text question is an error.
    question = value.get("question", DEFAULT_QUESTION)
    if not isinstance(question, str):
        raise SchemaIssues([{"message": "Expected question text", "path": ["question"]}])
    return {"question": question}


def _answer(value: Any) -> dict[str, str]:
    if not isinstance(value, str):
        raise SchemaIssues(["Expected answer text"])
    return {"answer": value}


text = validator(_text, json_schema={"type": "string"}, vendor="example")
"""Any string."""

character_count = validator(_finite_number, json_schema={"type": "number"}, vendor="example")
"""A finite number (booleans are not numbers here)."""

question_options = validator(
    _question_options,
    json_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "Text or task for the agent."}
        },
    },
    vendor="example",
)
"""Agent options: `{"question": str}`, with `question` defaulting to `"hello tubeless"`."""

text_answer = validator(_answer, json_schema={"type": "string"}, vendor="example")
"""The raw final result is text; validation turns it into `{"answer": text}`."""


def uppercase(word: str, context: ToolContext) -> str:
    """Upper-case `word`; the word `missing` is an expected failure the agent can observe.

    Raises:
        ToolError: `NOT_FOUND` for the word `missing`; the reducer receives it as an
            `ok: False` outcome instead of failing the run.
    """
    if word == "missing":
        raise ToolError("NOT_FOUND", "Word unavailable")
    return word.upper()


def count_characters(value: str, context: ToolContext) -> int:
    """Return the number of characters in `value`."""
    return len(value)


text_tools = {
    "uppercase": define_tool(
        description="Uppercase one word. The word 'missing' fails with NOT_FOUND.",
        input_schema=text,
        output_schema=text,
        run=uppercase,
        dry_run=uppercase,
    ),
    "count": define_tool(
        description="Count the characters in a text.",
        input_schema=text,
        output_schema=character_count,
        run=count_characters,
        dry_run=count_characters,
    ),
}
"""The registered tools by name; an agent's capability list is sorted by name."""

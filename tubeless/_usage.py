"""`Usage`: tokens and cost a run's model requests consumed (a leaf: imports nothing).

It lives below every layer so a `PipelineRun` can carry the figures the agent layer
meters without the pipeline core knowing who produced them.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens and cost charged to a budget: what model requests consumed.

    `total_tokens` is always `input_tokens + output_tokens`.
    """

    input_tokens: int = 0
    """Input (prompt) tokens."""
    output_tokens: int = 0
    """Output (completion) tokens."""
    cost: float = 0
    """Cost, in whatever unit the application prices in."""
    total_tokens: int = dataclasses.field(init=False, default=0)
    """`input_tokens + output_tokens`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_tokens", self.input_tokens + self.output_tokens)

    def __bool__(self) -> bool:
        """Whether anything at all was consumed."""
        return bool(self.input_tokens or self.output_tokens or self.cost)

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{inputTokens, outputTokens, totalTokens, cost}`."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
            "cost": self.cost,
        }


NO_USAGE = Usage()
"""Nothing consumed: the usage of every run that meters none."""

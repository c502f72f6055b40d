"""What the agent layer carries in a run: its keys in the pipeline core's one extension slot.

The public `RunContext` fields `execution_key`, `approvals` and `cassette` predate the slot;
they are bound to these keys here, so the core carries them without reading them. A child
run never inherits an execution key or approval decisions (they address the root run's
execution); it shares the cassette.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tubeless.pipeline.lowlevel import RunExtension, bind_context_field

if TYPE_CHECKING:
    from tubeless.agent._cassette import Cassette


def _check_key(value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError("context execution_key must be a non-blank string")


def _check_approvals(value: object) -> None:
    if not isinstance(value, Mapping):
        raise TypeError("context approvals must be a mapping of call id to decision")


def _check_cassette(value: object) -> None:
    if not callable(getattr(value, "session", None)):
        raise TypeError("context cassette must be a tubeless.testing.Cassette")


EXECUTION_KEY: RunExtension[str] = RunExtension("execution key", check=_check_key)
"""The execution key given in the root run's context (instead of the `Durability` key)."""
APPROVALS: RunExtension[Mapping[str, Any]] = RunExtension("approvals", check=_check_approvals)
"""The decisions for waiting calls given in the root run's context."""
CASSETTE: RunExtension[Cassette] = RunExtension("cassette", inherited=True, check=_check_cassette)
"""The cassette given in the root run's context; every run of the tree shares it."""

bind_context_field("execution_key", EXECUTION_KEY)
bind_context_field("approvals", APPROVALS)
bind_context_field("cassette", CASSETTE)

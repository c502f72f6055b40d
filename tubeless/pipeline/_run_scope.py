"""A run's scope: its run id, and what a root run takes from its context or a child run
shares with its parent (signal, trace channel, logger, clock, extensions)."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._types import Hook
from tubeless.pipeline._controls import RunContext
from tubeless.pipeline._extensions import RunExtension, child_extensions, root_extensions
from tubeless.pipeline._handler_context import (
    RunScope,
    RunServices,
    default_logger,
    default_now,
    default_sleep,
)
from tubeless.pipeline._hooks import normalize_hooks
from tubeless.pipeline._observe import RunObserver, TraceChannel

_random_bits = random.getrandbits


def new_run_id(pipeline_id: str) -> str:
    """`<pipeline id>:<random UUID version 4>`, made without the `uuid` module's overhead.

    The bits come from `random` (seeded from the OS, reseeded in a forked child), not
    from `os.urandom`: a run id is unique, not secret, and a system call per child run
    hands the GIL to another thread in the middle of the harness. One 128-bit draw gives
    the 122 random bits; the version nibble (4) and the RFC 4122 variant bits (10) are set.
    """
    digits = "%032x" % (_random_bits(128) & _UUID4_CLEAR | _UUID4_SET)
    return (
        f"{pipeline_id}:{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
    )


_UUID4_CLEAR = ~(0xF << 76 | 0x3 << 62) & (1 << 128) - 1
_UUID4_SET = 0x4 << 76 | 0x2 << 62


def scope_for_root(
    pipeline_id: str, context: RunContext, dry_run: bool
) -> tuple[RunScope, tuple[dict[str, Hook], ...]]:
    """A root run's scope from its `context`, and its hooks normalized."""
    log = context.log or default_logger()
    hooks = normalize_hooks(context.hooks)
    channel = TraceChannel(context.tracing, log) if context.tracing is not None or hooks else None
    return RunScope(
        pipeline_id=pipeline_id,
        run_id=context.run_id or new_run_id(pipeline_id),
        parent_run_id=context.parent_run_id,
        correlation_id=context.correlation_id,
        item_key=None,
        iteration=None,
        services=RunServices(
            signal=context.signal if context.signal is not None else threading.Event(),
            log=log,
            now=context.now or default_now,
            sleep=context.sleep or default_sleep,
            cwd=context.cwd or os.getcwd(),
            channel=channel,
            thread_pool=context.thread_pool,
        ),
        dry_run=dry_run,
        extensions=root_extensions(context),
    ), hooks


def scope_for_child(
    pipeline_id: str,
    parent: RunScope,
    item_key: str | None,
    iteration: dict[str, Any] | None,
    dry_run: bool,
    extensions: Mapping[RunExtension[Any], Any] | None = None,
) -> RunScope:
    """A child run's scope: the parent's services (signal, channel, logger, clock, sleep, cwd).

    The child waits here while a sink slower than the run has a full queue (its start is
    where the thread holds none of the run's locks).
    """
    if parent.services.channel is not None:
        parent.services.channel.wait_for_room()
    return RunScope(
        pipeline_id=pipeline_id,
        run_id=new_run_id(pipeline_id),
        parent_run_id=parent.run_id,
        correlation_id=parent.correlation_id,
        item_key=item_key,
        iteration=iteration,
        services=parent.services,
        dry_run=dry_run,
        extensions=child_extensions(parent.extensions, extensions),
    )


def observer_for(scope: RunScope, hooks: Sequence[dict[str, Hook]]) -> RunObserver | None:
    """The observer of the run of `scope`, or `None` when no sink or hook would see it."""
    channel = scope.services.channel
    if channel is None or not (channel.tracing or hooks):
        return None
    base: dict[str, Any] = {"pipelineId": scope.pipeline_id, "runId": scope.run_id}
    # In this order, each left out when `None`.
    if scope.correlation_id is not None:
        base["correlationId"] = scope.correlation_id
    if scope.parent_run_id is not None:
        base["parentRunId"] = scope.parent_run_id
    if scope.item_key is not None:
        base["itemKey"] = scope.item_key
    if scope.iteration is not None:
        base["iteration"] = scope.iteration
    return RunObserver(channel, hooks, base, scope.services.now)

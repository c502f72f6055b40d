"""Span and trace ids derived from run ids, so exporting a run twice gives the same ids.

Derivation (version 1), with `H(parts) = SHA-256(b"tubeless-otel/1" + b"\\0" +
b"\\0".join(utf8(part) for part in parts))`:

- trace id = the first 16 bytes of `H("trace", root run id)`, big-endian, where the root
  run is the topmost run of the tree the sink saw (no `parentRunId`, or a parent it never
  saw);
- span id of a run = the first 8 bytes of `H("run", run id)`;
- span id of an agent's call span (an agent called as a pipeline tool) =
  `H("call", run id)`;
- span id of a step = `H("step", run id, step id)`.

An all-zero id (invalid in OpenTelemetry) becomes 1.
"""

from __future__ import annotations

import copy
import hashlib

from tubeless.trace.otel._sdk import IdGenerator, SdkTracer, trace_api

__all__ = ["RunIds", "deterministic_tracer", "span_id", "trace_id"]

_PREFIX = b"tubeless-otel/1"


def _digest(*parts: str) -> bytes:
    joined = b"\0".join((_PREFIX, *(part.encode("utf-8", "surrogatepass") for part in parts)))
    return hashlib.sha256(joined).digest()


def trace_id(root_run_id: str) -> int:
    """The 128-bit trace id of the run tree rooted at `root_run_id`."""
    return int.from_bytes(_digest("trace", root_run_id)[:16], "big") or 1


def span_id(role: str, run_id: str, step_id: str | None = None) -> int:
    """The 64-bit span id of a run (`role` "run" or "call") or of a step (`role` "step")."""
    parts = (role, run_id) if step_id is None else (role, run_id, step_id)
    return int.from_bytes(_digest(*parts)[:8], "big") or 1


class RunIds(IdGenerator):
    """Hands out the ids set by `expect`, once each; otherwise asks the generator it wraps.

    The sink sets the ids of the span it is about to start, under its own lock, right
    before `start_span`, which asks for exactly one span id (and a trace id for a root).
    """

    def __init__(self, fallback: IdGenerator) -> None:
        self._fallback = fallback
        self._trace_id: int | None = None
        self._span_id: int | None = None

    def expect(self, trace: int, span: int) -> None:
        """Make the next `generate_trace_id`/`generate_span_id` return these ids."""
        self._trace_id, self._span_id = trace, span

    def generate_span_id(self) -> int:
        """The expected span id, or a new one from the wrapped generator."""
        span, self._span_id = self._span_id, None
        return self._fallback.generate_span_id() if span is None else span

    def generate_trace_id(self) -> int:
        """The expected trace id, or a new one from the wrapped generator."""
        trace, self._trace_id = self._trace_id, None
        return self._fallback.generate_trace_id() if trace is None else trace

    def is_trace_id_random(self) -> bool:
        """False: derived ids are hashes of run ids, which callers may choose."""
        return False


def deterministic_tracer(
    provider: trace_api.TracerProvider, version: str
) -> tuple[trace_api.Tracer, RunIds | None]:
    """A tracer of `provider` whose span ids the caller sets, with the setter.

    With the SDK's provider, the tracer is a copy of the provider's own (same processors,
    sampler and resource) with a `RunIds` generator, so nothing shared is changed. Any
    other provider keeps its own ids (the setter is `None`).
    """
    tracer = provider.get_tracer("tubeless.trace.otel", version)
    if not isinstance(tracer, SdkTracer):
        return tracer, None
    own = copy.copy(tracer)
    ids = RunIds(tracer.id_generator)
    own.id_generator = ids
    return own, ids

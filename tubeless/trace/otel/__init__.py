"""OpenTelemetry export of trace records: a live sink and an after-the-fact replay (extra `otel`).

Install with `pip install 'tubeless-pipelines[otel]'`; importing this module without the
extra raises `MissingExtraError` (an `ImportError`, code `TUBELESS_EXTRA_MISSING`).

Spans (`SPAN_MAPPING`, experimental GenAI semantic conventions; all INTERNAL):

- an agent's root run -> `invoke_agent {agent id}` (`gen_ai.operation.name=invoke_agent`,
  `gen_ai.agent.id`, `gen_ai.agent.name`, `gen_ai.agent.version` = implementation
  version); its one step `agent` is folded into it;
- each turn -> `turn {n}` under it, with spans `step decide`, `step calls`, `step reduce`;
- each tool call -> `execute_tool {tool}` under `step calls` (`gen_ai.tool.name`,
  `gen_ai.tool.call.id`, `gen_ai.tool.type=function`); a handler tool's step `tool` is
  folded into it; a child agent (pipeline tool) gets its `invoke_agent` span under it;
- every other run -> `pipeline {pipeline id}`, every other step -> `step {step id}`; a
  child run nests under the parent's step that runs it.

Every run span has `tubeless.run.id`, `tubeless.pipeline.id` and `tubeless.run.status`;
`agent.*` attributes from `step.attempted` are kept. A failed or cancelled run or step
has status ERROR with `error.type` = the error code (`TUBELESS_...`). Options, inputs,
outputs, prompts, state, logs and error messages are never exported. Start and end times
are the records' `timestampMs`.

Ids are derived from run ids, so a second export of the same run, or a replay of a run
first sent live, gives the same ids. With `H(parts) = SHA-256(b"tubeless-otel/1\\0" +
b"\\0".join(parts))` over UTF-8 parts: trace id = the first 16 bytes of `H("trace", root
run id)`; span id = the first 8 bytes of `H("run", run id)` for a run, `H("call", run id)`
for the call span of an agent called as a tool, `H("step", run id, step id)` for a step.
"""

from tubeless._public import show_public_module as _show_public_module
from tubeless.trace.otel._mapping import SPAN_MAPPING, SpanRule
from tubeless.trace.otel._replay import export_records
from tubeless.trace.otel._sink import OtelTraceSink

__all__ = ["SPAN_MAPPING", "OtelTraceSink", "SpanRule", "export_records"]

_show_public_module(__name__, __all__, globals())

"""The agent harness's internal API for the tubeless packages built on it (the seam).

Who may use it: tubeless's own packages above `tubeless.agent` (today `tubeless.mcp`).
Applications should not import it: it is not part of the public API and may change in
any release.

What it promises, for as long as a name is listed here:

- Tool sources. `source_tool(tool, batch_check=..., source_version=...)` returns a copy
  of a `define_tool` tool that a tool source vouches for: `batch_check(signal,
  agent_run_id)` runs once per batch holding the tool (on the calls step's thread, with
  the run's signal and the agent run's id), before any call of that batch starts, and
  raises to fail the run; `source_version` (such as a
  digest of the source's definition) joins the tool pipeline's definition identity, and
  so the agent's.
- Seconds. `check_seconds(value, label)` checks a number of seconds as `timeout=` and
  `max_seconds` do, raising the same coded definition error.
- Checkpoint change logs. `fold_changes(snapshot, changes)` returns the checkpoint text
  a store holds as a snapshot and the changes appended since (`lease.append`), raising
  `AgentError` `TUBELESS_AGENT_CHECKPOINT_INVALID` when they do not fit (for the stores
  outside this package: `tubeless.testing.MemoryCheckpointStore`).
"""

from tubeless.agent._journal_changes import fold_changes
from tubeless.agent._limits import check_seconds
from tubeless.agent._tools import source_tool

__all__ = ["check_seconds", "fold_changes", "source_tool"]

"""The pipeline core's internal API for the layers built on it (the seam).

Who may use it: tubeless's own packages above `tubeless.pipeline` (today `tubeless.agent`;
pipeline tools and subagents next). They import the core through this module and the
public `tubeless.pipeline` only, never through its private modules; `tests/test_layering.py`
enforces that. Applications should not import it: it is not part of the public API and
may change in any release.

What it promises, for as long as a name is listed here:

- Child runs. `run_child_pipeline(context, pipeline, options, controls=...)` runs a
  pipeline as a child of the step behind `context`: same signal, trace channel, hooks
  of the run tree, logger, clock and working directory; `parentRunId` and `itemKey`
  set; it returns the child's `PipelineRun` and never raises for a run failure
  (`options_checked=True`: the options were already validated by the child's schema).
  `run_child_value(...)` is the same for a caller that needs only the value of a child
  that completes: an unobserved lone-step child then returns `ChildValue(value)` instead
  of a report built only to be discarded.
  `thread_pool_of(context)` is the application's thread pool given in the root run's
  context (child runs share it; `LazyPool.on(pool)` runs batches on it).
  `run_child_pipeline(..., extensions={key: value})` hands values to that child alone.
- Extensions: the one slot a layer owns in every run. `RunExtension(name, inherited=,
  check=)` is a typed key the layer owns; `extension_of(context, key)` reads the value
  the run behind `context` carries, `set_extension(context, key, value)` sets it. A root
  run carries `RunContext.extensions` and the context fields a layer bound with
  `bind_context_field(field, key)` (the agent layer binds `execution_key`, `approvals` and
  `cassette`: the core carries them without reading them); a child run inherits the
  values of `inherited` keys.
  `meter_usage(context, read)` makes the run's report carry `read()` as its `usage`
  (read once, when the report is made; the agent layer meters its budgets this way).
  `item_key_of(context)` is the item key of the run behind `context`, so a child can
  tell which call of its parent started it.
  `child_failure(pipeline, plan, run)` is the `PipelineExecutionError` a parent raises
  for a child that did not complete (its `__cause__` is the child's first exception).
  `IterationRunner` is the handler of an `iterate_pipeline` step, for steps that need
  its loop with their own handler around it (the agent's turn loop).
- Observation. `observed(context)` says whether anything records the run behind
  `context`, so progress and attempt attributes are worth building;
  `visible_groups(keys, status, DETAIL_GROUP_LIMIT)` picks the progress groups shown
  (active first, then failed, in input order). Progress rows built from parts that
  `clean_text(text)` found clean (every id and label) may go out as `WireRows`, taken
  without a check per row; logical-attempt attributes built the same way may go out
  as `CheckedAttributes`.
- Fan-out. `run_lazily(count, concurrency, work, keep_going, pool=...)` runs items
  in order, at most `concurrency` at once, the caller being one of the workers, and
  drains started items before it returns; helper threads join only once an item keeps
  the batch busy. A `LazyPool` keeps those threads across batches until `close()`.
- Loading. `import_module_file(path, name)` imports a Python file as module `name`, once
  per process (the CLI's module files; a batch worker importing a pipeline by file).
- Cancellation. `raise_if_cancelled(signal)` raises `RunCancelledError` with
  `cancellation_message(signal)` once the run's signal is set; `is_cancellation(error,
  signal)` tells cancellation from failure by the error itself.
"""

from tubeless.pipeline._batch import import_module_file
from tubeless.pipeline._child_progress import DETAIL_GROUP_LIMIT, visible_groups
from tubeless.pipeline._child_runs import (
    IterationRunner,
    child_failure,
    extension_of,
    item_key_of,
    meter_usage,
    observed,
    run_child_pipeline,
    run_child_value,
    set_extension,
    thread_pool_of,
)
from tubeless.pipeline._classify import is_cancellation
from tubeless.pipeline._controls import bind_context_field
from tubeless.pipeline._extensions import RunExtension
from tubeless.pipeline._handler_context import (
    PROGRESS_INTERVAL_MS,
    CheckedAttributes,
    WireRows,
    cancellation_message,
    clean_text,
    raise_if_cancelled,
)
from tubeless.pipeline._pool import LazyPool, run_lazily
from tubeless.pipeline._run_result import ChildValue

__all__ = [
    "DETAIL_GROUP_LIMIT",
    "PROGRESS_INTERVAL_MS",
    "CheckedAttributes",
    "ChildValue",
    "IterationRunner",
    "LazyPool",
    "RunExtension",
    "WireRows",
    "bind_context_field",
    "cancellation_message",
    "child_failure",
    "clean_text",
    "extension_of",
    "import_module_file",
    "is_cancellation",
    "item_key_of",
    "meter_usage",
    "observed",
    "raise_if_cancelled",
    "run_child_pipeline",
    "run_child_value",
    "run_lazily",
    "set_extension",
    "thread_pool_of",
    "visible_groups",
]

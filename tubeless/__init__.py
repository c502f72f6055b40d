"""tubeless: typed, observable pipelines and a bounded, validated agent loop.

Everyday names live here; the parts are `tubeless.pipeline`, `tubeless.agent`,
`tubeless.schema`, `tubeless.trace`, `tubeless.cli`, `tubeless.errors` and
`tubeless.testing`. `tubeless.__version__` is the installed version.
"""

import importlib as _importlib
import logging as _logging
import typing as _typing

from tubeless._public import show_public_module as _show_public_module
from tubeless.agent import (
    AgentLimits,
    AgentTool,
    DecisionContext,
    Durability,
    PostgresCheckpointStore,
    Retry,
    SqliteCheckpointStore,
    ToolContext,
    Usage,
    UsageReservation,
    approve,
    define_agent,
    define_tool,
    edit,
    pipeline_tool,
    reject,
    tool,
    tool_from_function,
)
from tubeless.errors import (
    DefinitionError,
    Diagnostic,
    PipelineDefinitionError,
    PipelineExecutionError,
    PipelineWaitingError,
    RunCancelledError,
    RunError,
    SchemaIssues,
    ToolError,
    TubelessError,
)
from tubeless.pipeline import (
    ExecutionContext,
    Pipeline,
    PipelinePlan,
    PipelineRun,
    RunContext,
    RunControls,
    Step,
    StepContext,
    create_steps,
    define_pipeline,
    require_outputs,
    run_many,
)

if _typing.TYPE_CHECKING:
    from tubeless.cli import PipelineCommand, Project, define_pipeline_command, define_project

_logging.getLogger("tubeless").addHandler(_logging.NullHandler())

# The command line (argparse, the terminal reporter) loads on first use (PEP 562).
_LAZY = {
    "PipelineCommand": "tubeless.cli",
    "Project": "tubeless.cli",
    "define_pipeline_command": "tubeless.cli",
    "define_project": "tubeless.cli",
}


__version__: str  # bound by `__getattr__` on first use, so it is typed here only


def __getattr__(name: str) -> object:
    # `__version__` is read from package metadata on first use (PEP 562).
    if name == "__version__":
        from tubeless._version import package_version

        return package_version()
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AgentLimits",
    "AgentTool",
    "DecisionContext",
    "DefinitionError",
    "Diagnostic",
    "Durability",
    "ExecutionContext",
    "Pipeline",
    "PipelineCommand",
    "PipelineDefinitionError",
    "PipelineExecutionError",
    "PipelinePlan",
    "PipelineRun",
    "PipelineWaitingError",
    "PostgresCheckpointStore",
    "Project",
    "Retry",
    "RunCancelledError",
    "RunContext",
    "RunControls",
    "RunError",
    "SchemaIssues",
    "SqliteCheckpointStore",
    "Step",
    "StepContext",
    "ToolContext",
    "ToolError",
    "TubelessError",
    "Usage",
    "UsageReservation",
    "approve",
    "create_steps",
    "define_agent",
    "define_pipeline",
    "define_pipeline_command",
    "define_project",
    "define_tool",
    "edit",
    "pipeline_tool",
    "reject",
    "require_outputs",
    "run_many",
    "tool",
    "tool_from_function",
]

_show_public_module(__name__, __all__, globals())

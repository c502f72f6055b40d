"""tubeless: typed, observable pipelines and a bounded, validated agent loop.

Everyday names live here; the parts are `tubeless.pipeline`, `tubeless.agent`,
`tubeless.schema`, `tubeless.trace`, `tubeless.cli`, `tubeless.errors` and
`tubeless.testing`.
"""

import importlib as _importlib
import logging as _logging
import typing as _typing

from tubeless._public import show_public_module as _show_public_module
from tubeless.agent import (
    AgentLimits,
    AgentTool,
    DecisionContext,
    ToolContext,
    define_agent,
    define_tool,
)
from tubeless.errors import (
    Diagnostic,
    PipelineDefinitionError,
    PipelineExecutionError,
    RunCancelledError,
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


def __getattr__(name: str) -> object:
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
    "Diagnostic",
    "ExecutionContext",
    "Pipeline",
    "PipelineCommand",
    "PipelineDefinitionError",
    "PipelineExecutionError",
    "PipelinePlan",
    "PipelineRun",
    "Project",
    "RunCancelledError",
    "RunContext",
    "RunControls",
    "SchemaIssues",
    "Step",
    "StepContext",
    "ToolContext",
    "ToolError",
    "TubelessError",
    "create_steps",
    "define_agent",
    "define_pipeline",
    "define_pipeline_command",
    "define_project",
    "define_tool",
    "require_outputs",
]

_show_public_module(__name__, __all__, globals())

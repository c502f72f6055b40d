"""tubeless: typed, observable pipelines and a bounded, validated agent loop.

Everyday names live here; the parts are `tubeless.pipeline`, `tubeless.agent`,
`tubeless.schema`, `tubeless.trace`, `tubeless.cli`, `tubeless.errors` and
`tubeless.testing`. `tubeless.__version__` is the installed version.
"""

import logging as _logging

from tubeless.agent import (
    AgentLimits,
    AgentTool,
    DecisionContext,
    ToolContext,
    define_agent,
    define_tool,
    tool_from_function,
)
from tubeless.cli import PipelineCommand, Project, define_pipeline_command, define_project
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

_logging.getLogger("tubeless").addHandler(_logging.NullHandler())

__version__: str  # bound by `__getattr__` on first use, so it is typed here only


def __getattr__(name: str) -> object:
    # `__version__` is read from package metadata on first use (PEP 562).
    if name == "__version__":
        from tubeless._version import package_version

        return package_version()
    raise AttributeError(f"module 'tubeless' has no attribute {name!r}")


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
    "tool_from_function",
]

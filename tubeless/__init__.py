"""tubeless: typed, observable pipelines and a bounded, validated agent loop."""

import logging as _logging

from tubeless.errors import (
    PipelineDefinitionError,
    PipelineExecutionError,
    SchemaIssues,
    ToolError,
    TubelessError,
)

_logging.getLogger("tubeless").addHandler(_logging.NullHandler())

__all__ = [
    "PipelineDefinitionError",
    "PipelineExecutionError",
    "SchemaIssues",
    "ToolError",
    "TubelessError",
]

"""Pipelines: steps, planning, execution, child pipelines and definition identity."""

from tubeless._fingerprint import fingerprint
from tubeless.pipeline._context import ExecutionContext, StepContext, StepLogger
from tubeless.pipeline._controls import PipelineLogger, RunContext, RunControls
from tubeless.pipeline._define import Pipeline, define_pipeline
from tubeless.pipeline._identity import (
    DefinitionIdentity,
    DefinitionSnapshot,
    decode_snapshot,
)
from tubeless.pipeline._nested import NestedPipeline
from tubeless.pipeline._observe import HOOK_NAMES
from tubeless.pipeline._plan import PipelinePlan, PlanStep, SelectionReason
from tubeless.pipeline._render import escape_mermaid_label, render_mermaid, render_plan
from tubeless.pipeline._report import PipelineRun, StepReport, run_status
from tubeless.pipeline._steps import (
    RequiredOutputs,
    Step,
    StepAnnotation,
    StepFactory,
    create_steps,
    require_outputs,
)

__all__ = [
    "HOOK_NAMES",
    "DefinitionIdentity",
    "DefinitionSnapshot",
    "ExecutionContext",
    "NestedPipeline",
    "Pipeline",
    "PipelineLogger",
    "PipelinePlan",
    "PipelineRun",
    "PlanStep",
    "RequiredOutputs",
    "RunContext",
    "RunControls",
    "SelectionReason",
    "Step",
    "StepAnnotation",
    "StepContext",
    "StepFactory",
    "StepLogger",
    "StepReport",
    "create_steps",
    "decode_snapshot",
    "define_pipeline",
    "escape_mermaid_label",
    "fingerprint",
    "render_mermaid",
    "render_plan",
    "require_outputs",
    "run_status",
]

"""Pipelines: steps, planning, execution, child pipelines and definition identity."""

from tubeless._fingerprint import fingerprint
from tubeless._public import show_public_module as _show_public_module
from tubeless._types import ContextLike, ControlsLike, Hook, HooksLike, StepOptions
from tubeless.pipeline._batch import run_many
from tubeless.pipeline._controls import PipelineLogger, RunContext, RunControls
from tubeless.pipeline._define import Pipeline, define_pipeline
from tubeless.pipeline._handler_context import ExecutionContext, StepContext, StepLogger
from tubeless.pipeline._hooks import HOOK_NAMES, PipelineHooks
from tubeless.pipeline._identity import (
    DefinitionIdentity,
    DefinitionSnapshot,
    decode_snapshot,
)
from tubeless.pipeline._plan import PipelinePlan, PlanStep, SelectionReason
from tubeless.pipeline._render import escape_mermaid_label, render_mermaid, render_plan
from tubeless.pipeline._run_result import PipelineRun, StepReport, run_status
from tubeless.pipeline._step_factory import StepFactory, create_steps
from tubeless.pipeline._steps import (
    NestedPipeline,
    RequiredOutputs,
    Step,
    StepAnnotation,
    require_outputs,
)
from tubeless.pipeline._stream import AsyncRunStream, RunStream

__all__ = [
    "HOOK_NAMES",
    "AsyncRunStream",
    "ContextLike",
    "ControlsLike",
    "DefinitionIdentity",
    "DefinitionSnapshot",
    "ExecutionContext",
    "Hook",
    "HooksLike",
    "NestedPipeline",
    "Pipeline",
    "PipelineHooks",
    "PipelineLogger",
    "PipelinePlan",
    "PipelineRun",
    "PlanStep",
    "RequiredOutputs",
    "RunContext",
    "RunControls",
    "RunStream",
    "SelectionReason",
    "Step",
    "StepAnnotation",
    "StepContext",
    "StepFactory",
    "StepLogger",
    "StepOptions",
    "StepReport",
    "create_steps",
    "decode_snapshot",
    "define_pipeline",
    "escape_mermaid_label",
    "fingerprint",
    "render_mermaid",
    "render_plan",
    "require_outputs",
    "run_many",
    "run_status",
]

_show_public_module(__name__, __all__, globals())

"""`pipeline_tool`: register a pipeline (or an agent, making it a subagent) as a tool."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote
from tubeless._types import ToolOptions, check_keywords
from tubeless.agent._approvals import check_needs_approval
from tubeless.agent._deadline import check_retry, check_timeout, finish_handler
from tubeless.agent._delegate import PipelineToolSpec, agent_definitions, agent_facts
from tubeless.agent._state import own_descriptor
from tubeless.agent._tools import AgentTool, _schema, check_description, input_descriptor, new_tool
from tubeless.errors import AgentDefinitionError, AgentError
from tubeless.pipeline import Pipeline, RunControls, StepContext, create_steps, define_pipeline
from tubeless.pipeline.lowlevel import child_failure, item_key_of, run_child_pipeline

if TYPE_CHECKING:
    # Only for type checkers (annotations stay strings): `typing.Unpack` is 3.11+.
    from typing_extensions import Unpack

REPLAY_MODES = ("safe", "unsafe")


def _descriptor(
    child: Pipeline, input_schema: Any, explicit: Mapping[str, Any] | None
) -> FrozenDict:
    label = f"Pipeline tool {child.id} input"
    if input_schema is not None:
        return input_descriptor(input_schema, explicit, label)
    if explicit is not None:
        return input_descriptor(child.options_schema, explicit, label)  # type: ignore[arg-type]
    converted = child.options_schema.json_schema() if child.options_schema else None
    if converted is None:
        raise AgentDefinitionError(
            f"Pipeline tool {child.id} requires an input descriptor: the pipeline has no "
            "options JSON Schema, so pass input_json_schema (or input_schema and map_options)"
        )
    return own_descriptor(converted, label)


def pipeline_tool(
    pipeline: Pipeline,
    *,
    description: str,
    input_schema: object = None,
    map_options: Callable[[Any], Any] | None = None,
    input_json_schema: Mapping[str, Any] | None = None,
    **options: Unpack[ToolOptions],
) -> AgentTool:
    """Register `pipeline` as a tool; an agent registered this way is a subagent.

    Without `input_schema`, the model's arguments are the child's options (validated by
    the child's own options schema) and the tool's descriptor is the child's options
    descriptor. With `input_schema` and `map_options`, arguments are validated, mapped
    with `map_options(validated_arguments)` and validated again by the child's schema.
    The call's value is the child's finalized value. A child run that fails only through
    handler `ToolError`s is a recoverable outcome (several become `TUBELESS_TOOL_ERRORS`);
    anything else fails the turn. A subagent shares the caller's budget: its calls and
    decisions count against every ancestor, and the tree's depth is bounded by `max_depth`.

    Args:
        pipeline: the child pipeline (an agent made by `define_agent` is a pipeline).
        description: what the tool does, non-blank, at most 4096 characters.
        input_schema: validates the model's arguments (needs `map_options`).
        map_options: `map_options(validated_arguments)` -> the child's options; must have
            no side effects (it runs once per call, while the whole batch is prepared).
        input_json_schema: explicit input descriptor for the model.
        **options: the `ToolOptions`, as in `define_tool`, for the child run:
            `replay` (`"unsafe"` by default) says whether a durable agent that resumes
            after a crash may run the child again when the call was running; a durable
            subagent ignores it, resuming from its own part of the parent's journal.
            `needs_approval` gets `predicate(child_options, decision_context)` and holds
            the call before its child starts; a subagent whose own tools need approval
            needs a durable caller too, and its waiting calls surface on the root run.
            `timeout` bounds each run of an ordinary pipeline (its handlers do not see
            the deadline), and `retry` runs it again; neither is for a subagent: bound
            it with its own `AgentLimits(max_seconds=...)`.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`, naming the problem.
        TypeError: for a keyword `pipeline_tool` does not take.
    """
    check_keywords(options, ToolOptions, "pipeline_tool")
    replay = options.get("replay", "unsafe")
    if not isinstance(pipeline, Pipeline):
        raise AgentDefinitionError(
            f"pipeline_tool requires a Pipeline, got {type(pipeline).__name__}"
        )
    text = check_description(description)
    if (input_schema is None) != (map_options is None):
        raise AgentDefinitionError(
            f"Pipeline tool {pipeline.id} needs input_schema and map_options together"
        )
    if map_options is not None and not callable(map_options):
        raise AgentDefinitionError(f"Pipeline tool {pipeline.id} map_options must be callable")
    if replay not in REPLAY_MODES:
        raise AgentDefinitionError(
            f"Pipeline tool {pipeline.id} replay must be 'safe' or 'unsafe', got {quote(replay)}"
        )
    approval = check_needs_approval(
        options.get("needs_approval", False), f"Pipeline tool {pipeline.id}"
    )
    label = f"Pipeline tool {pipeline.id}"
    seconds = check_timeout(options.get("timeout"), label)
    policy = check_retry(options.get("retry"), replay, label)
    facts = agent_facts(pipeline)
    subagent = facts is not None
    if subagent and (seconds is not None or policy is not None):
        raise AgentDefinitionError(
            f"{label} is a subagent: it takes no timeout or retry; bound its time with "
            "its own AgentLimits(max_seconds=...)"
        )
    source = None if input_schema is None else _schema(input_schema, "Pipeline tool input")
    spec = PipelineToolSpec(
        description=text,
        pipeline=pipeline,
        input_schema=source,
        map_options=map_options,
        input_json_schema=_descriptor(pipeline, source, input_json_schema),
        replay=replay,
        subagent=subagent,
        durable=facts is not None and facts.durable,
        needs_approval=approval,
        child_approvals=facts is not None and facts.approvals,
        timeout=seconds,
        retry=policy,
        agents=agent_definitions(pipeline),
    )
    return new_tool(spec)


def _run_child(child: Pipeline) -> Callable[[Mapping[str, Any], StepContext], Any]:
    def run_pipeline(inputs: Mapping[str, Any], context: StepContext) -> Any:
        options = context.options
        attributes = options["attributes"]
        if attributes is not None:
            context.report_attempt(options.get("attempt", 1), attributes)
        plan = options["plan"]
        try:
            result = run_child_pipeline(
                context,
                child,
                options["input"],
                controls=RunControls(dry_run=context.dry_run),
                plan=plan,
                item_key=item_key_of(context),
                options_checked=True,
            )
        finally:
            finish_handler(options.get("deadline"), context, attributes)
        if result.status == "completed" and result.finalized:
            return result.value
        if result.status != "completed":
            raise child_failure(child, plan, result)
        raise AgentError(
            f"Child pipeline {child.id} finished without a result (skipped in a dry run)",
            code="TUBELESS_STEP_FAILED",
        )

    return run_pipeline


def pipeline_tool_pipeline(agent_id: str, name: str, spec: PipelineToolSpec) -> Pipeline:
    """The pipeline one call of a tool runs.

    A subagent runs as itself (its root run is the call's run). An ordinary pipeline runs
    below `<agent id>/tool/<name>`, whose step `tool` records the call's attributes as a
    handler tool's does.
    """
    if spec.subagent:
        return spec.pipeline
    handler = _run_child(spec.pipeline)
    step = create_steps().step("tool", run=handler, dry_run=handler)
    return define_pipeline(id=f"{agent_id}/tool/{name}", steps=[step], finalize=step)

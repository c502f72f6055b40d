"""`define_agent`: compile a bounded decision loop into an ordinary pipeline."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote, type_name
from tubeless._types import DecideCallback, InitialStateCallback, ReduceCallback, SchemaLike
from tubeless.agent._budget import Budget
from tubeless.agent._calls import CallsStep
from tubeless.agent._delegate import AGENT_DEFINITIONS, PipelineToolSpec, delegation_of
from tubeless.agent._limits import AgentLimits, resolve_limits
from tubeless.agent._pipeline_tool import pipeline_tool_pipeline
from tubeless.agent._state import own_state
from tubeless.agent._tools import (
    TOOL_NAME,
    TOOL_NAME_RULE,
    AgentTool,
    _schema,
    input_descriptor,
    tool_pipeline,
    tool_spec,
)
from tubeless.agent._turn import (
    AgentRuntime,
    DecideStep,
    Execution,
    Invocation,
    ReduceStep,
)
from tubeless.errors import AgentDefinitionError
from tubeless.pipeline import (
    Pipeline,
    StepAnnotation,
    StepContext,
    create_steps,
    define_pipeline,
    fingerprint,
)
from tubeless.pipeline.lowlevel import IterationRunner, observed, raise_if_cancelled

TOOL_LIMIT = 4096


def _check_callbacks(
    initial_state: object, decide: object, reduce: object, dry_run: object
) -> None:
    if not callable(initial_state) or not callable(decide):
        raise AgentDefinitionError("Agent requires callable initial_state and decide")
    for name, value in (("reduce", reduce), ("dry_run", dry_run)):
        if value is not None and not callable(value):
            raise AgentDefinitionError(f"Agent {name} must be callable when given")


def _registered_tools(agent_id: str, tools: object) -> dict[str, Any]:
    if tools is None:
        return {}
    if not isinstance(tools, Mapping):
        raise AgentDefinitionError("Agent tools must be a mapping of tool name to tool")
    names = sorted(tools, key=lambda name: str(name))
    if len(names) > TOOL_LIMIT:
        raise AgentDefinitionError(f"Agent capability inventory exceeds {TOOL_LIMIT} tools")
    specs = {}
    for name in names:
        if type(name) is not str or not TOOL_NAME.fullmatch(name):
            raise AgentDefinitionError(f"Invalid tool name: {quote(name)} (use {TOOL_NAME_RULE})")
        try:
            specs[name] = tool_spec(tools[name])
        except KeyError:
            raise AgentDefinitionError(
                f"Tool {name} must come from define_tool or pipeline_tool"
            ) from None
    return specs


def _check_texts(**arguments: object) -> None:
    """Refuse `id` that is not a string, and `name`/`description`/... not a string or None.

    Blank strings are left to `define_pipeline`, whose catalog codes name them.
    """
    for argument, value in arguments.items():
        if argument == "id" and type(value) is not str:
            raise AgentDefinitionError(f"Agent id must be a string, got {type_name(value)}")
        if value is not None and type(value) is not str:
            raise AgentDefinitionError(
                f"Agent {argument} must be a string or None, got {type_name(value)}"
            )


def _capability(name: str, spec: Any) -> FrozenDict:
    return FrozenDict(
        name=name, description=spec.description, inputJsonSchema=spec.input_json_schema
    )


def _capability_entry(name: str, spec: Any, pipe: Pipeline) -> FrozenDict:
    """One entry of the capability tree; a pipeline tool carries its child's identity."""
    entry: dict[str, Any] = {
        "name": name,
        "description": spec.description,
        "inputSchemaFingerprint": fingerprint(spec.input_json_schema),
    }
    if not isinstance(spec, PipelineToolSpec):
        entry["identity"] = FrozenDict(pipe.definition.identity.to_dict())
        return FrozenDict(entry)
    child = spec.pipeline
    entry["identity"] = FrozenDict(child.definition.identity.to_dict())
    entry["pipeline"] = FrozenDict(id=child.id, subagent=spec.subagent)
    if spec.subagent:
        # The child agent's own block: its limits and its own capability tree.
        block = child.execution_order[0].annotation
        assert block is not None
        entry["limits"] = block.data["limits"]
        entry["capabilities"] = block.data["capabilities"]
    return FrozenDict(entry)


def _annotation(
    limits: AgentLimits,
    result_descriptor: FrozenDict,
    specs: dict[str, Any],
    pipes: dict[str, Pipeline],
) -> StepAnnotation:
    capabilities = tuple(_capability_entry(name, spec, pipes[name]) for name, spec in specs.items())
    data = FrozenDict(
        limits=FrozenDict(limits.to_dict()),
        resultSchemaFingerprint=fingerprint(result_descriptor),
        capabilities=capabilities,
    )
    return StepAnnotation("agent", data)


def _turn_pipeline(agent_id: str, runtime: AgentRuntime) -> Pipeline:
    steps = create_steps()
    decide = steps.step("decide", run=DecideStep(runtime))
    calls = steps.step("calls", run=CallsStep(runtime), depends_on=[decide])
    reduce = steps.step("reduce", run=ReduceStep(runtime), depends_on=[decide, calls])
    return define_pipeline(id=f"{agent_id}/turn", steps=[decide, calls, reduce], finalize=reduce)


class AgentStep:
    """Step `agent`: own the initial state, then iterate turns until one finishes."""

    def __init__(self, runtime: AgentRuntime, turn: Pipeline) -> None:
        self._runtime = runtime
        self._turn = turn

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        raise_if_cancelled(context.signal)
        delegation = delegation_of(context)
        limits = self._runtime.limits
        if delegation is None:
            budget = Budget(limits, context.run_id)
        else:
            budget = Budget(limits, context.run_id, delegation.budget)
            if delegation.attributes is not None and observed(context):
                context.report_attempt(1, delegation.attributes)
        invocation = Invocation(context.run_id, context.options, budget)
        try:
            runner = IterationRunner(
                step_id="agent",
                pipeline=self._turn,
                max_iterations=self._runtime.limits.max_turns,
                unit="turn",
                initial_state=lambda _inputs, _context: Execution(
                    own_state(self._runtime.initial_state(context.options)), 1, 0, 0
                ),
                transition=lambda result, _state, _context: result,
                map_options=lambda execution, _inputs, _context: {
                    "execution": execution,
                    "invocation": invocation,
                },
                controls=None,
            )
            return runner(inputs, context)
        finally:
            invocation.close()


def define_agent(
    *,
    id: str,
    input_schema: SchemaLike,
    result_schema: SchemaLike,
    initial_state: InitialStateCallback,
    decide: DecideCallback,
    tools: Mapping[str, AgentTool] | None = None,
    reduce: ReduceCallback | None = None,
    dry_run: DecideCallback | None = None,
    limits: AgentLimits | Mapping[str, int] | None = None,
    name: str | None = None,
    description: str | None = None,
    implementation_version: str | None = None,
    result_json_schema: Mapping[str, Any] | None = None,
) -> Pipeline:
    """Compile an agent: an ordinary pipeline with the single step (and target) `agent`.

    Args:
        id: the pipeline id; turns run as `<id>/turn`, tools as `<id>/tool/<name>`.
        input_schema: validates the agent's options once, at pipeline entry.
        result_schema: validates (and may transform) the raw finish result, once.
        initial_state: `initial_state(validated_options)` -> plain data (copied, frozen).
        decide: `decide(state, context)` -> an untrusted decision, checked every time.
        tools: tool name -> tool made by `define_tool` or `pipeline_tool` (a subagent or
            an ordinary pipeline run as a child of the call).
        reduce: `reduce(state, outcomes)` -> next plain state; without it state is kept.
        dry_run: preview decision source used instead of `decide` in dry runs; without
            it a dry run skips the agent.
        limits: `AgentLimits` or a dict with `max_turns`, `max_calls`, `max_decisions`,
            `max_depth`, `max_concurrency`.
        name: display name of the pipeline.
        description: description of the pipeline.
        implementation_version: bump it when prompts, validators, reducers or handlers
            change meaning; it changes only `definitionId`.
        result_json_schema: explicit raw-result descriptor when the schema has none.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`, naming the problem.
        PipelineDefinitionError: for pipeline-level mistakes such as a blank id.
    """
    _check_texts(
        id=id, name=name, description=description, implementation_version=implementation_version
    )
    options_schema = _schema(input_schema, "Agent input")
    _check_callbacks(initial_state, decide, reduce, dry_run)
    resolved = resolve_limits(limits)
    result = _schema(result_schema, "Agent result")
    result_descriptor = input_descriptor(result, result_json_schema, "Agent result")
    specs = _registered_tools(id, tools)
    pipes = {
        name: pipeline_tool_pipeline(id, name, spec)
        if isinstance(spec, PipelineToolSpec)
        else tool_pipeline(id, name, spec)
        for name, spec in specs.items()
    }
    runtime = AgentRuntime(
        agent_id=id,
        limits=resolved,
        tools=specs,
        tool_pipelines=pipes,
        capabilities=tuple(_capability(name, spec) for name, spec in specs.items()),
        result_schema=result,
        result_json_schema=result_descriptor,
        initial_state=initial_state,
        decide=decide,
        reduce=reduce,
        dry_run=dry_run,
    )
    turn = _turn_pipeline(id, runtime)
    factory = create_steps(options_schema)
    template = factory.iterate_pipeline(
        "agent",
        pipeline=turn,
        max_iterations=resolved.max_turns,
        initial_state=lambda inputs, context: None,
        transition=lambda result, state, context: result,
        dry_run=None if dry_run else "skip",
    )
    step = dataclasses.replace(
        template,
        run=AgentStep(runtime, turn),
        annotation=_annotation(resolved, result_descriptor, specs, pipes),
    )
    agent = define_pipeline(
        id=id,
        steps=[step],
        targets=[step],
        finalize=step,
        name=name,
        description=description,
        implementation_version=implementation_version,
    )
    AGENT_DEFINITIONS.add(agent.definition.identity.definition_id)
    return agent

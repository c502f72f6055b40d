"""`define_agent`: compile a bounded decision loop into an ordinary pipeline."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._quote import quote, type_name
from tubeless._types import DecideCallback, InitialStateCallback, ReduceCallback, SchemaLike
from tubeless._usage import Usage
from tubeless.agent._approvals import (
    Approval,
    check_against,
    check_approvals,
    document_pending,
    unused_decisions,
)
from tubeless.agent._budget import Budget, plain_cost
from tubeless.agent._calls import CallsStep
from tubeless.agent._cassette import CassetteSession
from tubeless.agent._delegate import DELEGATION, AgentFacts, Delegation, PipelineToolSpec
from tubeless.agent._durability import Durability
from tubeless.agent._journal import AgentJournal
from tubeless.agent._journal_access import checkpoint_calls
from tubeless.agent._journal_document import Checkpoint, NodeIdentity
from tubeless.agent._journal_writer import Journal
from tubeless.agent._limits import AgentLimits, resolve_limits
from tubeless.agent._pipeline_tool import pipeline_tool_pipeline
from tubeless.agent._plan_block import AgentBlock
from tubeless.agent._run_extensions import APPROVALS, CASSETTE, EXECUTION_KEY
from tubeless.agent._state import own_state
from tubeless.agent._tools import (
    TOOL_NAME,
    TOOL_NAME_RULE,
    AgentTool,
    _schema,
    input_descriptor,
    tool_pipeline,
    tool_spec,
    tools_by_name,
)
from tubeless.agent._turn import (
    AgentRuntime,
    DecideStep,
    Execution,
    Invocation,
    ReduceStep,
    validated_edit,
)
from tubeless.errors import (
    AgentDefinitionError,
    AgentError,
    ApprovalRequiredError,
    ToolError,
    pending_approvals_of,
)
from tubeless.pipeline import (
    Pipeline,
    StepAnnotation,
    StepContext,
    create_steps,
    define_pipeline,
    fingerprint,
)
from tubeless.pipeline.lowlevel import (
    IterationRunner,
    extension_of,
    is_cancellation,
    meter_usage,
    observed,
    raise_if_cancelled,
    thread_pool_of,
)

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
    if isinstance(tools, (list, tuple)):
        tools = tools_by_name(tools)
    if not isinstance(tools, Mapping):
        raise AgentDefinitionError(
            "Agent tools must be a mapping of tool name to tool, or a list of named tools"
        )
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


def _approval_tools(specs: Mapping[str, Any]) -> list[str]:
    """Tools whose calls may wait for approval (their own rule, or inside a subagent)."""
    return [
        name
        for name, spec in specs.items()
        if spec.needs_approval is not False
        or (isinstance(spec, PipelineToolSpec) and spec.child_approvals)
    ]


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
    data = AgentBlock(
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


def _replay_step(inputs: Mapping[str, Any], context: StepContext) -> Any:
    """A reused or interrupted call, shown in traces as its own call run."""
    options = context.options
    context.report_attempt(1, options["attributes"])
    outcome = options["outcome"]
    if not outcome["ok"]:
        raise ToolError(outcome["error"]["code"], outcome["error"]["message"])
    return outcome["value"]


def _replay_pipeline(agent_id: str) -> Pipeline:
    step = create_steps().step("tool", run=_replay_step, dry_run=_replay_step)
    return define_pipeline(id=f"{agent_id}/journal", steps=[step], finalize=step)


def _tool_kind(spec: Any) -> str:
    if not isinstance(spec, PipelineToolSpec):
        return f"tool:{spec.replay}"
    kind = "durable-agent" if spec.durable else "agent" if spec.subagent else "pipeline"
    return f"{kind}:{spec.replay}"


def _options_fingerprint(options: Any) -> str:
    try:
        return fingerprint(options)
    except (TypeError, ValueError):
        return fingerprint(repr(options))


def _subagent_runtime(spec: object) -> AgentRuntime | None:
    """The runtime of the agent a subagent tool runs (`None` for any other tool)."""
    if not isinstance(spec, PipelineToolSpec) or not spec.subagent:
        return None
    step = spec.pipeline.execution_order[0].run
    return step.runtime if isinstance(step, AgentStep) else None


def _checked_edits(
    runtime: AgentRuntime, checkpoint: Checkpoint, approvals: Mapping[str, Approval]
) -> dict[tuple[str, str], Any]:
    """Validate every edit against its call's tool, wherever in the tree the call waits.

    Raises:
        AgentError: `TUBELESS_AGENT_APPROVAL_INVALID_EDIT` (nothing has run yet), or
            `TUBELESS_AGENT_CHECKPOINT_MISMATCH` when a saved subagent has another tool.
    """
    checked: dict[tuple[str, str], Any] = {}
    if not any(approval.kind == "edit" for approval in approvals.values()):
        return checked

    root = checkpoint.agent
    runtimes: dict[str, AgentRuntime | None] = {root.path: runtime} if root is not None else {}
    for call in checkpoint_calls(checkpoint):
        agent = runtimes.get(call.agent)
        spec = agent.tools.get(call.tool) if agent is not None else None
        approval = approvals.get(call.id)
        if approval is not None and approval.kind == "edit" and call.waiting:
            if spec is None:
                raise AgentError(
                    f"Checkpoint of agent {quote(call.agent)} has another tool "
                    f"{quote(call.tool)}; use a new execution key",
                    code="TUBELESS_AGENT_CHECKPOINT_MISMATCH",
                )
            checked[(call.agent, call.id)] = validated_edit(
                spec, call.tool, call.id, approval.input
            )
        if call.child is not None:
            runtimes[call.child_path] = _subagent_runtime(spec)
    return checked


class AgentStep:
    """Step `agent`: own the initial state, then iterate turns until one finishes."""

    def __init__(self, runtime: AgentRuntime, turn: Pipeline) -> None:
        self._runtime = runtime
        self._turn = turn
        self.definition_id = ""
        """The agent's own definition id, bound once the pipeline is defined."""
        self.agent_facts: AgentFacts | None = None
        """What the agent is (`agent_facts(pipeline)` reads it), bound with the id."""

    @property
    def runtime(self) -> AgentRuntime:
        """What the agent was defined with (a caller checks edits of its calls with it)."""
        return self._runtime

    def _identity(self, options: Any) -> NodeIdentity:
        runtime = self._runtime
        return NodeIdentity(
            agent=runtime.agent_id,
            definition_id=self.definition_id,
            options=_options_fingerprint(options),
            limits=runtime.limits.to_dict(),
            tools={name: _tool_kind(spec) for name, spec in runtime.tools.items()},
        )

    def _journal(
        self, context: StepContext, delegation: Delegation | None
    ) -> tuple[Journal | None, AgentJournal | None]:
        """Open this invocation's node: in the parent's journal, or under its own lease."""
        durability = self._runtime.durability
        if durability is None or context.dry_run:
            return None, None
        if delegation is not None and delegation.slot is not None:
            return None, delegation.slot.child(self._identity(context.options))
        journal = Journal.open(durability, context.options, extension_of(context, EXECUTION_KEY))
        try:
            root = AgentJournal.root(journal, self._identity(context.options))
            decisions = check_approvals(extension_of(context, APPROVALS))
            checkpoint = Checkpoint.from_dict(journal.document)
            if not checkpoint.finished:
                # Decisions (edits included) are checked against every waiting call of the
                # tree, before any callback.
                journal.approvals = check_against(checkpoint, decisions)
                journal.edits = _checked_edits(self._runtime, checkpoint, journal.approvals)
            elif (unused := unused_decisions(decisions)) is not None:
                context.log.warning(unused)
            return journal, root
        except BaseException:
            journal.close()
            raise

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> Any:
        raise_if_cancelled(context.signal)
        cassette = extension_of(context, CASSETTE)
        if cassette is None or context.dry_run:
            return self._call(inputs, context, None)
        with cassette.session() as session:
            return self._call(inputs, context, session)

    def _call(
        self, inputs: Mapping[str, Any], context: StepContext, session: CassetteSession | None
    ) -> Any:
        delegation = extension_of(context, DELEGATION)
        owned, journal = self._journal(context, delegation)
        try:
            return self._invoke(inputs, context, delegation, journal, session)
        except Exception as error:
            if journal is not None:
                # A cancelled execution stays resumable: save progress, never a failure.
                with contextlib.suppress(Exception):
                    if is_cancellation(error, context.signal):
                        journal.journal.flush()
                    else:
                        journal.fail(error)
            if owned is not None and pending_approvals_of(error):
                # The root lists every waiting call of the tree, subagents' included.
                with contextlib.suppress(Exception):
                    owned.flush()
                waiting = document_pending(Checkpoint.from_dict(owned.document))
                raise ApprovalRequiredError(waiting) from error
            raise
        finally:
            if owned is not None:
                owned.close()

    def _invocation(
        self,
        context: StepContext,
        delegation: Delegation | None,
        journal: AgentJournal | None,
        session: CassetteSession | None,
    ) -> Invocation:
        """The invocation's budget (restored from the journal) and its stable ids."""
        limits = self._runtime.limits
        if delegation is None:
            # A late handler keeps its permit: deadlines need permits that count.
            sole = limits.max_seconds is None and not any(
                isinstance(spec, PipelineToolSpec) or spec.timeout is not None
                for spec in self._runtime.tools.values()
            )
            budget = Budget(limits, context.run_id, sole=sole)
        else:
            budget = Budget(limits, context.run_id, delegation.budget)
            if delegation.slot is not None and journal is None:
                delegation.slot.budget = budget
            if delegation.attributes is not None and observed(context):
                context.report_attempt(1, delegation.attributes)
        ids = delegation.ids if delegation is not None else None
        if journal is not None:
            budget.calls, budget.decisions, budget.repairs = journal.totals()
            budget.input_tokens, budget.output_tokens, budget.cost = journal.usage_totals()
            execution_id, agent_path = journal.execution_id, journal.agent_path
        elif ids is not None:
            execution_id, agent_path = ids.id, f"{ids.agent}/{ids.turn}/{ids.call}"
        else:
            execution_id, agent_path = context.run_id, self._runtime.agent_id
        return Invocation(
            context.run_id,
            context.options,
            budget,
            journal=journal,
            execution_id=execution_id,
            agent_path=agent_path,
            tape=session.tape(agent_path) if session is not None else None,
            thread_pool=thread_pool_of(context),
        )

    def _first(self, context: StepContext, journal: AgentJournal | None) -> Execution | None:
        """The saved execution to resume from, or `None` to start from `initial_state`."""
        saved = journal.saved_execution() if journal is not None else None
        if saved is None:
            return None
        return Execution(own_state(saved.state), saved.turn, saved.state_version, saved.calls)

    def _invoke(
        self,
        inputs: Mapping[str, Any],
        context: StepContext,
        delegation: Delegation | None,
        journal: AgentJournal | None,
        session: CassetteSession | None,
    ) -> Any:
        runtime = self._runtime
        if journal is not None:
            if session is not None:
                session.refuse_resumed(journal.agent_path, journal.saved_execution() is not None)
            # A finished or failed execution reports what its journal says it spent.
            tokens_in, tokens_out, cost = journal.usage_totals()
            spent = Usage(input_tokens=tokens_in, output_tokens=tokens_out, cost=plain_cost(cost))
            meter_usage(context, lambda: spent)
            finished, result = journal.saved_result()
            if finished:
                return result
            failure = journal.saved_failure()
            if failure is not None:
                raise failure
        invocation = self._invocation(context, delegation, journal, session)
        meter_usage(context, invocation.budget.usage)
        restored = self._first(context, journal)

        def first(_inputs: Any, _context: Any) -> Execution:
            if restored is not None:
                return restored
            return Execution(own_state(runtime.initial_state(context.options)), 1, 0, 0)

        start = 1 if restored is None else restored.turn
        try:
            runner = IterationRunner(
                step_id="agent",
                pipeline=self._turn,
                max_iterations=runtime.limits.max_turns,
                unit="turn",
                first_index=start,
                initial_state=first,
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
    tools: Mapping[str, AgentTool] | Sequence[AgentTool] | None = None,
    reduce: ReduceCallback | None = None,
    dry_run: DecideCallback | None = None,
    limits: AgentLimits | Mapping[str, int] | None = None,
    name: str | None = None,
    description: str | None = None,
    implementation_version: str | None = None,
    result_json_schema: Mapping[str, Any] | None = None,
    durability: Durability | None = None,
) -> Pipeline:
    """Compile an agent: an ordinary pipeline with the single step (and target) `agent`.

    Args:
        id: the pipeline id; turns run as `<id>/turn`, tools as `<id>/tool/<name>`.
        input_schema: validates the agent's options once, at pipeline entry.
        result_schema: validates (and may transform) the raw finish result, once.
        initial_state: `initial_state(validated_options)` -> plain data (copied, frozen).
        decide: `decide(state, context)` -> an untrusted decision, checked every time.
        tools: tool name -> tool made by `define_tool` or `pipeline_tool` (a subagent or
            an ordinary pipeline run as a child of the call); or a list (or tuple) of
            named tools made by `@tubeless.tool`, each named by its `name`.
        reduce: `reduce(state, outcomes)` -> next plain state; without it state is kept.
        dry_run: preview decision source used instead of `decide` in dry runs; without
            it a dry run skips the agent.
        limits: `AgentLimits` or a dict with `max_turns`, `max_calls`, `max_decisions`,
            `max_depth`, `max_concurrency`, `max_repairs` (invalid decisions sent back to
            `decide` as `context.rejection` instead of failing the run; default 0).
        name: display name of the pipeline.
        description: description of the pipeline.
        implementation_version: bump it when prompts, validators, reducers or handlers
            change meaning; it changes only `definitionId`.
        result_json_schema: explicit raw-result descriptor when the schema has none.
        durability: `Durability(store=, key=)` makes the agent crash-safe: it journals
            every decision, admission, call intent and outcome to the store, and a run
            with the same key resumes where the last one stopped (needs
            `implementation_version`). Plans and dry runs never open the store.
            Needed when a tool (or a subagent's tool) has `needs_approval`; a durable
            subagent joins its caller's journal, so the root must be durable too.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`, naming the problem.
        PipelineDefinitionError: for pipeline-level mistakes such as a blank id.
    """
    _check_texts(
        id=id, name=name, description=description, implementation_version=implementation_version
    )
    options_schema = _schema(input_schema, "Agent input")
    _check_callbacks(initial_state, decide, reduce, dry_run)
    if durability is not None:
        if not isinstance(durability, Durability):
            raise AgentDefinitionError("Agent durability must be a tubeless.Durability")
        if implementation_version is None:
            raise AgentDefinitionError(
                "A durable agent requires implementation_version (bump it when a change "
                "would make saved checkpoints mean something else)"
            )
    resolved = resolve_limits(limits)
    result = _schema(result_schema, "Agent result")
    result_descriptor = input_descriptor(result, result_json_schema, "Agent result")
    specs = _registered_tools(id, tools)
    approval_tools = _approval_tools(specs)
    if approval_tools and durability is None:
        raise AgentDefinitionError(
            f"Agent {id}: tool {approval_tools[0]} has calls that need approval, which needs a "
            "durable agent (give durability=Durability(store=..., key=...)): a call waits "
            "for a person in the agent's journal"[:600]
        )
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
        durability=durability,
        replay_pipeline=_replay_pipeline(id),
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
    agent_step = AgentStep(runtime, turn)
    step = dataclasses.replace(
        template,
        run=agent_step,
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
    agent_step.definition_id = agent.definition.identity.definition_id
    agent_step.agent_facts = AgentFacts(
        agent_step.definition_id, durable=durability is not None, approvals=bool(approval_tools)
    )
    return agent

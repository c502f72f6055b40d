"""The agent harness: tools, limits, usage budgets and a bounded decide -> calls -> reduce loop.

Glossary (one name per concept; code, docs and messages use these):

execution
    One logical invocation of a durable agent, which may take several attempts (runs):
    it survives crashes and waits for approval. Its ids are `ExecutionIds` (`.id`, the
    stable agent path `.agent`, `.turn`, `.call`). Not to be confused with
    `tubeless.pipeline.ExecutionContext`, which is what skip predicates and finalizers of
    *one run* receive (the pipeline core's name, kept).
execution key
    The name an execution is saved under in a checkpoint store: `Durability.key(options)`,
    or `context={"execution_key": ...}` for the root run. Same key, same execution: run
    again to resume it.
checkpoint
    The one saved document of an execution (every agent node of its tree), as a
    `CheckpointStore` holds it under the execution key.
journal
    The writer of a checkpoint while an attempt runs: it batches and syncs every receipt
    (reservation, decision, call intent and outcome, reduced state) before the agent goes
    on. Internally `Journal` is the execution's writer and `AgentJournal` one agent
    node's part of it.
lease
    Ownership of one execution key by one attempt (`CheckpointLease`), from
    `CheckpointStore.acquire` until closed; a second attempt on the same key is refused.
subagent
    An agent used as another agent's tool (`pipeline_tool(agent)`): it joins the calling
    agent's budget, and its journal when both are durable. "Child agent" means the same.
delegation
    What a subagent inherits from the call that started it: the caller's budget, the
    call's trace attributes, its place in the journal and its ids (`Delegation`, handed
    to the child run through a run extension).
pipeline tool
    A tool whose call runs a pipeline (`pipeline_tool(...)`); a subagent is the pipeline
    tool whose pipeline is an agent. Its private definition is `PipelineToolSpec`.
fold / projection
    Reading a trace: a *fold* (`tubeless.trace.RunFold`, `StepFold`) consumes one run's
    records as they arrive; a *projection* (`project_runs`) folds a whole record stream
    into frozen `Stored*` values (`StoredRun`, `StoredStep`, ...); an agent's *view*
    (`AgentView`, `AgentHistory`) is the projection of an agent's records.
"""

from tubeless._public import show_public_module as _show_public_module
from tubeless._types import (
    DecideCallback,
    FunctionToolOptions,
    InitialStateCallback,
    ReduceCallback,
    RemoteToolHandler,
    ToolDryRun,
    ToolHandler,
    ToolOptions,
)
from tubeless._usage import Usage
from tubeless.agent._agent import define_agent
from tubeless.agent._agent_contexts import DecisionContext, ToolContext
from tubeless.agent._approvals import (
    Approval,
    approve,
    checkpoint_pending_approvals,
    edit,
    reject,
)
from tubeless.agent._cassette import Cassette, CassetteMode, CassetteTools
from tubeless.agent._cassette_document import CassetteDocument, RecordedAgent, RecordedTurn
from tubeless.agent._checkpoint_lease import CheckpointLease, CheckpointStore
from tubeless.agent._checkpoint_store import SqliteCheckpointStore
from tubeless.agent._deadline import Retry
from tubeless.agent._decisions import AgentCall, ContinueDecision, FinishDecision, parse_decision
from tubeless.agent._durability import Durability
from tubeless.agent._function_tools import tool, tool_from_function
from tubeless.agent._journal import ExecutionIds
from tubeless.agent._limits import AgentLimits
from tubeless.agent._pipeline_tool import pipeline_tool
from tubeless.agent._postgres_checkpoints import PostgresCheckpointStore
from tubeless.agent._remote import RemoteSignal, RemoteToolContext
from tubeless.agent._state import own_state
from tubeless.agent._tools import AgentTool, define_tool
from tubeless.agent._usage_ledger import UsageReservation
from tubeless.errors import ApprovalRequiredError, PendingApproval, ToolError

__all__ = [
    "AgentCall",
    "AgentLimits",
    "AgentTool",
    "Approval",
    "ApprovalRequiredError",
    "Cassette",
    "CassetteDocument",
    "CassetteMode",
    "CassetteTools",
    "CheckpointLease",
    "CheckpointStore",
    "ContinueDecision",
    "DecideCallback",
    "DecisionContext",
    "Durability",
    "ExecutionIds",
    "FinishDecision",
    "FunctionToolOptions",
    "InitialStateCallback",
    "PendingApproval",
    "PostgresCheckpointStore",
    "RecordedAgent",
    "RecordedTurn",
    "ReduceCallback",
    "RemoteSignal",
    "RemoteToolContext",
    "RemoteToolHandler",
    "Retry",
    "SqliteCheckpointStore",
    "ToolContext",
    "ToolDryRun",
    "ToolError",
    "ToolHandler",
    "ToolOptions",
    "Usage",
    "UsageReservation",
    "approve",
    "checkpoint_pending_approvals",
    "define_agent",
    "define_tool",
    "edit",
    "own_state",
    "parse_decision",
    "pipeline_tool",
    "reject",
    "tool",
    "tool_from_function",
]

_show_public_module(__name__, __all__, globals())

"""The agent harness: tools, limits, usage budgets and a bounded decide -> calls -> reduce loop."""

from tubeless._public import show_public_module as _show_public_module
from tubeless._types import (
    DecideCallback,
    InitialStateCallback,
    ReduceCallback,
    RemoteToolHandler,
    ToolDryRun,
    ToolHandler,
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
from tubeless.agent._checkpoint_store import (
    CheckpointLease,
    CheckpointStore,
    SqliteCheckpointStore,
)
from tubeless.agent._deadline import Retry
from tubeless.agent._decisions import AgentCall, ContinueDecision, FinishDecision, parse_decision
from tubeless.agent._function_tools import tool, tool_from_function
from tubeless.agent._journal import Durability, ExecutionIds
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

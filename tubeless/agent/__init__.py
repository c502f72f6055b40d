"""The agent harness: tools, limits and a bounded decide -> calls -> reduce loop."""

from tubeless._public import show_public_module as _show_public_module
from tubeless._types import (
    DecideCallback,
    InitialStateCallback,
    ReduceCallback,
    RemoteToolHandler,
    ToolDryRun,
    ToolHandler,
)
from tubeless.agent._agent import define_agent
from tubeless.agent._agent_contexts import DecisionContext, ToolContext
from tubeless.agent._approvals import (
    Approval,
    approve,
    checkpoint_pending_approvals,
    edit,
    reject,
)
from tubeless.agent._checkpoint_store import (
    CheckpointLease,
    CheckpointStore,
    SqliteCheckpointStore,
)
from tubeless.agent._decisions import AgentCall, ContinueDecision, FinishDecision, parse_decision
from tubeless.agent._function_tools import tool, tool_from_function
from tubeless.agent._journal import Durability, ExecutionIds
from tubeless.agent._limits import AgentLimits
from tubeless.agent._pipeline_tool import pipeline_tool
from tubeless.agent._remote import RemoteSignal, RemoteToolContext
from tubeless.agent._state import own_state
from tubeless.agent._tools import AgentTool, define_tool
from tubeless.errors import ApprovalRequiredError, PendingApproval, ToolError

__all__ = [
    "AgentCall",
    "AgentLimits",
    "AgentTool",
    "Approval",
    "ApprovalRequiredError",
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
    "ReduceCallback",
    "RemoteSignal",
    "RemoteToolContext",
    "RemoteToolHandler",
    "SqliteCheckpointStore",
    "ToolContext",
    "ToolDryRun",
    "ToolError",
    "ToolHandler",
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

"""The agent harness: tools, limits and a bounded decide -> calls -> reduce loop."""

from tubeless.agent._agent import define_agent
from tubeless.agent._context import DecisionContext, ToolContext
from tubeless.agent._decisions import AgentCall, ContinueDecision, FinishDecision, parse_decision
from tubeless.agent._function_tools import tool_from_function
from tubeless.agent._limits import AgentLimits
from tubeless.agent._state import own_state
from tubeless.agent._tools import AgentTool, define_tool
from tubeless.errors import ToolError

__all__ = [
    "AgentCall",
    "AgentLimits",
    "AgentTool",
    "ContinueDecision",
    "DecisionContext",
    "FinishDecision",
    "ToolContext",
    "ToolError",
    "define_agent",
    "define_tool",
    "own_state",
    "parse_decision",
    "tool_from_function",
]

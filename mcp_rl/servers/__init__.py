"""Talking to any MCP server.

spec = ServerSpec.parse("uvx mcp-server-time")          # or a URL, or ServerSpec.from_config(file, name)
spec = spec.with_connection(call_timeout=10)           # timeouts, result budget (ConnectionSettings)
async with ServerSession(spec, policy=ToolPolicy()) as s:
    s.tools                     # list[ToolSpec] the policy allows (OpenAI form: t.openai())
    s.excluded                  # {name: reason} for tools the policy removed
    classify(tool)              # ToolClass: kind read / write / irreversible, and the reason
    r = await s.call("get_current_time", {"timezone": "Asia/Tokyo"})   # -> ToolResult, never raises
    await s.reset()             # between episodes: user reset command, or restart for stdio
"""

from mcp_rl.servers.connection import ConnectionSettings
from mcp_rl.servers.policy import ToolPolicy
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.servers.session import ServerSession
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.servers.tool_class import ToolClass, classify
from mcp_rl.servers.tools import ToolAnnotations, ToolSpec

__all__ = [
    "CallStatus",
    "ConnectionSettings",
    "ServerSession",
    "ServerSpec",
    "ToolAnnotations",
    "ToolClass",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "classify",
]

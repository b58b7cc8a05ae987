"""mcp-rl: teach a language model to use the tools of any MCP server.

The public API is small and typed; heavier parts (models, training) live in submodules and are
imported only when used, so `import mcp_rl` stays fast.
"""

from mcp_rl.errors import (
    ConfigError,
    JudgeError,
    McpRlError,
    ModelError,
    ServerCrashed,
    ServerError,
    ServerStartError,
    ServerTimeout,
    TaskError,
)
from mcp_rl.servers import CallStatus, ServerSession, ServerSpec, ToolPolicy, ToolResult, ToolSpec
from mcp_rl.trajectory import ToolCallRecord, Trajectory, load_trajectories, save_trajectories

__version__ = "0.1.0"

__all__ = [
    "CallStatus",
    "ConfigError",
    "JudgeError",
    "McpRlError",
    "ModelError",
    "ServerCrashed",
    "ServerError",
    "ServerSession",
    "ServerSpec",
    "ServerStartError",
    "ServerTimeout",
    "TaskError",
    "ToolCallRecord",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "Trajectory",
    "load_trajectories",
    "save_trajectories",
]

"""The agent loop: a model working tasks against a live MCP server, recorded as trajectories.

async with SessionPool(ServerSpec.parse("uvx mcp-server-time"), size=4) as pool:
    trajs = await run_group(model, pool, "What time is it in Tokyo?", n=4, config=RolloutConfig())
"""

from mcp_rl.rollout.loop import RolloutConfig, as_task, run_episode, run_group, run_tasks
from mcp_rl.rollout.pool import PooledSession, SessionPool
from mcp_rl.rollout.tokens import TemplateDriftError, TokenTrace, verify_trace

__all__ = [
    "PooledSession",
    "RolloutConfig",
    "SessionPool",
    "TemplateDriftError",
    "TokenTrace",
    "as_task",
    "run_episode",
    "run_group",
    "run_tasks",
    "verify_trace",
]

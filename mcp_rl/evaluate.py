"""Scoring a batch of episodes and summarizing it: reward, success with its interval, call quality."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from judges import (
    FreshReference,
    JudgeCache,
    Ruler,
    decide_success,
    judge_trajectories,
    refresh_reference,
    success_rate,
)
from judges.reward import RewardConfig
from mcp_rl.models.base import ChatModel
from mcp_rl.rollout import SessionPool
from mcp_rl.servers import CallStatus
from mcp_rl.trajectory import Trajectory
from scenario_gen.task import Task


async def fresh_references(pool: SessionPool, tasks: list[Task]) -> dict[str, FreshReference]:
    """Re-run the reference calls of tasks whose answer moves with time or state."""
    out: dict[str, FreshReference] = {}
    for task in tasks:
        if task.answer_depends_on_state and task.reference_calls:
            async with pool.acquire() as ps:
                out[task.id] = await refresh_reference(task, ps.session.call)
    return out


async def score(
    trajs: list[Trajectory],
    tasks: Mapping[str, Task],
    pool: SessionPool,
    ruler: Ruler | None,
    reward: RewardConfig,
    judge: ChatModel | None,
    cache: JudgeCache | None,
    on_group: Callable[[Any], None] | None = None,
    judge_grounded: bool = True,
) -> dict[str, Any]:
    """Reward every trajectory (RULER + checks) and decide its success. Returns judge stats.
    `on_group` is called as the judge finishes each group (progress display)."""
    involved = list({t.task_id: tasks[t.task_id] for t in trajs if t.task_id in tasks}.values())
    fresh = await fresh_references(pool, involved)
    report = await judge_trajectories(
        trajs, tasks, ruler, reward, tools=pool.tools, fresh=fresh, on_group=on_group,
        judge_grounded=judge_grounded,
    )  # fmt: skip
    await decide_all(trajs, tasks, judge, cache, fresh)
    u = report.usage
    return {
        "unscored_groups": report.unscored,
        "checked_only_groups": report.checked_only,
        "judge_calls": u.calls,
        "judge_cached": u.cached,
        "judge_tokens": u.prompt_tokens + u.completion_tokens,
        "judge_cost_usd": u.cost_usd,
    }


async def decide_all(
    trajs: list[Trajectory],
    tasks: Mapping[str, Task],
    judge: ChatModel | None,
    cache: JudgeCache | None,
    fresh: Mapping[str, FreshReference] | None = None,
) -> None:
    """Success of each episode (reference check, else a binary judge verdict) into its metadata."""
    fresh = fresh or {}
    limiter = anyio.CapacityLimiter(4)

    async def one(t: Trajectory) -> None:
        async with limiter:
            task, ref = tasks.get(t.task_id), fresh.get(t.task_id)
            if task is not None and ref is not None:
                # the answer valid now; None when the reference went stale (then the judge decides)
                task = task.model_copy(update={"reference_answer": ref.reference_answer})
            s = await decide_success(t, task, judge, cache=cache)
        t.metadata["success"] = s.success
        t.metadata["success_method"] = s.method
        t.metadata["success_explanation"] = s.explanation

    async with anyio.create_task_group() as tg:
        for t in trajs:
            tg.start_soon(one, t)


def summarize(trajs: list[Trajectory]) -> dict[str, Any]:
    """The figures a step or an evaluation reports."""
    calls = [c for t in trajs for c in t.tool_calls]
    sent = [c for c in calls if c.valid]
    errors = [c for c in sent if c.status is not CallStatus.OK]
    rewards = [t.reward for t in trajs if t.reward is not None]
    rate = success_rate(t.metadata.get("success") for t in trajs)
    per_tool: dict[str, dict[str, int]] = {}
    for name, count in Counter(c.name for c in calls).items():
        tool_calls = [c for c in calls if c.name == name]
        per_tool[name] = {
            "calls": count,
            "invalid": sum(1 for c in tool_calls if not c.valid),
            "errors": sum(1 for c in tool_calls if c.valid and c.status is not CallStatus.OK),
        }
    n = max(1, len(trajs))
    return {
        "episodes": len(trajs),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "success": rate.rate,
        "success_low": rate.low,
        "success_high": rate.high,
        "success_n": rate.n,
        "success_unknown": rate.unknown,
        "valid_call_rate": len(sent) / len(calls) if calls else None,
        "tool_error_rate": len(errors) / len(sent) if sent else None,
        "answered_rate": sum(1 for t in trajs if t.final_answer) / n,
        "mean_turns": sum(t.turns for t in trajs) / n,
        "calls_per_episode": len(calls) / n,
        "per_tool": per_tool,
    }

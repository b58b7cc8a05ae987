"""Scoring a batch of episodes and summarizing it: reward, checked and judged success with their
intervals (per task), the faithfulness gates, call quality."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from judges import JudgeCache, Scorer, refresh_reference
from judges.regrade import episode_references
from judges.success import SuccessRate, decide_success, has_reference, task_success
from mcp_rl.models.base import ChatModel
from mcp_rl.rollout import PooledSession
from mcp_rl.servers import CallStatus
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory


async def reference_probe(task: Task, ps: PooledSession) -> dict[str, Any] | None:
    """Run on an episode's own session right after it (`run_tasks(probe=...)`): re-run the reference
    calls of a task whose answer moves with time or state, so the episode is graded against the world
    it saw, not the one at the end of the whole batch."""
    if not (task.answer_depends_on_state and task.reference_calls):
        return None
    fresh = await refresh_reference(task, ps.session.call)
    return {"reference": fresh.reference_answer, "changed": fresh.changed, "reason": fresh.reason}


def references_of(trajs: list[Trajectory], tasks: Mapping[str, Task]) -> dict[str, list[str | None]]:
    """Every episode's valid reference answers (see `judges.regrade.episode_references`)."""
    return {
        t.id: episode_references(tasks.get(t.task_id), t.tool_calls, t.metadata.get("probe")) for t in trajs
    }


async def score(
    trajs: list[Trajectory],
    tasks: Mapping[str, Task],
    tools: list[Any],
    scorer: Scorer,
    on_group: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Reward every trajectory (`scorer`: RULER + checks) and decide its checked success (training
    steps never ask for judged success: that is an evaluation's figure). Returns the judge's stats.
    `on_group` is called as the judge finishes each group (progress display)."""
    refs = references_of(trajs, tasks)
    report = await scorer.score(trajs, tasks, tools, refs, on_group)
    await decide_all(trajs, tasks, None, None)
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
) -> None:
    """Success of each episode into its metadata: `checked` (tasks with a reference), `judged` (tasks
    without one, when a judge is given), the gates, and `success`, whichever of the two applies."""
    limiter = anyio.CapacityLimiter(4)
    refs = references_of(trajs, tasks)

    async def one(t: Trajectory) -> None:
        task = tasks.get(t.task_id)
        async with limiter:
            s = await decide_success(t, task, judge, references=refs[t.id], cache=cache)
        grounded = has_reference(task)
        t.metadata["checked"] = s.success if grounded else None
        t.metadata["judged"] = None if grounded else s.success
        t.metadata["success"] = s.success
        t.metadata["success_method"] = s.method
        t.metadata["success_explanation"] = s.explanation
        t.metadata["gates"] = s.gates
        t.metadata["answered_without_tools"] = s.answered_without_tools
        t.metadata["reference"] = s.reference

    async with anyio.create_task_group() as tg:
        for t in trajs:
            tg.start_soon(one, t)


def _rate_fields(prefix: str, rate: SuccessRate) -> dict[str, Any]:
    return {
        prefix: rate.rate,
        f"{prefix}_low": rate.low,
        f"{prefix}_high": rate.high,
        f"{prefix}_n": rate.n,
        f"{prefix}_successes": rate.successes,
        f"{prefix}_episodes": rate.episodes,
        f"{prefix}_unknown": rate.unknown,
    }


def _share(trajs: list[Trajectory], gate: str) -> float | None:
    """Share of episodes where `gate` held, among those where it applies."""
    values = [t.metadata.get("gates", {}).get(gate) for t in trajs]
    known = [v for v in values if v is not None]
    return sum(1 for v in known if v) / len(known) if known else None


def summarize(trajs: list[Trajectory]) -> dict[str, Any]:
    """The figures a step or an evaluation reports. `success` is checked success (tasks with a
    reference), per task with its interval, None when not measured; judged success is apart."""
    calls = [c for t in trajs for c in t.tool_calls]
    sent = [c for c in calls if c.valid]
    errors = [c for c in sent if c.status is not CallStatus.OK]
    rewards = [t.reward for t in trajs if t.reward is not None]
    checked, per_task = task_success((t.task_id, t.metadata.get("checked")) for t in trajs)
    judged, per_task_judged = task_success((t.task_id, t.metadata.get("judged")) for t in trajs)
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
        **_rate_fields("success", checked),
        **_rate_fields("judged", judged),
        "per_task_success": per_task,
        "per_task_judged": per_task_judged,
        "answered_without_tools": sum(1 for t in trajs if t.metadata.get("answered_without_tools")),
        "pasted_rate": 1 - s if (s := _share(trajs, "not_pasted")) is not None else None,
        "answer_faithful_rate": _share(trajs, "answer_faithful"),
        "arguments_faithful_rate": _share(trajs, "arguments_faithful"),
        "valid_call_rate": len(sent) / len(calls) if calls else None,
        # the share other runtimes would see as tool calls (llama.cpp, vLLM hermes, Ollama): see ParsedCall.tagged
        "tagged_call_rate": sum(c.tagged for c in calls) / len(calls) if calls else None,
        "tool_error_rate": len(errors) / len(sent) if sent else None,
        "answered_rate": sum(1 for t in trajs if t.final_answer) / n,
        "mean_turns": sum(t.turns for t in trajs) / n,
        "calls_per_episode": len(calls) / n,
        "per_tool": per_tool,
    }


def decision_figure(ev: Mapping[str, Any]) -> tuple[str, float | None, dict[str, float]]:
    """What val decisions (best checkpoint, plateau) are made on: checked success where it was
    measured, else judged success; (which, rate, per-task scores). Rate None: nothing measured."""
    if ev.get("success") is not None:
        return "checked", ev["success"], ev.get("per_task_success") or {}
    return "judged", ev.get("judged"), ev.get("per_task_judged") or {}


def improvement(
    new: Mapping[str, float], best: Mapping[str, float], min_improvement: float
) -> tuple[bool, str]:
    """Is an evaluation better than the best so far, on the same val tasks (per-task scores)?

    Paired, since both ran the same tasks: c = tasks newly solved, b = tasks newly failed (fractions
    when a task's episodes disagree), gain = c - b. Better only when the gain is at least two tasks, at
    least `min_improvement` of the tasks, and more than one standard error of the paired difference
    (sqrt(b + c), as in McNemar's test). Greedy evaluation of 12 tasks at a true 50% picks a "best" of
    about 72% out of 10 evaluations by chance when any rise counts; this rule asks for more than noise."""
    tasks = [t for t in new if t in best]
    if not tasks:
        return bool(new), "no earlier figure on these tasks" if new else "nothing measured"
    c = sum(max(0.0, new[t] - best[t]) for t in tasks)
    b = sum(max(0.0, best[t] - new[t]) for t in tasks)
    gain = c - b
    need = max(2.0, min_improvement * len(tasks))
    if gain >= need and gain > (b + c) ** 0.5:
        return True, f"+{gain:g} tasks (solved {c:g} more, lost {b:g})"
    return False, f"{gain:+g} tasks (solved {c:g} more, lost {b:g}; needs +{need:g} and > sqrt({b + c:g}))"


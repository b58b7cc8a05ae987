"""The optional solvability pass (`mcp-rl generate --check-with MODEL`).

A stronger model attempts each task a few times against the live server. Tasks it never solves are
dropped (no one can learn from a task no one can do, and it may be wrong). With a policy model as
well, each task is marked with the policy's solve rate: tasks it always or never solves give GRPO no
signal (every episode in the group scores the same), which the trainer can use to sample them less.

Grounded tasks are checked against their reference answer, refreshed by re-running the reference
calls when it depends on time or state; other tasks by the checker's own binary verdict.
"""

from __future__ import annotations

from typing import Any

from mcp_rl.models.base import ChatModel
from mcp_rl.task import Task
from scenario_gen.grounded import verify


async def _solve_rates(
    model: ChatModel, pool: Any, tasks: list[Task], attempts: int, judge: ChatModel
) -> list[float | None]:
    from judges.success import decide_success
    from mcp_rl.rollout.loop import RolloutConfig, run_tasks

    groups = await run_tasks(
        model, pool, list(tasks), n=attempts, config=RolloutConfig(temperature=0.7, max_turns=6)
    )
    rates: list[float | None] = []
    for task, trajs in zip(tasks, groups, strict=True):
        reference = task.reference_answer
        if task.answer_depends_on_state and task.reference_calls:
            outcome = await verify(pool.first, task)
            reference = outcome.fresh_answer or reference
        verdicts = [await decide_success(t, task, judge, references=[reference]) for t in trajs]
        known = [v.success for v in verdicts if v.success is not None]
        rates.append(sum(known) / len(known) if known else None)
    return rates


async def check_solvability(
    tasks: list[Task],
    pool: Any,
    checker: ChatModel,
    *,
    attempts: int = 2,
    policy: ChatModel | None = None,
) -> list[Task]:
    """Tasks the checker solved at least once (or could not be judged), marked in `notes`.

    `pool` is a `mcp_rl.rollout.pool.SessionPool` on the same server."""
    rates = await _solve_rates(checker, pool, tasks, attempts, checker)
    policy_rates = await _solve_rates(policy, pool, tasks, attempts, checker) if policy is not None else None
    kept: list[Task] = []
    for i, (task, rate) in enumerate(zip(tasks, rates, strict=True)):
        if rate == 0.0:
            continue
        notes = {**task.notes, "checker_solve_rate": rate}
        if policy_rates is not None:
            p = policy_rates[i]
            notes["policy_solve_rate"] = p
            notes["grpo_signal"] = (
                "unknown" if p is None else ("always" if p == 1.0 else "never" if p == 0.0 else "mixed")
            )
        kept.append(task.model_copy(update={"notes": notes}))
    return kept

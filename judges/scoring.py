"""Judge saved or fresh trajectories end to end: group, RULER, checks, reward, stored on each one.

This is what the training loop and `mcp-rl judge` call. A group the judge could not score is
counted in the report, logged with its reason, marked on each of its trajectories, and still gets
a reward from the checks alone, so the run goes on and nothing is skipped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from judges.checks import run_checks
from judges.regrade import graded_reference
from judges.reward import RewardConfig, apply_reward
from judges.ruler import GroupScore, Ruler
from judges.success import has_reference
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory
from mcp_rl.usage import Usage

log = logging.getLogger("mcp_rl.judges")


class JudgeReport(BaseModel):
    groups: list[GroupScore] = []
    unscored: int = 0
    """Groups the judge could not score (their rewards come from the checks alone)."""
    checked_only: int = 0
    """Groups left to the checks on purpose (grounded tasks, with `judge_grounded=False`)."""
    usage: Usage = Usage()

    @property
    def unscored_reasons(self) -> dict[str, str]:
        return {g.group_id: g.reason for g in self.groups if not g.scored}


def group_trajectories(trajs: list[Trajectory]) -> dict[str, list[Trajectory]]:
    """By `group_id`, else by `task_id`, in first-seen order."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(t.group_key, []).append(t)
    return groups


def _with_reference(task: Task | None, reference: str | None) -> Task | None:
    if task is None or not has_reference(task):
        return task
    # A stale reference must not grade anything: drop it (the group then goes to the judge).
    return task.model_copy(update={"reference_answer": reference})


async def judge_trajectories(
    trajs: list[Trajectory],
    tasks: Mapping[str, Task] | None = None,
    ruler: Ruler | None = None,
    reward: RewardConfig | None = None,
    tools: list[Any] | None = None,
    references: Mapping[str, list[str | None]] | None = None,
    on_group: Callable[[GroupScore], None] | None = None,
    judge_grounded: bool = True,
) -> JudgeReport:
    """Score every group with `ruler` (None: checks only), then set reward and components on each
    trajectory. `references` maps trajectory ids to the reference answers valid for that episode
    (`judges.regrade.episode_references`; default: the task's own). `judge_grounded=False`: groups of
    a task with a (still valid) reference answer are graded by the checks alone, the judge is asked
    only where nothing else can grade."""
    tasks = tasks or {}
    grouped = group_trajectories(trajs)

    def reference(t: Trajectory) -> str | None:
        task = tasks.get(t.task_id)
        refs = references.get(t.id) if references is not None else None
        if refs is None:
            return task.reference_answer if task is not None else None
        return graded_reference(refs, t.final_answer)

    inputs = []
    for members in grouped.values():
        # The judge sees one reference per group: the first episode's (they differ only by seconds).
        inputs.append((members, _with_reference(tasks.get(members[0].task_id), reference(members[0])), tools))
    report = JudgeReport()
    judged = [i for i, (_, task, _) in enumerate(inputs) if judge_grounded or not has_reference(task)]
    scores: dict[int, GroupScore] = {}
    if ruler is not None and judged:
        report.groups = await ruler.score_groups([inputs[i] for i in judged], on_group)
        scores = dict(zip(judged, report.groups, strict=True))
    report.checked_only = len(inputs) - len(scores) if ruler is not None else 0
    for i, (members, _, _) in enumerate(inputs):
        gs = scores.get(i)
        if gs is not None:
            report.usage = report.usage + gs.usage
            if not gs.scored:
                report.unscored += 1
                log.warning("judge could not score group %s: %s", gs.group_id, gs.reason)
        for t in members:
            score = gs.scores.get(t.id) if gs is not None and gs.scored else None
            explanation = gs.explanations.get(t.id, "") if gs is not None else ""
            own = _with_reference(tasks.get(t.task_id), reference(t))
            apply_reward(t, run_checks(t, own), score, explanation, reward)
            if gs is not None and not gs.scored:
                t.metadata["judge_unscored"] = gs.reason
    return report


@dataclass
class Scorer:
    """What turns a step's episodes into rewards, assembled once (what verifiers calls a rubric): the
    RULER judge (None: the checks alone), the reward's weights and gates over the check components
    (`judges.checks`), and whether groups with a reference answer go to the judge too."""

    ruler: Ruler | None = None
    reward: RewardConfig = field(default_factory=RewardConfig)
    judge_grounded: bool = False

    def asks_judge(self, task: Task | None) -> bool:
        """Whether a group of this task goes to the judge."""
        return self.ruler is not None and (self.judge_grounded or not has_reference(task))

    async def score(
        self,
        trajs: list[Trajectory],
        tasks: Mapping[str, Task],
        tools: list[Any] | None = None,
        references: Mapping[str, list[str | None]] | None = None,
        on_group: Callable[[GroupScore], None] | None = None,
    ) -> JudgeReport:
        """Rewards and components on every trajectory; see `judge_trajectories`."""
        return await judge_trajectories(
            trajs, tasks, self.ruler, self.reward, tools, references, on_group, self.judge_grounded
        )

"""Which train tasks a step works on: uniform draws, or online difficulty filtering.

A GRPO group teaches only when its rewards differ: grpo.py (section 1) drops a group whose rewards
are all equal. A weak policy's groups are mostly all-fail, and a strong one's all-pass, so uniform
draws spend most episodes on groups that are thrown away. Measured 2026-12-03 on `mcp-server-time`
(docs/results.md): from step 6 of 8 on, 4 of 4 groups a step were flat and nothing trained.

`signal` sampling keeps, for each train task, how many of its groups in a row were flat, and draws
without replacement with

    weight(task) = 1              never drawn yet, or its last group had signal
                 = decay ** k     its last k groups were flat, k < retire_after
                 = 0              retired: flat retire_after times in a row

When fewer tasks keep a weight than a step needs, the retired ones are drawn again (uniformly among
themselves): the policy has changed since, and an empty step teaches nothing either. The history is
read from the run's committed step files, so a resumed run draws exactly what an unbroken one would.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_rl.grpo_config import group_advantages
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory


class SamplingConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    task_sampling: Literal["uniform", "signal"] = Field(default="signal", json_schema_extra={"cli": True})
    """How a step picks its train tasks: `uniform`, or `signal` (tasks whose recent groups had reward
    differences first; tasks flat several times in a row retired for a while)."""
    decay: float = Field(default=0.5, gt=0.0, le=1.0, json_schema_extra={"cli": False})
    retire_after: int = Field(default=3, ge=1, json_schema_extra={"cli": False})


def flat_group(trajs: list[Trajectory]) -> bool:
    """True when the group's rewards are all equal (GRPO drops it: no gradient)."""
    rewards = [t.reward for t in trajs if t.reward is not None]
    return len(rewards) < 2 or group_advantages(rewards, False) is None  # type: ignore[arg-type]


class TaskSampler:
    def __init__(self, train: list[Task], config: SamplingConfig, seed: int) -> None:
        self.train, self.cfg, self.seed = train, config, seed
        self.flat_in_a_row: dict[str, int] = {}
        """Per task id that was drawn: how many of its last groups were flat (0: the last had signal)."""

    def record(self, trajs: Iterable[Trajectory]) -> None:
        """Take one step's episodes into the history."""
        groups: dict[str, list[Trajectory]] = {}
        for t in trajs:
            groups.setdefault(t.task_id, []).append(t)
        for task_id, members in groups.items():
            self.flat_in_a_row[task_id] = self.flat_in_a_row.get(task_id, 0) + 1 if flat_group(members) else 0

    def weight(self, task: Task) -> float:
        k = self.flat_in_a_row.get(task.id, 0)
        return 0.0 if k >= self.cfg.retire_after else self.cfg.decay**k

    def draw(self, step: int, k: int) -> list[Task]:
        """The step's tasks: the same ones whenever the same step is redone after the same history."""
        rng = random.Random(self.seed * 7919 + step)
        k = min(k, len(self.train))
        if self.cfg.task_sampling == "uniform":
            return rng.sample(self.train, k)
        pool = [(t, self.weight(t)) for t in self.train]
        live = [(t, w) for t, w in pool if w > 0]
        chosen = _weighted_sample(live, min(k, len(live)), rng)
        if len(chosen) < k:  # everything left is retired: give those another chance
            retired = [t for t, w in pool if w == 0]
            chosen += rng.sample(retired, k - len(chosen))
        return chosen

    def retired(self) -> int:
        return sum(1 for t in self.train if self.weight(t) == 0)


def _weighted_sample(items: list[tuple[Task, float]], k: int, rng: random.Random) -> list[Task]:
    """k distinct items, each drawn with probability proportional to its weight among those left
    (Efraimidis-Spirakis keys: u ** (1 / w), the k largest)."""
    keyed = sorted(items, key=lambda tw: rng.random() ** (1.0 / tw[1]), reverse=True)
    return [t for t, _ in keyed[:k]]

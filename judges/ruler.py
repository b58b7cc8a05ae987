"""RULER: score the N trajectories of one task relative to each other, in one judge call.

The judge reads the shared start of the conversation once, then each trajectory's own part
under an id (t1..tN, given after the order is chosen and mapped back afterwards). Scores are
matched by id. A bad reply gets a repair retry that names what was wrong; a group that still
has no valid scores comes back with `scored=False` and the reason, never as an exception.
With `permutations=K` the group is scored in K orders (the given one, its reverse, then seeded
shuffles) and the scores are averaged, which cancels position bias to first order.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from judges.cache import JudgeCache, cache_key
from judges.judge_prompts import (
    DEFAULT_RUBRIC,
    PROMPT_VERSION,
    RULER_SYSTEM,
    repair_message,
    ruler_user,
    task_block,
)
from judges.scores import ScoreEntry, check_scores
from judges.trajectory_text import render_context, render_tools, render_trajectory, shared_prefix_len
from mcp_rl.errors import JudgeError
from mcp_rl.models.base import ChatModel, Message, SamplingParams
from mcp_rl.structured import ask_with_repair, follow_up
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory
from mcp_rl.usage import Usage


class JudgeConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    rubric: str = DEFAULT_RUBRIC
    permutations: int = Field(default=1, ge=1, le=32)
    """Orders each group is scored in; the scores are averaged."""
    shuffle: bool = False
    """Shuffle the first order too (by default it is the order given)."""
    seed: int = 0
    max_retries: int = Field(default=2, ge=0)
    """Repair retries after a bad reply (so up to 1 + max_retries calls per order)."""
    max_concurrency: int = Field(default=4, ge=1)
    """Judge calls in flight at once (API rate limits; a local model batches what it gets)."""
    timeout_s: float | None = Field(default=900.0, gt=0.0)
    """Per call. A 1.5B model on two CPU cores needs minutes for a group of 8."""
    temperature: float = Field(default=0.0, ge=0.0)
    max_new_tokens: int | None = None
    """None: 64 + 96 per trajectory, room for the copied answer and one sentence each."""
    message_chars: int = Field(default=1200, ge=100)
    """Each message is cut to this many characters in the judge's view (tool outputs can be huge)."""


class GroupScore(BaseModel):
    """The result for one group: scores by trajectory id, or `scored=False` and why."""

    group_id: str
    task_id: str
    trajectory_ids: list[str]
    scored: bool
    reason: str = ""
    scores: dict[str, float] = {}
    explanations: dict[str, str] = {}
    permutation_scores: list[dict[str, float]] = []
    """One dict per order that was scored successfully."""
    failed_permutations: int = 0
    attempts: int = 0
    problems: list[str] = []
    usage: Usage = Usage()

    @property
    def score_std(self) -> dict[str, float]:
        """Spread of each trajectory's score across orders: the position bias actually seen."""
        if len(self.permutation_scores) < 2:
            return {}
        return {
            tid: statistics.pstdev(p[tid] for p in self.permutation_scores) for tid in self.trajectory_ids
        }


def permutation_orders(n: int, k: int, seed: int, shuffle: bool = False) -> list[list[int]]:
    """K orders of range(n): identity, reverse, then seeded shuffles (all shuffled if `shuffle`)."""
    orders: list[list[int]] = []
    for j in range(k):
        if not shuffle and j == 0:
            order = list(range(n))
        elif not shuffle and j == 1:
            order = list(reversed(range(n)))
        else:
            order = list(range(n))
            random.Random(seed * 1_000_003 + j).shuffle(order)
        orders.append(order)
    return orders


def _tools_for(tools: list[Any] | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    out = []
    for t in tools:
        if hasattr(t, "openai"):
            out.append(t.openai())
        elif isinstance(t, dict):
            out.append(t)
    return out


def _check_group(trajs: list[Trajectory]) -> None:
    gid = trajs[0].group_key if trajs else ""
    if len({t.id for t in trajs}) != len(trajs):
        raise JudgeError(f"group {gid!r} has duplicate trajectory ids", "give every trajectory a unique id")
    if len({t.task_id for t in trajs}) > 1:
        raise JudgeError(
            f"group {gid!r} mixes trajectories of different tasks",
            "group trajectories by task before judging",
        )


class Ruler:
    """Relative scorer. `judge` is any ChatModel: a local model or an API model by name."""

    def __init__(self, judge: ChatModel, config: JudgeConfig | None = None, cache: JudgeCache | None = None):
        self.judge = judge
        self.config = config or JudgeConfig()
        self.cache = cache
        self._sem = anyio.Semaphore(self.config.max_concurrency)

    def build_messages(
        self, trajs: list[Trajectory], order: list[int], task: Task | None, tools: list[Any] | None
    ) -> tuple[list[Message], list[str]]:
        """The judge prompt for one order, and the ids t1..tN in the order shown."""
        cfg = self.config
        skip = shared_prefix_len(trajs)
        task_text = task.text if task else trajs[0].task_text
        reference = task.reference_answer if task else None
        header = task_block(
            task_text,
            reference,
            render_tools(_tools_for(tools)),
            render_context(trajs[0].messages[:skip], cfg.message_chars, task_text),
        )
        ids = [f"t{pos + 1}" for pos in range(len(order))]
        rendered = [
            (ids[pos], render_trajectory(trajs[i], skip, cfg.message_chars)) for pos, i in enumerate(order)
        ]
        system = RULER_SYSTEM.format(rubric=cfg.rubric.strip())
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": ruler_user(header, rendered)},
        ], ids

    def _sampling(self, n: int, j: int) -> SamplingParams:
        cfg = self.config
        return SamplingParams(
            temperature=cfg.temperature,
            top_p=1.0,
            # Room for each trajectory's copied answer and explanation: a reply cut off before its
            # JSON closes costs a whole repair round (seen with the local 1.5B judge at 96 per item).
            max_new_tokens=cfg.max_new_tokens or 64 + 160 * n,
            seed=cfg.seed + j,
        )

    async def _score_order(
        self, trajs: list[Trajectory], order: list[int], j: int, task: Task | None, tools: list[Any] | None
    ) -> tuple[dict[int, ScoreEntry] | None, int, list[str], Usage]:
        """Scores keyed by index into `trajs` for one order, or None with the problems."""
        messages, ids = self.build_messages(trajs, order, task, tools)
        sampling = self._sampling(len(trajs), j)
        key = cache_key(PROMPT_VERSION, self.judge.name, sampling.model_dump(), messages)
        by_pos: dict[str, ScoreEntry] | None = None
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            try:
                by_pos = {tid: ScoreEntry.model_validate(e) for tid, e in hit["scores"].items()}
                if set(by_pos) != set(ids):
                    by_pos = None
            except (KeyError, TypeError, ValueError):
                by_pos = None
            if by_pos is not None:
                return {order[ids.index(tid)]: e for tid, e in by_pos.items()}, 0, [], Usage(cached=1)

        def validate(text: str) -> tuple[dict[str, ScoreEntry] | None, list[str]]:
            check = check_scores(text, ids)
            return (check.entries if check.ok else None), check.problems

        async with self._sem:
            asked = await ask_with_repair(
                self.judge,
                messages,
                validate,
                follow_up(lambda problems: repair_message(problems, ids)),
                max_retries=self.config.max_retries,
                sampling=sampling,
                timeout_s=self.config.timeout_s,
                who="the judge",
            )
        if asked.value is None:
            return None, asked.attempts, asked.problems, asked.usage
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "judge": self.judge.name,
                    "prompt_version": PROMPT_VERSION,
                    "created": time.time(),
                    "scores": {tid: e.model_dump() for tid, e in asked.value.items()},
                    "usage": asked.usage.model_dump(),
                },
            )
        mapped = {order[ids.index(tid)]: e for tid, e in asked.value.items()}
        return mapped, asked.attempts, asked.problems, asked.usage

    async def score_group(
        self, trajectories: list[Trajectory], task: Task | None = None, tools: list[Any] | None = None
    ) -> GroupScore:
        """Score one group. Raises only for misuse (mixed tasks, duplicate ids); judge failures
        come back as `scored=False` with the reason."""
        trajs = list(trajectories)
        tids = [t.id for t in trajs]
        gid = trajs[0].group_key if trajs else ""
        task_id = task.id if task else (trajs[0].task_id if trajs else "")
        if not trajs:
            return GroupScore(
                group_id=gid, task_id=task_id, trajectory_ids=[], scored=False, reason="empty group"
            )
        _check_group(trajs)
        cfg = self.config
        orders = permutation_orders(len(trajs), cfg.permutations, cfg.seed, cfg.shuffle)
        results: list[Any] = [None] * len(orders)

        async def run(j: int) -> None:
            results[j] = await self._score_order(trajs, orders[j], j, task, tools)

        async with anyio.create_task_group() as tg:
            for j in range(len(orders)):
                tg.start_soon(run, j)

        out = GroupScore(group_id=gid, task_id=task_id, trajectory_ids=tids, scored=False)
        for j, (mapped, attempts, problems, usage) in enumerate(results):
            out.attempts += attempts
            out.usage = out.usage + usage
            out.problems += [f"order {j + 1}: {p}" for p in problems]
            if mapped is None:
                out.failed_permutations += 1
                continue
            out.permutation_scores.append({tids[i]: e.score for i, e in mapped.items()})
            if not out.explanations:
                out.explanations = {tids[i]: e.explanation for i, e in mapped.items()}
        if not out.permutation_scores:
            last = out.problems[-1] if out.problems else "no reply"
            out.reason = f"unscored after {out.attempts} judge attempts; last problem: {last}"
            return out
        out.scored = True
        out.scores = {tid: statistics.fmean(p[tid] for p in out.permutation_scores) for tid in tids}
        if out.failed_permutations:
            out.reason = f"{out.failed_permutations} of {len(orders)} orders failed; averaged over the rest"
        return out

    async def score_groups(
        self,
        groups: list[tuple[list[Trajectory], Task | None, list[Any] | None]],
        on_group: Callable[[GroupScore], None] | None = None,
    ) -> list[GroupScore]:
        """Score many groups concurrently (bounded by `max_concurrency` judge calls in flight);
        `on_group` is called as each one is done (progress display)."""
        for trajs, _, _ in groups:
            _check_group(trajs)  # misuse raises here, before any call, not inside the task group
        results: list[GroupScore | None] = [None] * len(groups)

        async def run(i: int) -> None:
            trajs, task, tools = groups[i]
            results[i] = await self.score_group(trajs, task, tools)
            if on_group is not None:
                on_group(results[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(groups)):
                tg.start_soon(run, i)
        return [r for r in results if r is not None]

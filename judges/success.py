"""Tool-use success, the figure training tries to raise, with a confidence interval.

Two kinds of success, never mixed:
- **checked** (tasks with a reference answer, deterministic): the episode gave an answer (not a pasted
  tool result), the answer matches a reference valid in the world the episode saw, the episode made
  the calls the task needs, validly, with an OK result the answer can come from, and it passes both
  faithfulness gates (every value it states came from a tool result or the task; every call argument
  came from the task or an earlier result). A right answer without those calls is "answered without
  tools", logged and not counted.
- **judged** (tasks without a reference): the same answer and faithfulness gates, then a verdict of its
  own (`judges.verdict`, a prompt and cache entries apart from the reward's). With no judge it is
  unknown, never guessed.

An evaluation may run several episodes per task: success is aggregated per task first (the mean of a
task's episodes), so the interval counts tasks, not repeated episodes of one task. An evaluation that
measured nothing has no rate ("not measured"), never 0%.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel

from judges.cache import JudgeCache
from judges.checks import CheckResult, run_checks
from judges.regrade import graded_reference
from judges.verdict import judge_verdict
from mcp_rl.models.base import ChatModel
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory
from mcp_rl.usage import Usage

Kind = Literal["checked", "judged"]


class Success(BaseModel):
    success: bool | None
    method: Literal["checked", "judged", "unknown"]
    explanation: str = ""
    gates: dict[str, bool | None] = {}
    """Each condition of success, as decided for this episode (None: does not apply)."""
    answered_without_tools: bool = False
    """A right answer to a grounded task without the calls it needs: not a tool-use success."""
    reference: str | None = None
    """The reference answer this episode was checked against (see `judges.regrade.episode_references`)."""
    usage: Usage = Usage()


def has_reference(task: Task | None) -> bool:
    return bool(task is not None and task.reference_answer and task.reference_answer.strip())


def _gates(chk: CheckResult) -> dict[str, bool | None]:
    return {
        "answered": chk.answered,
        "not_pasted": not chk.pasted,
        "answer_faithful": chk.answer_faithful,
        "arguments_faithful": chk.arguments_faithful,
    }


def _gate_failure(gates: dict[str, bool | None]) -> str:
    """The first gate that failed, in words; "" when all hold (None counts as holding)."""
    words = {
        "not_pasted": "the answer is a pasted tool result",
        "answered": "no final answer",
        "answer_faithful": "the answer states values no tool returned and the task did not give",
        "arguments_faithful": "a call used inputs the task did not give (invented data)",
    }
    for name in ("not_pasted", "answered", "answer_faithful", "arguments_faithful"):
        if gates.get(name) is False:
            return words[name]
    return ""


def checked_success(traj: Trajectory, task: Task, references: Sequence[str | None]) -> Success:
    """Checked success against the references valid for this episode (any one may match: e.g. the
    answer read from the episode's own results, and the one refreshed right after it). An empty or
    all-None `references` means the reference went stale: not gradable (unknown), never guessed."""
    reference = graded_reference(list(references), traj.final_answer)
    if reference is None:
        return Success(success=None, method="unknown", explanation="the reference answer went stale")
    chk = run_checks(traj, task, reference)
    gates = {**_gates(chk), "answer_correct": bool(chk.answer_correct), "needed_calls_ok": chk.needed_calls_ok}
    guessed = bool(chk.answer_correct) and chk.needed_calls_ok is False
    failed = _gate_failure(gates)
    if not failed and not chk.answer_correct:
        missing = ", ".join(chk.answer_match.missing) if chk.answer_match else ""
        failed = f"does not match the reference (missing: {missing})" if missing else "does not match the reference"
    if not failed and guessed:
        failed = "right answer without the calls the task needs (answered without tools)"
    if failed:
        return Success(
            success=False, method="checked", explanation=failed, gates=gates, answered_without_tools=guessed,
            reference=reference,
        )  # fmt: skip
    return Success(
        success=True, method="checked", explanation="matches the reference", gates=gates, reference=reference
    )


async def judged_success(
    traj: Trajectory, task: Task | None, judge: ChatModel | None, cache: JudgeCache | None = None
) -> Success:
    """Judged success of an episode of a task without a reference: the gates, then the verdict. The
    judge is asked only when every gate holds (a verdict cannot rescue a pasted or invented answer)."""
    if judge is None:
        return Success(success=None, method="unknown", explanation="no reference answer and no judge")
    gates = _gates(run_checks(traj, task))
    failed = _gate_failure(gates)
    if failed:
        return Success(success=False, method="judged", explanation=failed, gates=gates)
    v = await judge_verdict(judge, traj, task, cache=cache)
    gates["verdict"] = v.success
    return Success(
        success=v.success, method="judged", explanation=v.explanation or v.reason, gates=gates, usage=v.usage
    )


async def decide_success(
    traj: Trajectory,
    task: Task | None,
    judge: ChatModel | None = None,
    *,
    references: Sequence[str | None] | None = None,
    cache: JudgeCache | None = None,
) -> Success:
    """Checked success for a task with a reference (`references`: the answers valid for this episode;
    default the task's own), else judged success (needs `judge`)."""
    if task is not None and has_reference(task):
        return checked_success(traj, task, [task.reference_answer] if references is None else references)
    return await judged_success(traj, task, judge, cache)


# --- rates with intervals --------------------------------------------------------------------------
def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion: sound at small n and at 0% or 100%, unlike p ± z·se.
    `successes` may be fractional (tasks scored by the mean of several episodes)."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must lie between 0 and n={n}")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, center - half)  # exact ends, free of rounding dust
    high = 1.0 if successes == n else min(1.0, center + half)
    return (low, high)


class SuccessRate(BaseModel):
    successes: float
    """Tasks that succeeded (fractional when a task's episodes disagree)."""
    n: int
    """Tasks with a known outcome (unknowns are excluded, and counted separately)."""
    episodes: int = 0
    unknown: int = 0
    """Tasks (or, for `success_rate`, outcomes) whose success could not be decided."""
    rate: float | None
    """None when nothing was measured (n = 0): "not measured", never 0%."""
    low: float | None
    high: float | None
    confidence: float = 0.95

    @property
    def measured(self) -> bool:
        return self.n > 0

    def __str__(self) -> str:
        if self.rate is None or self.low is None or self.high is None:
            return "not measured"
        extra = f", {self.unknown} unknown" if self.unknown else ""
        k = f"{self.successes:g}"
        return f"{self.rate:.1%} [{self.low:.1%}, {self.high:.1%}] ({k}/{self.n}{extra})"


def _rate(k: float, n: int, episodes: int, unknown: int, confidence: float) -> SuccessRate:
    if n == 0:
        return SuccessRate(successes=0, n=0, episodes=episodes, unknown=unknown, rate=None, low=None, high=None)
    low, high = wilson_interval(k, n, confidence)
    return SuccessRate(
        successes=k, n=n, episodes=episodes, unknown=unknown, rate=k / n, low=low, high=high, confidence=confidence
    )


def success_rate(outcomes: Iterable[bool | None], confidence: float = 0.95) -> SuccessRate:
    """Independent outcomes (one per task): their rate and interval; None outcomes are unknown."""
    values = list(outcomes)
    known = [v for v in values if v is not None]
    return _rate(sum(1 for v in known if v), len(known), len(values), len(values) - len(known), confidence)


def task_success(
    outcomes: Iterable[tuple[str, bool | None]], confidence: float = 0.95
) -> tuple[SuccessRate, dict[str, float]]:
    """(task id, outcome) pairs, several per task allowed: each task scores the mean of its known
    outcomes, and the interval is over tasks. Returns the rate and the per-task scores."""
    by_task: dict[str, list[bool]] = {}
    seen: set[str] = set()
    episodes = 0
    for task_id, ok in outcomes:
        seen.add(task_id)
        if ok is not None:
            by_task.setdefault(task_id, []).append(ok)
            episodes += 1
    per_task = {tid: sum(v) / len(v) for tid, v in by_task.items()}
    rate = _rate(sum(per_task.values()), len(per_task), episodes, len(seen) - len(per_task), confidence)
    return rate, per_task

"""Tool-use success, the figure training tries to raise, with a confidence interval.

Success of one episode: for a grounded task, the reference check (an answer was given and it
matches); otherwise a binary judge verdict on that one trajectory. With neither a reference nor a
judge, success is unknown (None) and is reported as such, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel

from judges.cache import JudgeCache
from judges.checks import CheckResult, run_checks
from judges.usage import Usage
from judges.verdict import judge_verdict
from mcp_rl.models.base import ChatModel
from mcp_rl.trajectory import Trajectory
from scenario_gen.task import Task


class Success(BaseModel):
    success: bool | None
    method: Literal["reference", "judge", "unknown"]
    explanation: str = ""
    usage: Usage = Usage()


async def decide_success(
    traj: Trajectory,
    task: Task | None,
    judge: ChatModel | None = None,
    *,
    reference_answer: str | None = None,
    checks: CheckResult | None = None,
    cache: JudgeCache | None = None,
) -> Success:
    """Reference check when a (fresh) reference answer exists, else the judge's verdict."""
    reference = (
        reference_answer if reference_answer is not None else (task.reference_answer if task else None)
    )
    if reference is not None and reference.strip():
        chk = checks if checks is not None and reference_answer is None else run_checks(traj, task, reference)
        ok = bool(chk.answered and chk.answer_correct)
        if ok:
            why = "matches the reference"
        elif not chk.answered:
            why = "no final answer"
        else:
            missing = ", ".join(chk.answer_match.missing) if chk.answer_match else ""
            why = f"does not match the reference (missing: {missing})"
        return Success(success=ok, method="reference", explanation=why)
    if judge is None:
        return Success(success=None, method="unknown", explanation="no reference answer and no judge")
    v = await judge_verdict(judge, traj, task, cache=cache)
    return Success(success=v.success, method="judge", explanation=v.explanation or v.reason, usage=v.usage)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion: sound at small n and at 0% or 100%, unlike p ± z·se."""
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
    successes: int
    n: int
    """Episodes with a known outcome (unknowns are excluded, and counted separately)."""
    unknown: int = 0
    rate: float
    low: float
    high: float
    confidence: float = 0.95

    def __str__(self) -> str:
        extra = f", {self.unknown} unknown" if self.unknown else ""
        return f"{self.rate:.1%} [{self.low:.1%}, {self.high:.1%}] ({self.successes}/{self.n}{extra})"


def success_rate(outcomes: Iterable[bool | None], confidence: float = 0.95) -> SuccessRate:
    values = list(outcomes)
    known = [v for v in values if v is not None]
    k, n = sum(1 for v in known if v), len(known)
    low, high = wilson_interval(k, n, confidence)
    return SuccessRate(
        successes=k,
        n=n,
        unknown=len(values) - n,
        rate=k / n if n else 0.0,
        low=low,
        high=high,
        confidence=confidence,
    )

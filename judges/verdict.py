"""A binary verdict on one trajectory: did it succeed? Used for success on tasks with no reference.

One trajectory at a time, so the verdict does not depend on what else was sampled. Same repair
loop and cache as RULER; a verdict that cannot be obtained is `success=None` with the reason.
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from judges.cache import JudgeCache, cache_key
from judges.judge_prompts import SUCCESS_PROMPT_VERSION, VERDICT_SYSTEM, task_block, verdict_repair_message
from judges.trajectory_text import render_trajectory
from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.structured import JsonReplyError, ask_with_repair, extract_json, follow_up
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory
from mcp_rl.usage import Usage

_TRUE = {"true", "yes", "success", "succeeded", "1"}
_FALSE = {"false", "no", "failure", "failed", "0"}


class Verdict(BaseModel):
    success: bool | None
    explanation: str = ""
    reason: str = ""
    """Why there is no verdict, when `success` is None."""
    usage: Usage = Usage()


def parse_verdict(text: str) -> tuple[tuple[bool, str] | None, list[str]]:
    try:
        obj = extract_json(text, want=dict)
    except JsonReplyError as e:
        return None, [f"Your reply could not be read as JSON: {e}."]
    raw = obj.get("success")
    if isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        value = raw.strip().lower() in _TRUE
    else:
        return None, [f'"success" must be true or false (got {raw!r}).']
    return (value, str(obj.get("explanation", "") or "")), []


async def judge_verdict(
    judge: ChatModel,
    traj: Trajectory,
    task: Task | None = None,
    *,
    reference_answer: str | None = None,
    cache: JudgeCache | None = None,
    max_retries: int = 2,
    timeout_s: float | None = 600.0,
    message_chars: int = 1200,
) -> Verdict:
    reference = (
        reference_answer if reference_answer is not None else (task.reference_answer if task else None)
    )
    header = task_block(task.text if task else traj.task_text, reference, "", "")
    user = f"{header}\n\n## The attempt\n{render_trajectory(traj, 0, message_chars)}\n\nReply with the JSON object only."
    messages = [{"role": "system", "content": VERDICT_SYSTEM}, {"role": "user", "content": user}]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=128, seed=0)
    # A key space of its own: a success verdict never reuses what the reward's judge calls cached.
    key = cache_key(SUCCESS_PROMPT_VERSION, "success-verdict", judge.name, sampling.model_dump(), messages)
    if cache is not None and (hit := cache.get(key)) is not None and isinstance(hit.get("success"), bool):
        return Verdict(
            success=hit["success"], explanation=str(hit.get("explanation", "")), usage=Usage(cached=1)
        )
    asked = await ask_with_repair(
        judge,
        messages,
        parse_verdict,
        follow_up(lambda problems: verdict_repair_message(" ".join(problems))),
        max_retries=max_retries,
        sampling=sampling,
        timeout_s=timeout_s,
        who="the judge",
    )
    if asked.value is None:
        last = asked.problems[-1] if asked.problems else "no reply"
        return Verdict(
            success=None, reason=f"no verdict after {asked.attempts} attempts; {last}", usage=asked.usage
        )
    success, explanation = asked.value
    if cache is not None:
        cache.put(
            key, {"success": success, "explanation": explanation, "judge": judge.name, "created": time.time()}
        )
    return Verdict(success=success, explanation=explanation, usage=asked.usage)

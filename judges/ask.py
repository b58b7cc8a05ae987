"""Ask a judge, check the reply, and on a bad reply tell it exactly what was wrong and ask again.

Every failure mode ends in an `Asked` record (value or None, with the reasons); nothing raised by
the judge model escapes, so one broken group can never stop a training run. Cancellation is the
one exception: it always propagates, so Ctrl-C and task-group shutdowns still work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict

from judges.usage import Usage, call_usage
from mcp_rl.models.base import ChatModel, Message, SamplingParams

T = TypeVar("T")


class Asked(BaseModel, Generic[T]):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    value: T | None = None
    attempts: int = 0
    problems: list[str] = []
    """One line per failed attempt: what was wrong with it."""
    replies: list[str] = []
    usage: Usage = Usage()

    @property
    def ok(self) -> bool:
        return self.value is not None


Validator = Callable[[str], tuple[T | None, list[str]]]


async def ask_with_repair(
    model: ChatModel,
    messages: list[Message],
    validate: Validator[T],
    repair: Callable[[list[str]], str],
    *,
    max_retries: int,
    sampling: SamplingParams,
    timeout_s: float | None,
) -> Asked[T]:
    """Call `model` up to 1 + max_retries times until `validate` accepts a reply."""
    out: Asked[T] = Asked()
    conv = list(messages)
    for attempt in range(1, max_retries + 2):
        out.attempts = attempt
        t0 = time.perf_counter()
        try:
            with anyio.fail_after(timeout_s):
                completions = await model.chat(conv, tools=None, n=1, sampling=sampling)
        except TimeoutError:
            out.usage = out.usage + Usage(failed_calls=1, seconds=time.perf_counter() - t0)
            out.problems.append(f"attempt {attempt}: the judge did not answer within {timeout_s:g} s")
            continue
        except Exception as e:  # any backend error: record it and retry, never let it escape
            out.usage = out.usage + Usage(failed_calls=1, seconds=time.perf_counter() - t0)
            msg = " ".join(str(e).split())[:300]
            out.problems.append(f"attempt {attempt}: the judge call failed: {type(e).__name__}: {msg}")
            continue
        elapsed = time.perf_counter() - t0
        if not completions:
            out.usage = out.usage + Usage(failed_calls=1, seconds=elapsed)
            out.problems.append(f"attempt {attempt}: the judge returned no completion")
            continue
        reply = completions[0].text or ""
        out.replies.append(reply)
        out.usage = out.usage + call_usage(model, conv, completions[0]) + Usage(seconds=elapsed)
        value, problems = validate(reply)
        if value is not None and not problems:
            out.value = value
            return out
        out.problems.append(f"attempt {attempt}: " + " ".join(problems))
        conv = [*conv, {"role": "assistant", "content": reply}, {"role": "user", "content": repair(problems)}]
    return out

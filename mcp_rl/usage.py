"""What asking a model cost: calls, tokens, dollars and seconds (a judge's per group and per step,
a task writer's per run), counted by the ask-and-repair loop in `mcp_rl.structured`.

Local models (anything implementing `TokenModel`) cost nothing and their prompt tokens are counted
exactly with their own tokenizer. API models are priced from litellm's bundled cost table when it
knows the name; token counts there come from litellm's counter, else a 4-characters-per-token
estimate, and the record says when a figure is estimated.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from mcp_rl.models.base import ChatModel, Completion, Message, TokenModel


class Usage(BaseModel):
    calls: int = 0
    """Model calls actually made (cache hits not included)."""
    cached: int = 0
    """Answers taken from the disk cache instead of a call."""
    failed_calls: int = 0
    """Calls that raised, timed out or returned nothing."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    estimated: bool = False
    """True when some token count was estimated from characters, or some API price was unknown."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            cached=self.cached + other.cached,
            failed_calls=self.failed_calls + other.failed_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            seconds=self.seconds + other.seconds,
            estimated=self.estimated or other.estimated,
        )


def _chars(messages: list[Message]) -> int:
    return sum(len(json.dumps(m.get("content", ""), ensure_ascii=False)) for m in messages)


@lru_cache(maxsize=1)
def _litellm() -> Any | None:
    # Never fetch the remote price list at import: use the table bundled with the package.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        return None
    litellm.suppress_debug_info = True
    return litellm


def _api_name(model: ChatModel) -> str:
    # Backends may prefix a provider ("openai:gpt-4.1-mini"); litellm spells it "openai/...".
    return model.name.replace(":", "/", 1)


def call_usage(model: ChatModel, messages: list[Message], completion: Completion | None) -> Usage:
    """Tokens and cost of one model call."""
    text = completion.text if completion else ""
    if isinstance(model, TokenModel):
        try:
            prompt = len(model.encode(model.render(messages, None, True)))
            done = (
                len(completion.token_ids) if completion and completion.token_ids else len(model.encode(text))
            )
            return Usage(calls=1, prompt_tokens=prompt, completion_tokens=done)
        except Exception:
            # Counting must never break the caller; fall through to the estimate.
            pass
    estimated = False
    prompt_tokens = completion_tokens = 0
    cost = 0.0
    # `cost_free` lets a model that runs here without the TokenModel surface (or a test fake) skip pricing.
    free = isinstance(model, TokenModel) or bool(getattr(model, "cost_free", False))
    lit = None if free else _litellm()
    if lit is not None:
        name = _api_name(model)
        try:
            prompt_tokens = int(lit.token_counter(model=name, messages=messages))
            completion_tokens = int(lit.token_counter(model=name, text=text)) if text else 0
        except Exception:
            estimated = True
        if not estimated:
            try:
                p_cost, c_cost = lit.cost_per_token(
                    model=name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
                )
                cost = float(p_cost) + float(c_cost)
            except Exception:
                estimated = True  # a name litellm does not price: cost unknown, counted as 0
    else:
        estimated = True
    if not prompt_tokens:
        prompt_tokens = _chars(messages) // 4
        completion_tokens = len(text) // 4
    return Usage(
        calls=1,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost,
        estimated=estimated,
    )

"""GRPO's settings, apart from the algorithm (grpo.py) so that reading a config does not import torch:
every `mcp-rl` command starts faster."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GRPOConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    learning_rate: float = Field(default=1e-4, gt=0.0, json_schema_extra={"cli": True})
    """The LoRA learning rate: about 10x a full fine-tuning RL rate, what the LoRA-for-RL results
    found best. Measured here: at 1e-4 the 0.5B policy on mcp-server-time went from 0% to 71% on val
    in 4 steps of 16 episodes and stayed there for 12 more (docs/results.md); 3 steps of 8 at 5e-5
    had been on the edge."""
    clip_eps: float = Field(default=0.2, gt=0.0)
    old_logprobs: Literal["trainer", "sampler"] = "trainer"
    """Where the clipped ratio's old log-probs come from: the trainer's own forward pass over the
    episode ("trainer"), or the log-probs the sampler recorded ("sampler"). In bf16 the two differ
    by kernel noise (0.03 nats per token on average, 0.17 at most, with no policy change at all),
    which made the clip fire on numerics; see grpo.py, section 2."""
    scale_by_std: bool = True
    kl_coef: float = Field(default=0.0, ge=0.0)
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    micro_batch: int = Field(default=1, ge=1)
    """Sequences per forward/backward; gradients accumulate over the whole batch."""
    logprob_chunk: int = Field(default=512, ge=1)
    """Sampled positions per output-head chunk: bounds the [chunk, vocab] logits in memory."""
    temperature: float = Field(default=1.0, ge=0.0)
    """The sampling temperature: log-probs are recomputed from logits / temperature to match.
    In training it is always the rollout temperature (a TrainConfig validator sets it)."""
    share_prefix: bool = True
    """Run a group's common opening (system prompt, tools, task) once instead of once per attempt:
    the same loss and gradient, computed on fewer tokens (prefix.py)."""
    gradient_checkpointing: bool = Field(default=True, json_schema_extra={"cli": True})
    """Recompute activations in the backward pass. The 0.5B policy on 4 x 3,000-token episodes:
    peak 4.6 GiB instead of 11.7 GiB, for 1.5x the step time (bench/bench_step_memory.py). On by
    default so that a policy, its judge and a step fit a 24 GiB machine with room to spare."""


def group_advantages(
    rewards: list[float], scale_by_std: bool = True, eps: float = 1e-6
) -> list[float] | None:
    """reward - group mean (/ group std). None when the group has no reward variance.

    Here, torch-free, so that readers of a run (the dashboard) apply the very rule the trainer did."""
    n = len(rewards)
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    if n < 2 or std < eps:
        return None
    return [(r - mean) / (std if scale_by_std else 1.0) for r in rewards]

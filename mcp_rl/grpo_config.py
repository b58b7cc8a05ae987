"""GRPO's settings, apart from the algorithm (grpo.py) so that reading a config does not import torch:
every `mcp-rl` command starts faster."""

from __future__ import annotations

from pydantic import BaseModel


class GRPOConfig(BaseModel):
    learning_rate: float = 5e-5
    """About 10x a full fine-tuning RL rate: what the LoRA-for-RL results found best."""
    clip_eps: float = 0.2
    scale_by_std: bool = True
    kl_coef: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch: int = 1
    """Sequences per forward/backward; gradients accumulate over the whole batch."""
    logprob_chunk: int = 512
    """Sampled positions per output-head chunk: bounds the [chunk, vocab] logits in memory."""
    temperature: float = 1.0
    """The sampling temperature: log-probs are recomputed from logits / temperature to match."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass. The 0.5B policy on 4 x 3,000-token episodes:
    peak 4.6 GiB instead of 11.7 GiB, for 1.5x the step time (bench/bench_step_memory.py). On by
    default so that a policy, its judge and a step fit a 24 GiB machine with room to spare."""

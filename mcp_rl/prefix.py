"""A group's shared opening, run once in the GRPO step.

Every attempt at one task starts with the same tokens: the system prompt, the tool definitions, the
task. Run naively, the training forward pass recomputes that opening for each of the N attempts (on
an agent prompt it is often half of every sequence). Instead it is run once, its per-layer keys and
values are kept, and each attempt's own tokens attend to them as to a KV cache. The gradient still
reaches the LoRA weights along both paths: the opening's outputs are handed to the attempts as
detached leaves that collect their gradients, and `backward()` then pushes the sum through the
opening's graph once.

Two transformers caches make this work with gradient checkpointing, which replays each layer's
forward during the backward pass: `_Recorder` keeps the keys and values of the opening (a replay
overwrites them, harmlessly), and `_Frozen` serves them to the rest without ever appending (a replay
reads the same states). Layers normally drop a cache under checkpointing; both caches are read-only
in that sense, which is the case transformers lets a layer opt out for (`_can_checkpoint_with_cache`).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import DynamicCache
from transformers.modeling_layers import GradientCheckpointingLayer

MIN_SHARED_TOKENS = 16
"""Below this the bookkeeping costs more than it saves."""


class _Recorder(DynamicCache):
    """Keeps each layer's keys and values of the opening; appends nothing (the opening starts at 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):  # type: ignore[override]
        self.kv[layer_idx] = (key_states, value_states)
        return key_states, value_states


class _Frozen(DynamicCache):
    """The opening's keys and values, broadcast over the batch; the rest is attended to, never stored."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], batch: int) -> None:
        super().__init__()
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            DynamicCache.update(self, k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1), i)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):  # type: ignore[override]
        layer = self.layers[layer_idx]
        return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)


@contextmanager
def _cache_through_checkpointing(body: Any) -> Iterator[None]:
    layers = [m for m in body.modules() if isinstance(m, GradientCheckpointingLayer)]
    for m in layers:
        m._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for m in layers:
            m.__dict__.pop("_can_checkpoint_with_cache", None)


def supports_sharing(body: Any) -> bool:
    """The decoder takes a `cache` argument, and (if it checkpoints) lets a read-only cache through."""
    if "cache" not in inspect.signature(body.forward).parameters:
        return False
    layers = [m for m in body.modules() if isinstance(m, GradientCheckpointingLayer)]
    return all(hasattr(type(m), "_can_checkpoint_with_cache") for m in layers)


def shared_length(sequences: list[list[int]], first_sampled: list[int]) -> int:
    """How many leading tokens every sequence shares, up to the first sampled token of any of them."""
    limit = min(first_sampled)
    first = sequences[0]
    for seq in sequences[1:]:
        n = 0
        while n < limit and n < len(seq) and seq[n] == first[n]:
            n += 1
        limit = n
    return limit


class SharedPrefix:
    """The opening of a group, run once: its last hidden states and every layer's keys and values."""

    def __init__(self, body: Any, ids: torch.Tensor) -> None:
        """`ids`: [1, P], the shared tokens."""
        self.length = ids.shape[1]
        recorder = _Recorder()
        with _cache_through_checkpointing(body):
            hidden = body(input_ids=ids, cache=recorder, use_cache=False).last_hidden_state
        layers = sorted(recorder.kv)
        self._outputs = [hidden, *(recorder.kv[i][0] for i in layers), *(recorder.kv[i][1] for i in layers)]
        self._leaves = [o.detach().requires_grad_(o.requires_grad) for o in self._outputs]
        self._n_layers = len(layers)

    def hidden(self, body: Any, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Last hidden states [B, L, H] of whole sequences `ids` [B, L] that begin with the opening."""
        n, p = self._n_layers, self.length
        keys, values = self._leaves[1 : 1 + n], self._leaves[1 + n :]
        cache = _Frozen(keys, values, ids.shape[0])
        with _cache_through_checkpointing(body):
            rest = body(
                input_ids=ids[:, p:], attention_mask=attn, cache=cache, use_cache=False
            ).last_hidden_state
        opening = self._leaves[0].expand(ids.shape[0], -1, -1)
        return torch.cat([opening, rest], dim=1)

    def backward(self) -> None:
        """Send the gradients the attempts left on the opening's outputs through its graph, once."""
        pairs = [
            (o, leaf.grad)
            for o, leaf in zip(self._outputs, self._leaves, strict=True)
            if leaf.grad is not None
        ]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        self._outputs, self._leaves = [], []

"""GRPO on a LoRA, the whole algorithm in one file.

Given groups of trajectories (N attempts at the same task) with rewards:

1. advantage_i = reward_i - mean(group)   (optionally / std(group)); groups whose rewards are
   all equal carry no signal and are dropped before any compute is spent on them;
2. for every token the policy sampled (system, user, tool and template tokens are masked out),
   ratio = exp(logp_new - logp_old). logp_old is the trainer's own log-prob of the token under the
   parameters the batch was sampled with (`old_logprobs="trainer"`, the default): one optimizer step
   per batch means those are the parameters of this very forward pass, so logp_old = logp_new with
   its gradient stopped, and the ratio is exactly 1 at the start. The sampler's recorded log-probs
   (`"sampler"`) differ from the trainer's forward by kernel noise in bf16: with LoRA B = 0 (no policy
   change at all) 0.03 nats per token on average and 0.17 at most, enough for the clip to fire on
   numerics. Their gap to the trainer's is logged either way (`sampler_gap_mean`, `_max`);
3. loss = -mean over trajectories of (1/T_i) * sum_t min(ratio_t * A_i, clip(ratio_t, 1-eps, 1+eps) * A_i)
   (+ kl_coef * KL to the base model, adapter off, when asked; off by default);
4. one optimizer step on the LoRA parameters.

Memory: the vocabulary has 152k entries, so logits are never materialized for a whole sequence:
the decoder runs once, and the output head is applied only at sampled positions, in chunks.
Compute: the N attempts of a group open with the same tokens (system prompt, tools, task); that
opening runs once per group and the attempts attend to its keys and values (`prefix.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from mcp_rl.grpo_config import GRPOConfig, group_advantages
from mcp_rl.prefix import MIN_SHARED_TOKENS, SharedPrefix, shared_length, supports_sharing
from mcp_rl.trajectory import Trajectory

__all__ = ["GRPOConfig", "group_advantages", "grpo_step", "make_optimizer"]


# --- 1. advantages ---------------------------------------------------------------------------
def assign_advantages(
    trajectories: list[Trajectory], scale_by_std: bool = True
) -> tuple[list[tuple[Trajectory, float]], int]:
    """(trajectory, advantage) for every trajectory in a group with signal; and how many groups were dropped."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if t.reward is not None and t.num_sampled_tokens > 0:
            groups[t.group_key].append(t)
    kept: list[tuple[Trajectory, float]] = []
    dropped = 0
    for members in groups.values():
        adv = group_advantages([t.reward for t in members], scale_by_std)  # type: ignore[misc]
        if adv is None:
            dropped += 1
            continue
        kept.extend(zip(members, adv, strict=True))
    return kept, dropped


# --- 2. log-probs at sampled positions -------------------------------------------------------
def _decoder_and_head(model: Any) -> tuple[Any, Any]:
    """The transformer body and the output head of a (PEFT-wrapped) causal LM."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model, base.lm_head


def sampled_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attn: torch.Tensor,
    mask: torch.Tensor,
    cfg: GRPOConfig,
    prefix: SharedPrefix | None = None,
) -> torch.Tensor:
    """Log-probs of input_ids[:, t] at every position where mask[:, t] == 1, as a flat tensor
    (row-major order of the masked positions). With `prefix`, every row begins with that already
    computed opening and only the rest of each row runs through the decoder."""
    body, head = _decoder_and_head(model)
    if prefix is None:
        hidden = body(input_ids=input_ids, attention_mask=attn).last_hidden_state  # [B, L, H]
    else:
        hidden = prefix.hidden(body, input_ids, attn)
    # Token t is predicted by the hidden state at t-1.
    target_mask = mask[:, 1:].bool()
    h = hidden[:, :-1][target_mask]  # [M, H]
    targets = input_ids[:, 1:][target_mask]  # [M]
    out = []
    for i in range(0, h.shape[0], cfg.logprob_chunk):
        logits = head(h[i : i + cfg.logprob_chunk]).float() / cfg.temperature
        lp = torch.log_softmax(logits, dim=-1)
        out.append(lp.gather(-1, targets[i : i + cfg.logprob_chunk, None]).squeeze(-1))
    return torch.cat(out) if out else hidden.new_zeros(0, dtype=torch.float32)


# --- 3. the loss -----------------------------------------------------------------------------
def grpo_loss(
    new_lp: torch.Tensor,
    old_lp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_eps: float,
    ref_lp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level clipped-ratio loss. All inputs are flat over sampled tokens: `advantages` is
    the token's trajectory advantage, `weights` 1/(T_i * number of trajectories) so each
    trajectory counts once whatever its length. Returns (loss to minimize, stats)."""
    ratio = torch.exp(new_lp - old_lp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages
    objective = torch.minimum(unclipped, clipped)
    loss = -(objective * weights).sum()
    r = ratio.detach()
    # The clip removes a token's gradient only where the clipped term is the smaller one: ratio above
    # 1 + eps with a positive advantage, or below 1 - eps with a negative one. A ratio outside the band
    # with the other sign keeps its gradient, so it is not counted.
    removed = ((r > 1 + clip_eps) & (advantages > 0)) | ((r < 1 - clip_eps) & (advantages < 0))
    stats = {
        "clip_frac": float(removed.float().mean()) if ratio.numel() else 0.0,
        "ratio_mean": float(r.mean()) if ratio.numel() else 1.0,
    }
    if ref_lp is not None and kl_coef > 0:
        # k3 estimator of KL(policy || reference): non-negative, unbiased, low variance.
        delta = ref_lp - new_lp
        kl = torch.exp(delta) - delta - 1
        loss = loss + kl_coef * (kl * weights).sum()
        stats["kl"] = float((kl.detach() * weights).sum())
    return loss, stats


# --- 4. one step -----------------------------------------------------------------------------
def _pad(batch: list[Trajectory], pad_id: int) -> tuple[torch.Tensor, ...]:
    # Right padding: positions of real tokens are unchanged, padded positions are masked.
    length = max(len(t.token_ids) for t in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(batch), length), dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    old = torch.zeros((len(batch), length), dtype=torch.float32)
    for i, t in enumerate(batch):
        n = len(t.token_ids)
        ids[i, :n] = torch.tensor(t.token_ids)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(t.sampled_mask)
        old[i, :n] = torch.tensor(t.logprobs, dtype=torch.float32)
    return ids, attn, mask, old


@contextmanager
def _adapter_off(model: Any) -> Iterator[None]:
    with model.disable_adapter() if hasattr(model, "disable_adapter") else nullcontext():
        yield


def _by_group(kept: list[tuple[Trajectory, float]]) -> list[list[tuple[Trajectory, float]]]:
    groups: dict[str, list[tuple[Trajectory, float]]] = defaultdict(list)
    for t, a in kept:
        groups[t.group_key].append((t, a))
    return list(groups.values())


def _opening(model: Any, members: list[tuple[Trajectory, float]], cfg: GRPOConfig) -> SharedPrefix | None:
    """The group's shared opening, run once (None when sharing is off, unsupported or not worth it)."""
    body, _ = _decoder_and_head(model)
    if not cfg.share_prefix or len(members) < 2 or not supports_sharing(body):
        return None
    seqs = [t.token_ids for t, _ in members]
    n = shared_length(seqs, [t.sampled_mask.index(1) for t, _ in members])
    if n < MIN_SHARED_TOKENS:
        return None
    return SharedPrefix(body, torch.tensor([seqs[0][:n]]))


def grpo_step(
    model: Any,
    optimizer: torch.optim.Optimizer,
    trajectories: list[Trajectory],
    cfg: GRPOConfig,
    pad_id: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Advantages, loss over micro-batches with gradient accumulation, one optimizer step.
    `on_progress(k)` is told each time k more trajectories are done (progress display)."""
    kept, dropped = assign_advantages(trajectories, cfg.scale_by_std)
    stats: dict[str, float] = {"groups_dropped": dropped, "trajectories_trained": len(kept), "loss": 0.0}
    if on_progress is not None:
        on_progress(len(trajectories) - len(kept))  # dropped ones are done already
    if not kept:
        return stats
    model.train()
    if cfg.gradient_checkpointing:
        # transformers 5.x renamed it (the old name warns); PEFT models forward either
        enable = getattr(model, "activation_checkpointing_enable", None) or getattr(
            model, "gradient_checkpointing_enable", None
        )
        if enable is not None:
            enable()
    optimizer.zero_grad(set_to_none=True)
    n = len(kept)
    clip_fracs, ratios, kls, gaps, gap_max = [], [], [], [], 0.0
    for members in _by_group(kept):
        opening = _opening(model, members, cfg)  # run once for the whole group
        for start in range(0, len(members), cfg.micro_batch):
            chunk = members[start : start + cfg.micro_batch]
            trajs = [t for t, _ in chunk]
            ids, attn, mask, sampler = _pad(trajs, pad_id)
            sampler_lp = sampler[:, 1:][mask[:, 1:].bool()]
            # Per sampled token: its trajectory's advantage and weight 1 / (T_i * n).
            adv = torch.cat([torch.full((t.num_sampled_tokens,), a) for t, a in chunk])
            w = torch.cat(
                [torch.full((t.num_sampled_tokens,), 1.0 / (t.num_sampled_tokens * n)) for t, _ in chunk]
            )
            ref_lp = None
            if cfg.kl_coef > 0:
                with torch.no_grad(), _adapter_off(model):
                    ref_lp = sampled_logprobs(model, ids, attn, mask, cfg)
            new_lp = sampled_logprobs(model, ids, attn, mask, cfg, opening)
            old_lp = new_lp.detach() if cfg.old_logprobs == "trainer" else sampler_lp
            gap = (new_lp.detach() - sampler_lp).abs()
            gaps.append(float(gap.mean()) if gap.numel() else 0.0)
            gap_max = max(gap_max, float(gap.max()) if gap.numel() else 0.0)
            loss, s = grpo_loss(new_lp, old_lp, adv, w, cfg.clip_eps, ref_lp, cfg.kl_coef)
            loss.backward()  # into the LoRA weights, and onto the opening's outputs
            stats["loss"] += float(loss.detach())
            clip_fracs.append(s["clip_frac"])
            ratios.append(s["ratio_mean"])
            kls.append(s.get("kl", 0.0))
            if on_progress is not None:
                on_progress(len(chunk))
        if opening is not None:
            opening.backward()  # the group's gradient through the opening, once
    params = [p for p in model.parameters() if p.requires_grad]
    stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    stats["clip_frac"] = sum(clip_fracs) / len(clip_fracs)
    stats["ratio_mean"] = sum(ratios) / len(ratios)
    stats["kl"] = sum(kls)
    stats["sampler_gap_mean"] = sum(gaps) / len(gaps)
    stats["sampler_gap_max"] = gap_max
    stats["advantage_abs_mean"] = sum(abs(a) for _, a in kept) / n
    return stats


def make_optimizer(model: Any, cfg: GRPOConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters: attach a LoRA adapter first")
    return torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=0.0)

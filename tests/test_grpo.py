"""GRPO: advantages, masks and the loss against values worked out by hand; the gradient's direction."""

from __future__ import annotations

import math

import pytest
import torch
from peft import LoraConfig, get_peft_model

from mcp_rl.grpo import (
    GRPOConfig,
    assign_advantages,
    group_advantages,
    grpo_loss,
    grpo_step,
    make_optimizer,
    sampled_logprobs,
)
from mcp_rl.models.tiny import tiny_model
from mcp_rl.trajectory import Trajectory


def test_group_advantages_by_hand():
    # mean 0.5, std 0.5
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [1.0, -1.0, -1.0, 1.0]
    assert group_advantages([1.0, 0.0, 0.0, 1.0], scale_by_std=False) == [0.5, -0.5, -0.5, 0.5]
    # mean 0.5, std sqrt(((0.5)^2*2 + 0.25^2... )): rewards 1, 0.5, 0 -> mean .5, std sqrt(1/6)
    adv = group_advantages([1.0, 0.5, 0.0])
    assert adv is not None and adv[1] == 0.0 and math.isclose(adv[0], 0.5 / math.sqrt(1 / 6))
    assert group_advantages([0.7, 0.7, 0.7]) is None  # no variance, no signal
    assert group_advantages([1.0]) is None


def _traj(group: str, reward: float | None, n_sampled: int = 2) -> Trajectory:
    return Trajectory(
        id=f"{group}-{reward}-{n_sampled}",
        task_id=group,
        group_id=group,
        reward=reward,
        token_ids=[1] * (3 + n_sampled),
        sampled_mask=[0, 0, 0] + [1] * n_sampled,
        logprobs=[0.0] * (3 + n_sampled),
    )


def test_assign_drops_flat_groups_and_counts_them():
    trajs = [_traj("a", 1.0), _traj("a", 0.0), _traj("b", 0.5), _traj("b", 0.5), _traj("c", None)]
    kept, dropped = assign_advantages(trajs)
    assert dropped == 1  # group b; c has no reward at all and is not a group
    assert sorted(a for _, a in kept) == [-1.0, 1.0]
    assert {t.group_id for t, _ in kept} == {"a"}


def test_loss_by_hand():
    # Trajectory A: advantage +1, 2 sampled tokens; trajectory B: advantage -1, 1 token. n = 2.
    # weights: A tokens 1/(2*2) = 0.25 each, B token 1/(1*2) = 0.5
    old = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    new = torch.log(torch.tensor([0.75, 0.5, 0.25]))  # ratios 1.5, 1.0, 0.5
    adv = torch.tensor([1.0, 1.0, -1.0])
    w = torch.tensor([0.25, 0.25, 0.5])
    loss, stats = grpo_loss(new, old, adv, w, clip_eps=0.2)
    # token 1: min(1.5*1, 1.2*1) = 1.2; token 2: 1.0; token 3: min(0.5*-1, 0.8*-1) = -0.8
    expected = -(0.25 * 1.2 + 0.25 * 1.0 + 0.5 * -0.8)
    assert math.isclose(float(loss), expected, rel_tol=1e-6)
    assert math.isclose(stats["clip_frac"], 2 / 3, rel_tol=1e-6)
    # KL term: k3 = exp(ref-new) - (ref-new) - 1, weighted
    ref = torch.log(torch.tensor([0.5, 0.5, 0.5]))
    loss_kl, stats_kl = grpo_loss(new, old, adv, w, clip_eps=0.2, ref_lp=ref, kl_coef=0.1)
    d = torch.log(torch.tensor([0.5, 0.5, 0.5])) - new
    k3 = (torch.exp(d) - d - 1) * w
    assert math.isclose(float(loss_kl), expected + 0.1 * float(k3.sum()), rel_tol=1e-5)
    assert stats_kl["kl"] > 0


def test_sampled_logprobs_match_full_forward_at_masked_positions():
    model, _ = tiny_model(seed=1)
    ids = torch.tensor([[5, 17, 33, 9, 41, 12], [7, 8, 9, 10, 11, 12]])
    attn = torch.ones_like(ids)
    mask = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 1, 0, 0, 1]])
    cfg = GRPOConfig(logprob_chunk=2, temperature=0.7)
    got = sampled_logprobs(model, ids, attn, mask, cfg)
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids).logits.float() / 0.7, dim=-1)
    want = torch.stack([full[0, 2, 9], full[0, 3, 41], full[1, 1, 9], full[1, 4, 12]])
    assert torch.allclose(got, want, atol=1e-5)
    # an off-by-one mask would read other positions: make sure that is detectable
    wrong = torch.stack([full[0, 3, 9], full[0, 4, 41], full[1, 2, 9], full[1, 5 - 1, 11]])
    assert not torch.allclose(got, wrong, atol=1e-3)


def _lora(seed: int = 0):
    model, _ = tiny_model(seed=seed)
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0)
    return get_peft_model(model, cfg)


def _sampled_traj(model, group: str, reward: float, prompt: list[int], completion: list[int]) -> Trajectory:
    ids = prompt + completion
    mask = [0] * len(prompt) + [1] * len(completion)
    with torch.no_grad():
        lp = sampled_logprobs(
            model,
            torch.tensor([ids]),
            torch.ones(1, len(ids), dtype=torch.long),
            torch.tensor([mask]),
            GRPOConfig(),
        )
    logprobs = [0.0] * len(prompt) + lp.tolist()
    return Trajectory(
        id=f"{group}-{reward}",
        task_id=group,
        group_id=group,
        reward=reward,
        token_ids=ids,
        sampled_mask=mask,
        logprobs=logprobs,
    )


@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_step_moves_probability_towards_the_better_attempt(kl_coef):
    torch.manual_seed(0)
    model = _lora()
    prompt = [3, 10, 20, 30]
    good, bad = [40, 41, 42], [50, 51, 52]
    cfg = GRPOConfig(learning_rate=5e-2, kl_coef=kl_coef, micro_batch=1)
    opt = make_optimizer(model, cfg)

    def seq_lp(completion):
        ids = torch.tensor([prompt + completion])
        mask = torch.tensor([[0] * len(prompt) + [1] * len(completion)])
        with torch.no_grad():
            return float(sampled_logprobs(model, ids, torch.ones_like(ids), mask, cfg).sum())

    before_good, before_bad = seq_lp(good), seq_lp(bad)
    for _ in range(3):
        trajs = [_sampled_traj(model, "g", 1.0, prompt, good), _sampled_traj(model, "g", 0.0, prompt, bad)]
        stats = grpo_step(model, opt, trajs, cfg)
        assert stats["trajectories_trained"] == 2 and stats["groups_dropped"] == 0
        # on-policy: the first forward reproduces the sampling log-probs exactly
        assert math.isclose(stats["ratio_mean"], 1.0, rel_tol=1e-4)
    assert seq_lp(good) > before_good + 0.1
    assert seq_lp(bad) < before_bad - 0.1


def test_step_with_no_signal_changes_nothing():
    model = _lora()
    cfg = GRPOConfig(learning_rate=1e-1)
    opt = make_optimizer(model, cfg)
    before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    trajs = [_sampled_traj(model, "g", 0.5, [3, 4], [5, 6]), _sampled_traj(model, "g", 0.5, [3, 4], [7, 8])]
    stats = grpo_step(model, opt, trajs, cfg)
    assert stats == {"groups_dropped": 1, "trajectories_trained": 0, "loss": 0.0}
    after = [p for p in model.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _group_of_attempts(model, opening: list[int], completions: list[list[int]], rewards: list[float]):
    """Attempts that share an opening (as a group's episodes do) and differ after it, with a tool
    result between two sampled turns (mask 0 inside) and different lengths (padding)."""
    trajs = []
    for i, (c, r) in enumerate(zip(completions, rewards, strict=True)):
        t = _sampled_traj(model, "g", r, opening, c)
        t.id = f"g-{i}"
        # the second half of the completion is a tool result the model did not sample
        half = len(c) // 2
        t.sampled_mask = [0] * len(opening) + [1] * half + [0] * (len(c) - half - 1) + [1]
        trajs.append(t)
    return trajs


@pytest.mark.parametrize("gradient_checkpointing", [False, True])
@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_running_the_opening_once_gives_the_same_update(gradient_checkpointing, kl_coef):
    # The shared-opening path must be the same algorithm, not an approximation: after one SGD step
    # (lr 1, no clipping) every LoRA weight moved exactly as far as with every attempt run whole.
    opening = [3, *range(20, 60)]  # 41 shared tokens: system prompt, tools, task
    completions = [[70, 71, 72, 73, 74, 75], [80, 81, 82, 83], [90, 91, 92, 93, 94, 95, 96, 97], [70, 71, 99]]
    rewards = [1.0, 0.0, 0.5, 0.25]
    moved = {}
    for share in (False, True):
        torch.manual_seed(0)  # the same LoRA initialization both times
        model = _lora(seed=3)
        for name, p in model.named_parameters():
            if "lora_B" in name:  # a non-zero adapter, so its gradient paths are all exercised
                torch.nn.init.normal_(p, std=0.05)
        trajs = _group_of_attempts(model, opening, completions, rewards)
        cfg = GRPOConfig(
            share_prefix=share, gradient_checkpointing=gradient_checkpointing, kl_coef=kl_coef,
            max_grad_norm=1e9, micro_batch=2,
        )  # fmt: skip
        params = [p for p in model.parameters() if p.requires_grad]
        before = [p.detach().clone() for p in params]
        stats = grpo_step(model, torch.optim.SGD(params, lr=1.0), trajs, cfg)
        moved[share] = [p.detach() - b for p, b in zip(params, before, strict=True)]
        assert stats["trajectories_trained"] == 4
        moved[f"loss-{share}"] = stats["loss"]
    total = torch.cat([d.flatten() for d in moved[False]])
    assert float(total.norm()) > 1e-4  # the step did move the adapter
    for a, b in zip(moved[False], moved[True], strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)
    assert math.isclose(moved["loss-False"], moved["loss-True"], abs_tol=1e-6)  # ~0 on-policy


def test_an_opening_that_is_not_shared_gives_other_log_probs():
    # Negative control for the check above: serving attempts an opening they do not begin with
    # (one token changed) changes their log-probs, so a wrong shared length could not pass unseen.
    from mcp_rl.prefix import SharedPrefix, shared_length

    assert shared_length([[1, 2, 3, 4, 5], [1, 2, 3, 9, 5], [1, 2, 3, 4]], [4, 4, 4]) == 3
    assert shared_length([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]], [2, 4]) == 2  # never past a sampled token
    model = _lora(seed=3)
    opening = [3, *range(20, 60)]
    ids = torch.tensor([[*opening, 70, 71, 72]])
    mask = torch.tensor([[0] * len(opening) + [1, 1, 1]])
    attn = torch.ones_like(ids)
    cfg = GRPOConfig()
    body = model.get_base_model().model
    with torch.no_grad():
        whole = sampled_logprobs(model, ids, attn, mask, cfg)
        right = sampled_logprobs(model, ids, attn, mask, cfg, SharedPrefix(body, ids[:, : len(opening)]))
        wrong_ids = ids[:, : len(opening)].clone()
        wrong_ids[0, 5] += 1
        wrong = sampled_logprobs(model, ids, attn, mask, cfg, SharedPrefix(body, wrong_ids))
    assert torch.allclose(whole, right, atol=1e-5)
    assert not torch.allclose(whole, wrong, atol=1e-3)


def test_clip_frac_counts_only_tokens_whose_gradient_the_clip_removed():
    # ratios 1.5, 1.5, 0.5, 0.5, 1.0 with advantages +, -, -, +, +. The clip removes the gradient of
    # token 1 (above the band, A > 0) and token 3 (below it, A < 0) only: the minimum picks the
    # unclipped term for tokens 2 and 4, whose gradient stays. (The old count was |ratio - 1| > eps: 4/5.)
    old = torch.log(torch.full((5,), 0.5))
    new = torch.log(torch.tensor([0.75, 0.75, 0.25, 0.25, 0.5]))
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0])
    _, stats = grpo_loss(new, old, adv, torch.full((5,), 0.2), clip_eps=0.2)
    assert math.isclose(stats["clip_frac"], 2 / 5, rel_tol=1e-6)


@pytest.mark.parametrize("source", ["trainer", "sampler"])
def test_sampler_noise_in_bf16_does_not_fire_the_clip(source):
    # The model in bf16 with a fresh LoRA (B = 0: no policy change at all). The recorded sampling
    # log-probs carry the kind of disagreement bf16 kernels show against the trainer's forward
    # (measured: 0.03 nats per token on average, 0.17 at most), here +-0.25 on alternate tokens.
    # With the trainer's own log-probs as the old ones (the default) nothing is clipped and the ratio
    # is exactly 1; with the sampler's (the negative control) the clip fires on numerics alone.
    torch.manual_seed(0)
    model = _lora().to(torch.bfloat16)
    cfg = GRPOConfig(old_logprobs=source, micro_batch=2)
    prompt = [3, 10, 20, 30]
    trajs = [
        _sampled_traj(model, "g", 1.0, prompt, [40, 41, 42, 43, 44, 45]),
        _sampled_traj(model, "g", 0.0, prompt, [50, 51, 52, 53, 54, 55]),
    ]
    for t in trajs:
        t.logprobs = [
            lp + (0.25 if k % 2 else -0.25) if m else lp
            for k, (lp, m) in enumerate(zip(t.logprobs, t.sampled_mask, strict=True))
        ]
    stats = grpo_step(model, make_optimizer(model, cfg), trajs, cfg)
    assert stats["trajectories_trained"] == 2
    assert 0.2 < stats["sampler_gap_max"] < 0.35  # the noise is seen and logged either way
    if source == "trainer":
        assert stats["clip_frac"] == 0.0
        assert stats["ratio_mean"] == 1.0
    else:
        assert stats["clip_frac"] > 0.2

"""The sampler draws exactly from the stated distribution and reports its log-probs."""

from __future__ import annotations

import torch

from mcp_rl.models.hf_sampler import sample

V = 3000
DRAWS = 40000


def flat_logits(seed: int = 0) -> torch.Tensor:
    # A flat-ish distribution: the top 64 tokens hold well under half the mass, so most draws take
    # the tail path of the sampler, and the top-p nucleus needs the second stage or a full sort.
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, generator=g) * 1.5


def draw(
    logits: torch.Tensor, temperature: float, top_p: float, n: int = DRAWS
) -> tuple[torch.Tensor, torch.Tensor]:
    u = torch.rand(n, generator=torch.Generator().manual_seed(1))
    return sample(logits[None].expand(n, -1), temperature, top_p, u)


def assert_top_frequencies(tokens: torch.Tensor, probs: torch.Tensor, k: int = 20) -> None:
    """The k likeliest tokens come out at their probabilities, within 4 binomial sigmas."""
    n = len(tokens)
    freq = torch.bincount(tokens, minlength=V).double() / n
    top = probs.topk(k).indices
    p = probs[top].double()
    sigma = (p * (1 - p) / n).sqrt()
    assert ((freq[top] - p).abs() <= 4 * sigma + 1e-4).all(), (freq[top][:5], p[:5])


def total_variation(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    freq = torch.bincount(tokens, minlength=V).double() / len(tokens)
    return 0.5 * float((freq - probs.double()).abs().sum())


def test_full_distribution_is_sampled_exactly() -> None:
    logits = flat_logits()
    assert torch.softmax(logits, -1).topk(64).values.sum() < 0.5  # most draws take the tail path
    for temperature in (1.0, 0.5):
        probs = torch.softmax(logits / temperature, -1)
        tokens, logps = draw(logits, temperature, 1.0)
        assert_top_frequencies(tokens, probs)
        # Expected TV distance for this many draws from V=3000 is ~0.1 for an exact sampler; a
        # sampler that dropped the tail or mis-weighted it would sit far above.
        tv = total_variation(tokens, probs)
        assert tv < 0.15, tv
        ref = torch.log_softmax(logits / temperature, -1)[tokens]
        assert torch.allclose(logps, ref, atol=1e-5)


def test_peaked_distribution_matches_frequencies_closely() -> None:
    logits = torch.full((V,), -10.0)
    logits[:5] = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    probs = torch.softmax(logits, -1)
    tokens, _ = draw(logits, 1.0, 1.0)
    freq = torch.bincount(tokens, minlength=V).double() / DRAWS
    assert torch.allclose(freq[:5], probs[:5].double(), atol=0.01)
    tail = int((tokens >= 5).sum())
    expected = float(probs[5:].sum()) * DRAWS  # about 21 tail draws
    assert 5 <= tail <= 3 * expected + 5


def test_nucleus_renormalises_and_never_leaves_it() -> None:
    logits = flat_logits(2)
    for top_p in (0.3, 0.9):
        probs = torch.softmax(logits, -1)
        sorted_p, order = probs.sort(descending=True)
        before = sorted_p.cumsum(0) - sorted_p
        keep = order[before < top_p]
        nucleus = torch.zeros(V)
        nucleus[keep] = probs[keep] / probs[keep].sum()
        tokens, logps = draw(logits, 1.0, top_p, n=8000)  # the full-sort stage is slow: fewer draws
        assert set(tokens.unique().tolist()) <= set(keep.tolist())
        assert_top_frequencies(tokens, nucleus)
        assert torch.allclose(logps, nucleus[tokens].log(), atol=1e-4)


def test_greedy_reports_the_unscaled_log_prob() -> None:
    logits = flat_logits(3)[None].repeat(2, 1)
    tokens, logps = sample(logits, 0.0, 1.0, torch.rand(2))
    assert tokens.tolist() == [int(logits[0].argmax())] * 2
    assert torch.allclose(logps, torch.log_softmax(logits[0], -1).max().expand(2))


def test_same_uniforms_same_tokens() -> None:
    logits = flat_logits(4)[None].repeat(3, 1)
    u = torch.tensor([0.1, 0.5, 0.99])
    a, _ = sample(logits, 1.0, 0.8, u)
    b, _ = sample(logits, 1.0, 0.8, u.clone())
    assert torch.equal(a, b)

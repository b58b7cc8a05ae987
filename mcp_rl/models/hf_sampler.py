"""Turning next-token logits into samples and their log-probs, cheaply and exactly.

The log-prob returned for a sampled token is the log of the probability with which it was actually
drawn: softmax(logits / temperature), restricted to the top-p nucleus and renormalised. With the
default top_p=1 this is exactly log_softmax(logits / temperature), which a trainer recomputes
from a forward pass. Greedy decoding (temperature 0) draws from a point mass; there the log-prob of
the chosen token under the unscaled distribution, log_softmax(logits), is reported instead, since
that is the only informative figure.

Why not `torch.multinomial`: over a 150k vocabulary on a CPU it took longer than the model's whole
decoding step (tens of ms for 8 rows), and sorting for top-p took hundreds. Here each row draws one
uniform number; the draw is resolved among the top candidates (holding nearly all of the mass for
a language model), and only the rare rows whose draw falls in the tail pay for a pass over the
whole vocabulary. The result is an exact sample of the same distribution.
"""

from __future__ import annotations

import torch

GREEDY_BELOW = 1e-5
_STAGES = (64, 1024)


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, uniform: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [R, V] fp32, uniform [R] in [0, 1) -> (token ids [R], log-probs [R])."""
    if temperature < GREEDY_BELOW:
        tokens = logits.argmax(dim=-1)
        logp = torch.log_softmax(logits, dim=-1)
        return tokens, logp.gather(1, tokens[:, None])[:, 0]
    # log_softmax is one fused kernel: cheaper than logsumexp here.
    logp = torch.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
    if top_p >= 1.0:
        tokens = _draw_full(logp, uniform)
        return tokens, logp.gather(1, tokens[:, None])[:, 0]
    return _draw_nucleus(logp, top_p, uniform)


def _draw_full(logp: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from exp(logp), with the candidates ordered top-k first, then the rest."""
    k = min(_STAGES[0], logp.shape[-1])
    top_lp, top_i = logp.topk(k, dim=-1)
    cdf = top_lp.exp().cumsum(-1)
    mass = cdf[:, -1]
    pick = torch.searchsorted(cdf, u[:, None]).clamp_(max=k - 1)
    tokens = top_i.gather(1, pick)[:, 0]
    rows = (u >= mass).nonzero()[:, 0]
    if len(rows):
        # The draw fell in the tail: walk the full distribution without the top candidates.
        probs = logp[rows].exp()
        probs.scatter_(1, top_i[rows], 0.0)
        tail = probs.cumsum(-1)
        target = (u[rows] - mass[rows]).clamp_(min=1e-12)
        target = torch.minimum(target, tail[:, -1])
        idx = torch.searchsorted(tail, target[:, None])[:, 0].clamp_(max=logp.shape[-1] - 1)
        tokens[rows] = idx
    return tokens


def _draw_nucleus(logp: torch.Tensor, top_p: float, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n, vocab = logp.shape
    tokens = torch.empty(n, dtype=torch.long, device=logp.device)
    logps = torch.empty(n, dtype=logp.dtype, device=logp.device)
    todo = torch.arange(n, device=logp.device)
    for k in (*_STAGES, vocab):
        k = min(k, vocab)
        rows_lp = logp if len(todo) == n else logp[todo]
        cand_lp, cand_i = rows_lp.topk(k, dim=-1) if k < vocab else rows_lp.sort(dim=-1, descending=True)
        probs = cand_lp.exp()
        cum = probs.cumsum(-1)
        # The nucleus is settled within these candidates once they hold top_p of the mass.
        done = (cum[:, -1] >= top_p) | (k == vocab)
        if done.any():
            p, c, i, lp = probs[done], cum[done], cand_i[done], cand_lp[done]
            keep = (c - p) < top_p  # mass strictly above each candidate; the first is always kept
            kcdf = torch.where(keep, p, torch.zeros_like(p)).cumsum(-1)
            total = kcdf[:, -1]
            pick = torch.searchsorted(kcdf, (u[todo][done] * total)[:, None]).clamp_(max=k - 1)
            rows = todo[done]
            tokens[rows] = i.gather(1, pick)[:, 0]
            logps[rows] = lp.gather(1, pick)[:, 0] - total.log()
        todo = todo[~done]
        if len(todo) == 0:
            break
    return tokens, logps

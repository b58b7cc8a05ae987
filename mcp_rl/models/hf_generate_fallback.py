"""The fallback generator: transformers' own `generate`, one request at a time, in a worker thread.

Used for architectures the fast path does not cover (see hf_fast_decoder.SUPPORTED_TYPES). Same
`submit` contract as the batch engine; each request's n samples run as one batch.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading

import torch

from mcp_rl.models.base import SamplingParams
from mcp_rl.models.hf_batch_engine import Sample
from mcp_rl.models.hf_sampler import GREEDY_BELOW


class GenerateEngine:
    def __init__(
        self, model: torch.nn.Module, stop_ids: set[int], pad_id: int, lock: threading.RLock
    ) -> None:
        self.model = model
        self.stop_ids = sorted(stop_ids)
        self.pad_id = pad_id
        self.lock = lock
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-rl-hf-generate")

    def submit(self, prompt: list[int], n: int, sampling: SamplingParams) -> tuple[cf.Future, None]:
        return self._pool.submit(self._run, list(prompt), n, sampling), None

    def cancel(self, req: object) -> None:  # a running generate cannot be interrupted
        return None

    def clear_cache(self) -> None:
        return None

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    @torch.no_grad()
    def _run(self, prompt: list[int], n: int, sampling: SamplingParams) -> list[Sample]:
        device = next(self.model.parameters()).device
        ids = torch.tensor([prompt] * n, device=device)
        greedy = sampling.temperature < GREEDY_BELOW
        kwargs = dict(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            output_scores=True,
            return_dict_in_generate=True,
            attention_mask=torch.ones_like(ids),
        )
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        with self.lock, torch.random.fork_rng(devices=[]):
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            training = self.model.training
            self.model.eval()  # no dropout while sampling, whatever mode the trainer left it in
            try:
                out = self.model.generate(ids, **kwargs)
            finally:
                self.model.train(training)
        seqs = out.sequences[:, len(prompt) :]
        # `scores` are the processed logits actually sampled from (after temperature / top-p).
        steps = torch.stack(out.scores, dim=1).float()  # [n, T, V]
        logp = torch.log_softmax(steps, dim=-1).gather(2, seqs[:, : steps.shape[1], None])[..., 0]
        samples = []
        for row in range(n):
            toks, lps = [], []
            finish = "length"
            for t in range(seqs.shape[1]):
                tok = int(seqs[row, t])
                toks.append(tok)
                lps.append(float(logp[row, t]))
                if tok in self.stop_ids:
                    finish = "stop"
                    break
            samples.append(Sample(toks, lps, finish))
        return samples

"""Continuous batching over the fast decoder, in one worker thread.

Every `generate` call from any episode becomes a request in a queue. A worker thread owns the
decoder and loops: admit waiting requests into free KV-cache slots, then run one decoding step for
all active rows together, so many episodes share each pass over the weights (the cost that
dominates on a CPU). A request joins the running batch at the next step; it never waits for the
batch to drain. Torch releases the GIL inside its kernels, so the event loop (tool calls, servers)
keeps running meanwhile.

Prompts are prefilled once per request and the cache is copied to the request's n rows. A slot
keeps its cache after its row finishes, and a later prompt that starts with the same tokens (the
next turn of the same episode, or another episode of the same task) reuses it and only prefills
the new suffix. Caches are dropped whenever the weights change.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import inspect
import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import torch

from mcp_rl.models.base import SamplingParams
from mcp_rl.models.hf_fast_decoder import FastDecoder
from mcp_rl.models.hf_sampler import sample


@dataclass
class Sample:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" | "length"


@dataclass
class _Slot:
    index: int
    tokens: list[int] = field(default_factory=list)  # tokens whose keys/values are in the cache
    busy: bool = False
    last_used: int = 0


@dataclass
class _Row:
    slot: _Slot
    pending: int = -1  # the last sampled token, not yet fed to the model
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None


@dataclass
class _Request:
    prompt: list[int]
    n: int
    sampling: SamplingParams
    future: cf.Future
    generator: torch.Generator | None
    rows: list[_Row] = field(default_factory=list)
    cancelled: bool = False


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    step = 64
    while i + step <= n and a[i : i + step] == b[i : i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


class BatchEngine:
    """Owns a FastDecoder; `submit` is thread-safe and returns a concurrent Future[list[Sample]]."""

    def __init__(
        self,
        decoder: FastDecoder,
        stop_ids: set[int],
        weights_key: Callable[[], Hashable],
        lock: threading.RLock,
        name: str = "mcp-rl-generate",
    ) -> None:
        self.decoder = decoder
        self.stop_ids = frozenset(stop_ids)
        # A weak reference, so the worker thread does not keep its owner alive: the owner's
        # finalizer closes the engine.
        self._key_ref = (
            weakref.WeakMethod(weights_key) if inspect.ismethod(weights_key) else lambda: weights_key
        )
        self.lock = lock  # held during each step; the owner takes it to change weights safely
        self.slots = [_Slot(i) for i in range(decoder.slots)]
        self._queue: deque[_Request] = deque()
        self._active: list[_Request] = []
        self._cv = threading.Condition()
        self._closed = False
        self._clock = itertools.count(1)
        self._key: Hashable = weights_key()
        # Counters for benchmarks and logs.
        self.steps = 0
        self.prefill_tokens = 0
        self.reused_tokens = 0
        self.prefill_seconds = 0.0
        self.decode_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ---- public ----------------------------------------------------------------------------
    def submit(self, prompt: list[int], n: int, sampling: SamplingParams) -> tuple[cf.Future, _Request]:
        if n > len(self.slots):
            raise ValueError(f"n={n} samples exceed the engine's {len(self.slots)} slots (raise max_batch)")
        if not prompt:
            raise ValueError("empty prompt")
        if len(prompt) >= self.decoder.max_context:
            raise ValueError(
                f"prompt of {len(prompt)} tokens leaves no room in the context of {self.decoder.max_context}"
            )
        gen = None
        if sampling.seed is not None:
            gen = torch.Generator(device=self.decoder.device)
            gen.manual_seed(sampling.seed)
        req = _Request(list(prompt), n, sampling, cf.Future(), gen)
        with self._cv:
            if self._closed:
                raise RuntimeError("generation engine is closed")
            self._queue.append(req)
            self._cv.notify()
        return req.future, req

    def cancel(self, req: _Request) -> None:
        """Stop a request's rows at the next step (its future then gets CancelledError)."""
        with self._cv:
            req.cancelled = True
            self._cv.notify()

    def close(self, wait: bool = True) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def clear_cache(self) -> None:
        """Forget cached prefixes (call after changing weights outside the engine's view)."""
        with self.lock:
            for s in self.slots:
                if not s.busy:
                    s.tokens = []

    # ---- worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed and not self._queue and not self._active:
                    self._cv.wait()
                if self._closed:
                    pending = list(self._queue) + self._active
                    self._queue.clear()
                    self._active = []
                    for r in pending:
                        if not r.future.done():
                            r.future.set_exception(RuntimeError("generation engine closed"))
                    return
            try:
                with self.lock:
                    self._admit()
                    if self._active:
                        self._step()
            except Exception as exc:  # never leave a caller waiting forever
                self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        with self._cv:
            victims = self._active + list(self._queue)
            self._active, self._queue = [], deque()
        for s in self.slots:
            s.busy, s.tokens = False, []
        for r in victims:
            if not r.future.done():
                r.future.set_exception(exc)

    def _free_slots(self) -> int:
        return sum(not s.busy for s in self.slots)

    def _admit(self) -> None:
        while True:
            with self._cv:
                if not self._queue:
                    return
                req = self._queue[0]
                if req.cancelled:
                    self._queue.popleft()
                    req.future.cancel()
                    continue
                if req.n > self._free_slots():
                    return  # FIFO: wait for rows to finish
            # Outside the queue lock: reading the key and rebuilding weights take a while, and
            # submit() (called from the event loop) must never wait on them.
            key_fn = self._key_ref()
            key = key_fn() if key_fn is not None else self._key
            if key != self._key:
                if self._active:
                    return  # let rows sampled from the old weights finish first
                self.decoder.refresh_weights()
                for s in self.slots:
                    s.tokens = []  # caches computed with the old weights are stale
                self._key = key
            with self._cv:
                self._queue.popleft()
            if not req.future.set_running_or_notify_cancel():
                continue
            try:
                self._prefill(req)
            except Exception as exc:
                req.future.set_exception(exc)
                continue
            self._active.append(req)
            self._finish_done()

    def _pick_slots(self, prompt: list[int], n: int) -> tuple[list[_Slot], _Slot | None, int]:
        """Choose n free slots, and the slot (busy or not) whose cache shares the longest prefix."""
        best, best_len = None, 0
        limit = len(prompt) - 1  # at least one token must be run to get logits
        for s in self.slots:
            if len(s.tokens) > best_len:
                m = min(_common_prefix(s.tokens, prompt), limit)
                if m > best_len:
                    best, best_len = s, m
        free = [s for s in self.slots if not s.busy]
        # Reuse the matching slot in place when it is free; then empty slots (lowest index first,
        # which keeps a group's rows adjacent); then the least recently used cached ones.
        free.sort(key=lambda s: (s is not best, bool(s.tokens), s.last_used if s.tokens else s.index))
        return free[:n], best, best_len

    def _prefill(self, req: _Request) -> None:
        targets, source, m = self._pick_slots(req.prompt, req.n)
        stamp = next(self._clock)
        for s in targets:
            s.busy, s.last_used = True, stamp
        try:
            if source is not None and m == len(req.prompt) - 1:
                self._join_at_last_token(req, targets, source, m)
                return
            logits = self._prefill_into(req.prompt, targets, source, m)
        except BaseException:
            for s in targets:
                s.busy, s.tokens = False, []
            raise
        req.rows = [_Row(slot=s) for s in targets]
        u = torch.rand(req.n, generator=req.generator).to(logits.device)
        tokens, logps = sample(
            logits[None].expand(req.n, -1), req.sampling.temperature, req.sampling.top_p, u
        )
        self._record(req, req.rows, tokens.tolist(), logps.tolist())

    def _join_at_last_token(self, req: _Request, targets: list[_Slot], source: _Slot, m: int) -> None:
        """All of the prompt but its last token is cached (another episode of the same task, or
        the same prompt sampled again): instead of a pass over the weights for one token, the
        rows join the batch with that token as their next input, and their first sample comes
        out of the next shared decoding step."""
        for s in targets:
            self.decoder.copy_prefix(source.index, s.index, m)
            s.tokens = req.prompt[:m]
        self.reused_tokens += m
        req.rows = [_Row(slot=s, pending=req.prompt[-1]) for s in targets]

    def _prefill_into(
        self, prompt: list[int], targets: list[_Slot], source: _Slot | None, m: int
    ) -> torch.Tensor:
        """Fill the first target with the prompt's cache (reusing `m` tokens of `source`), copy it to
        the other targets, and return the logits after the prompt."""
        first = targets[0]
        if source is None:
            m = 0
        elif source is not first:
            self.decoder.copy_prefix(source.index, first.index, m)
        first.tokens = prompt[:m]
        t = time.perf_counter()
        logits = self.decoder.prefill(first.index, prompt[m:], m)
        self.prefill_seconds += time.perf_counter() - t
        self.prefill_tokens += len(prompt) - m
        self.reused_tokens += m
        first.tokens = list(prompt)
        for s in targets[1:]:
            self.decoder.copy_prefix(first.index, s.index, len(prompt))
            s.tokens = list(prompt)
        return logits

    def _record(self, req: _Request, rows: list[_Row], tokens: list[int], logps: list[float]) -> None:
        max_new = req.sampling.max_new_tokens
        for row, tok, lp in zip(rows, tokens, logps, strict=True):
            row.token_ids.append(tok)
            row.logprobs.append(lp)
            row.pending = tok
            if tok in self.stop_ids:
                row.finish = "stop"
            elif len(row.token_ids) >= max_new or len(row.slot.tokens) + 1 >= self.decoder.max_context:
                row.finish = "length"
            elif req.cancelled:
                row.finish = "cancelled"
            if row.finish:
                row.slot.busy = False

    def _step(self) -> None:
        live = [(req, row) for req in self._active for row in req.rows if row.finish is None]
        if live:
            live.sort(key=lambda rr: rr[1].slot.index)
            slots = [row.slot.index for _, row in live]
            feed = [row.pending for _, row in live]
            positions = [len(row.slot.tokens) for _, row in live]
            t = time.perf_counter()
            logits = self.decoder.decode(slots, feed, positions)
            self.decode_seconds += time.perf_counter() - t
            self.steps += 1
            for _, row in live:
                row.slot.tokens.append(row.pending)
            tokens, logps = self._sample(live, logits)
            for req in {id(r): r for r, _ in live}.values():
                idxs = [i for i, (r, _) in enumerate(live) if r is req]
                self._record(
                    req, [live[i][1] for i in idxs], [tokens[i] for i in idxs], [logps[i] for i in idxs]
                )
        self._finish_done()

    def _sample(
        self, live: list[tuple[_Request, _Row]], logits: torch.Tensor
    ) -> tuple[list[int], list[float]]:
        """One uniform number per row from its request's generator (a seeded request draws the same
        numbers whatever else shares the batch); the costly part of sampling runs once per
        (temperature, top_p) over all rows that share them."""
        u = torch.empty(len(live))
        by_params: dict[tuple[float, float], list[int]] = {}
        by_req: dict[int, list[int]] = {}
        for i, (req, _) in enumerate(live):
            by_req.setdefault(id(req), []).append(i)
            by_params.setdefault((req.sampling.temperature, req.sampling.top_p), []).append(i)
        for idxs in by_req.values():
            u[idxs] = torch.rand(len(idxs), generator=live[idxs[0]][0].generator)
        u = u.to(logits.device)
        tokens, logps = [0] * len(live), [0.0] * len(live)
        for (temperature, top_p), idxs in by_params.items():
            sel = logits if len(idxs) == len(live) else logits[idxs]
            toks, lps = sample(sel, temperature, top_p, u[idxs])
            for j, tok, lp in zip(idxs, toks.tolist(), lps.tolist(), strict=True):
                tokens[j], logps[j] = tok, lp
        return tokens, logps

    def _finish_done(self) -> None:
        still = []
        for req in self._active:
            if any(row.finish is None for row in req.rows):
                still.append(req)
                continue
            if req.cancelled:
                # The future is already running, so it cannot be cancelled; report it instead.
                with contextlib.suppress(cf.InvalidStateError):
                    req.future.set_exception(cf.CancelledError())
                continue
            samples = [
                Sample(
                    row.token_ids,
                    row.logprobs,
                    "stop" if row.finish == "stop" else "length",
                )
                for row in req.rows
            ]
            with contextlib.suppress(cf.InvalidStateError):
                req.future.set_result(samples)
        self._active = still

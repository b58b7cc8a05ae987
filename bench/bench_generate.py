"""Generation throughput: our engine against plain `transformers` `generate`, same prompts, one run.

Scenarios (each run for both, interleaved, `--repeats` times; the best run of each is reported,
since other processes on a shared machine only ever slow a run down):
- group:    one agent prompt, a GRPO group of n samples (ours: one `generate(prompt, n)`;
            plain: the prompt repeated n times in one `generate` batch);
- episodes: n different prompts sampled once each, concurrently (ours: n concurrent
            `generate(prompt, 1)` calls from asyncio tasks; plain: the n prompts left-padded in
            one batch, the best plain `generate` can do for concurrent episodes).
Both run with stop tokens ignored for exactly --new tokens per sample ("fixed": pure decoding
speed) and with normal stopping ("natural": what an episode costs, padding waste included).
Throughput counts useful tokens: per sample, up to and including its stop token.

The machine's limit: a decoding step must read every weight once, so a step takes at least
weight bytes / memory bandwidth, and at least 2 x params x rows / bf16 matmul peak; both are
measured here. Limit tok/s = rows / that floor.

    python -m bench.bench_generate [--model qwen2.5-coder-0.5b-instruct] [-n 8] [--new 128] [--repeats 2]
                                   [--threads N]

On a machine shared with other busy processes, use --threads 1: with 2 threads, torch's OpenMP
workers wait on each other at every operation whenever one is descheduled, and a decoding step
measured 13x slower (1.9 s instead of 0.15 s) at a load average of 4 on 2 cores.

Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import torch

from mcp_rl.models import SamplingParams, load_model
from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_time",
            "description": "Get the current time in a given IANA timezone.",
            "parameters": {
                "type": "object",
                "properties": {
                    "timezone": {"type": "string", "description": "IANA timezone, e.g. Europe/London"}
                },
                "required": ["timezone"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_time",
            "description": "Convert a time of day from one timezone to another.",
            "parameters": {
                "type": "object",
                "properties": {
                    "source_timezone": {"type": "string"},
                    "time": {"type": "string", "description": "HH:MM, 24-hour"},
                    "target_timezone": {"type": "string"},
                },
                "required": ["source_timezone", "time", "target_timezone"],
            },
        },
    },
]
QUESTIONS = [
    "What time is it in Tokyo?",
    "If it is 09:30 in London, what time is it in New York?",
    "Is it night in Sydney right now? Explain briefly.",
    "What is the time difference between Paris and Los Angeles?",
    "Convert 18:00 Berlin time to India time.",
    "Which is later right now: Dubai or Singapore?",
    "What time is it in UTC and in Chicago?",
    "How many hours ahead of Lima is Seoul?",
]


def measure_limits() -> dict[str, float]:
    a = torch.empty(256 << 20, dtype=torch.uint8)
    b = torch.empty_like(a)
    b.copy_(a)
    best = min(_timed(lambda: b.copy_(a)) for _ in range(5))
    bw = 2 * a.numel() / best / 1e9  # read + write bytes
    x = torch.randn(2048, 2048, dtype=torch.bfloat16)
    x @ x
    mm = min(_timed(lambda: x @ x) for _ in range(5))
    return {"copy_gb_s": bw, "bf16_gflop_s": 2 * 2048**3 / mm / 1e9}


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def useful(ids: list[int], stops: set[int]) -> int:
    for i, t in enumerate(ids):
        if t in stops:
            return i + 1
    return len(ids)


async def run_ours(
    model: Any, prompts: list[list[int]], n: int, new: int, seed: int
) -> tuple[float, int, int]:
    sp = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=new, seed=seed)
    engine = model._get_engine()
    steps0 = engine.steps
    t = time.perf_counter()
    if len(prompts) == 1:
        outs = await model.generate(prompts[0], n, sp)
    else:
        res = await asyncio.gather(*(model.generate(p, 1, sp) for p in prompts))
        outs = [c for r in res for c in r]
    wall = time.perf_counter() - t
    return wall, sum(len(c.token_ids) for c in outs), engine.steps - steps0


def run_plain(
    model: Any, prompts: list[list[int]], n: int, new: int, seed: int, fixed: bool
) -> tuple[float, int]:
    tok, lm = model.tokenizer, model.model
    rows = prompts * n if len(prompts) == 1 else prompts
    width = max(len(p) for p in rows)
    pad = model.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in rows])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows])
    stops = sorted(model.stop_token_ids)
    kwargs: dict[str, Any] = dict(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new, pad_token_id=pad
    )
    kwargs.update(min_new_tokens=new, eos_token_id=stops) if fixed else kwargs.update(eos_token_id=stops)
    torch.manual_seed(seed)
    del tok
    t = time.perf_counter()
    with torch.no_grad():
        out = lm.generate(input_ids=ids, attention_mask=mask, **kwargs)
    wall = time.perf_counter() - t
    gen = out[:, width:].tolist()
    return wall, sum(useful(g, model.stop_token_ids) for g in gen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_POLICY_MODEL)
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--new", type=int, default=128, help="new tokens per sample")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--scenarios", default="group,episodes")
    ap.add_argument("--threads", type=int, help="torch threads (default: one per physical core)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    t = time.perf_counter()
    model = load_model(args.model, threads=args.threads)
    load_s = time.perf_counter() - t
    lm = model.model
    params = sum(p.numel() for p in lm.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.parameters())
    # A step streams every weight except the input embedding (only n rows of it are read).
    emb = lm.get_input_embeddings().weight
    tied = emb is lm.get_output_embeddings().weight
    streamed = weight_bytes - (0 if tied else emb.numel() * emb.element_size())
    matmul_params = params - (0 if tied else emb.numel())
    limits = measure_limits()
    floor_s = max(
        streamed / (limits["copy_gb_s"] * 1e9), 2 * matmul_params * args.n / (limits["bf16_gflop_s"] * 1e9)
    )
    limit_tok_s = args.n / floor_s
    load_before = os.getloadavg()[0]
    print(
        f"model {args.model}: {params / 1e6:.0f}M params, {weight_bytes / 1e9:.2f} GB {lm.dtype} "
        f"({streamed / 1e9:.2f} GB read per step), loaded in {load_s:.1f} s; "
        f"threads {torch.get_num_threads()}"
    )
    print(
        f"machine: copy {limits['copy_gb_s']:.0f} GB/s, bf16 matmul {limits['bf16_gflop_s']:.0f} GFLOP/s -> "
        f"decode floor {floor_s * 1000:.0f} ms/step, limit {limit_tok_s:.0f} tok/s at {args.n} rows"
    )

    def encode(q: str) -> list[int]:
        msgs = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": q}]
        return model.encode(model.render(msgs, TOOLS, True))

    scenarios = {
        "group": [encode(QUESTIONS[0])],
        "episodes": [encode(QUESTIONS[i % 8]) for i in range(args.n)],
    }
    normal_stops = set(model.stop_token_ids)
    results: dict[str, Any] = {
        "model": args.model,
        "n": args.n,
        "new": args.new,
        "limits": limits,
        "floor_ms": floor_s * 1e3,
    }
    asyncio.run(run_ours(model, scenarios["group"], 2, 4, 0))  # warm-up: first allocations
    for scen in args.scenarios.split(","):
        prompts = scenarios[scen]
        for fixed in (True, False):
            label = f"{scen}/{'fixed' if fixed else 'natural'}"
            ours, plain = [], []
            for r in range(args.repeats):
                model.stop_token_ids.clear() if fixed else model.stop_token_ids.update(normal_stops)
                model.close()  # a fresh engine picks up the stop set and starts with an empty cache
                wall, toks, steps = asyncio.run(run_ours(model, prompts, args.n, args.new, r))
                eng = model._get_engine()
                ours.append(
                    (toks / wall, wall, toks, steps, eng.decode_seconds / max(steps, 1), eng.prefill_seconds)
                )
                model.stop_token_ids.update(normal_stops)
                wall, toks = run_plain(model, prompts, args.n, args.new, r, fixed)
                plain.append((toks / wall, wall, toks))
            o, p = max(ours), max(plain)
            row = {
                "ours_tok_s": o[0],
                "plain_tok_s": p[0],
                "ratio": o[0] / p[0],
                "ours_decode_ms_per_step": o[4] * 1e3,
                "ours_prefill_s": o[5],
                "share_of_limit": o[0] / limit_tok_s,
                "ours_runs": [round(x[0], 1) for x in ours],
                "plain_runs": [round(x[0], 1) for x in plain],
            }
            results[label] = row
            print(
                f"{label:18s} ours {o[0]:6.1f} tok/s ({o[2]} tok in {o[1]:.1f} s: prefill {o[5]:.1f} s, "
                f"decode {o[4] * 1e3:.0f} ms/step) | "
                f"plain generate {p[0]:6.1f} tok/s ({p[2]} tok in {p[1]:.1f} s) | x{row['ratio']:.2f} | "
                f"{100 * row['share_of_limit']:.0f}% of limit"
            )
    model.close()
    load_after = os.getloadavg()[0]
    results["load_average"] = [load_before, load_after]
    print(
        f"load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs "
        "(above the CPU count, other processes shared the machine and every figure is low)"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()

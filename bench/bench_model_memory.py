"""Resident memory of a loaded model that generates: plain `transformers`, ours, ours without sharing.

A task writer or judge only generates, and on a CPU without fast bf16 it runs in float32: the 1.5B
writer's weights alone are 7.1 GB. Our decoding path fuses q|k|v and gate|up per layer; before the
fused weights became the model's own (`hf_fast_decoder._share_rows`) that fusion was a second copy
of about 40% of the weights. Each setting runs in its own subprocess, loads the model, generates 24
greedy tokens and reports its resident size after freeing what it can (glibc's malloc_trim).

    python -m bench.bench_model_memory [--model qwen2.5-coder-0.5b-instruct]

Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys

from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

PROMPT = [{"role": "user", "content": "Name three colours."}]


def _rss_gb() -> float:
    with open("/proc/self/status") as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))
    return kb / 1e6


def worker(model_name: str, setting: str) -> dict[str, float | str]:
    import anyio

    from mcp_rl.models import load_model
    from mcp_rl.models.base import SamplingParams
    from mcp_rl.models.hardware import release_memory

    if setting == "ours, fused copy":
        import mcp_rl.models.hf_fast_decoder as fd

        fd._share_rows = lambda mods, fused: None  # the code as it was: fusion makes a copy
    model = load_model(model_name, fast=setting != "plain transformers")
    loaded = _rss_gb()
    sampling = SamplingParams(temperature=0.0, max_new_tokens=24)
    (out,) = anyio.run(lambda: model.chat(PROMPT, None, 1, sampling))
    gc.collect()
    release_memory()
    result = {"loaded_gb": loaded, "after_generate_gb": _rss_gb(), "text": out.text[:60]}
    model.close()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_POLICY_MODEL)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.model, args.worker)))
        return
    rows = {}
    for setting in ("plain transformers", "ours, fused copy", "ours"):
        cmd = [sys.executable, "-m", "bench.bench_model_memory", "--model", args.model, "--worker", setting]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows[setting] = json.loads(out.strip().splitlines()[-1])
    print(f"model {args.model}; resident GB after loading and after 24 greedy tokens")
    for setting, r in rows.items():
        print(f"  {setting:20s} {r['loaded_gb']:6.2f} {r['after_generate_gb']:6.2f}  {r['text']!r}")
    ours, copy, plain = (rows[k]["after_generate_gb"] for k in ("ours", "ours, fused copy", "plain transformers"))
    print(f"ours / fused copy {ours / copy:.2f}x, ours / plain transformers {ours / plain:.2f}x")


if __name__ == "__main__":
    main()

"""One GRPO step, ours against TRL's `GRPOTrainer`: same model, LoRA, group size and lengths, one run.

The workload: P prompts (the agent prompt of a real episode: system prompt, tool definitions through
the chat template, a task) x G samples each, exactly L new tokens per sample (stop tokens ignored on
both sides so both decode the same number of tokens), random rewards, one optimizer step on a LoRA
(rank 16, all linear layers, bf16 weights), no KL term (TRL's default beta is 0 too).

Each side runs in its own subprocess (so peak resident memory is its own), for --steps steps; the
first step is a warm-up and the fastest later step is reported, since other processes on a shared
machine only ever slow a step down. A step splits into generation and training (forward, backward,
optimizer); TRL's generation is timed by wrapping its `_generate_and_score_completions`.

The machine's limit for the training part: forward + backward through frozen weights costs about
4 x params FLOPs per token (2 forward, 2 for the activation gradients; LoRA's own weights are
negligible), so the floor is 4 x params x tokens / bf16 matmul peak (measured here, as in
bench_generate), counting the tokens the decoder really runs. Its share is reported for each.

    python -m bench.bench_grpo [--model qwen2.5-coder-0.5b-instruct] [--prompts 2] [--group 4]
                               [--new 128] [--steps 3] [--trl-gc] [--no-trl]

Ours runs twice, with prefix sharing (the default: each prompt runs through the decoder once per
group) and without it (once per sample, as TRL does), so the gain of sharing is a ratio from one run.

Needs TRL (`pip install trl`; not a dependency of mcp-rl). Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import subprocess
import sys
import time
from typing import Any

from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

TASKS = [
    "How many items does the backpacks category hold?",
    "What is the price of the Camp Kettle 1L?",
    "Which lighting item has the best rating?",
    "List the shop's product categories.",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": d} for k, d in props.items()},
                "required": list(props),
            },
        },
    }
    for name, desc, props in [
        ("list_categories", "List the shop's product categories with item counts.", {}),
        ("get_item", "Get one item by its id.", {"item_id": "An item id such as ITM-001"}),
        ("search_items", "Search items by a word in their name.", {"query": "Word to look for"}),
        ("filter_items", "Filter items by category.", {"category": "A category name"}),
    ]
]


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def matmul_peak_flops(seconds: float = 2.0) -> float:
    import torch

    a = torch.randn(2048, 2048, dtype=torch.bfloat16)
    b = torch.randn(2048, 2048, dtype=torch.bfloat16)
    a @ b
    best = float("inf")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * 2048**3 / best


def prompt_texts(model: Any, n: int) -> list[str]:
    from mcp_rl.policy_prompt import opening_messages

    return [model.render(opening_messages(TASKS[i % len(TASKS)], "inventory"), TOOLS) for i in range(n)]


# --- ours --------------------------------------------------------------------------------------
def worker_ours(args: argparse.Namespace) -> dict[str, Any]:
    from mcp_rl.grpo import GRPOConfig, grpo_step, make_optimizer
    from mcp_rl.models import SamplingParams, close_models, load_model
    from mcp_rl.trajectory import Trajectory

    model = load_model(args.model)
    model.attach_lora(r=16, alpha=32)
    model.stop_token_ids.clear()  # exactly --new tokens per sample, as on the TRL side
    cfg = GRPOConfig(gradient_checkpointing=args.ours_gc, share_prefix=args.worker == "ours")
    opt = make_optimizer(model.model, cfg)
    ps = [model.encode(t) for t in prompt_texts(model, args.prompts)]
    rng = random.Random(0)
    steps = []
    for step in range(args.steps):
        sampling = SamplingParams(temperature=1.0, max_new_tokens=args.new, seed=step)

        async def sample(sampling: SamplingParams = sampling) -> list[Any]:
            return await asyncio.gather(*(model.generate(p, args.group, sampling) for p in ps))

        t0 = time.perf_counter()
        groups = asyncio.run(sample())
        t1 = time.perf_counter()
        trajs = []
        for g, (p, comps) in enumerate(zip(ps, groups, strict=True)):
            for k, c in enumerate(comps):
                trajs.append(
                    Trajectory(
                        id=f"{g}-{k}",
                        task_id=str(g),
                        group_id=str(g),
                        token_ids=[*p, *c.token_ids],
                        sampled_mask=[0] * len(p) + [1] * len(c.token_ids),
                        logprobs=[0.0] * len(p) + list(c.logprobs),
                        reward=rng.random(),
                    )
                )
        t2 = time.perf_counter()
        grpo_step(model.model, opt, trajs, cfg, pad_id=model.pad_token_id)
        t3 = time.perf_counter()
        steps.append(
            {
                "generate_s": t1 - t0,
                "train_s": t3 - t2,
                "new_tokens": sum(len(c.token_ids) for g in groups for c in g),
            }
        )
    close_models(model)  # stop the generation worker before exit
    return {"steps": steps, "prompt_tokens": [len(p) for p in ps], "peak_rss_gib": peak_rss_gib()}


# --- TRL ---------------------------------------------------------------------------------------
def worker_trl(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from mcp_rl.models import close_models, load_model
    from mcp_rl.models.builtin import BUILTIN_MODELS, ensure_cached

    path = ensure_cached(args.model) if args.model in BUILTIN_MODELS else args.model
    ours = load_model(args.model)  # only to render the same prompt text with our template handling
    texts = prompt_texts(ours, args.prompts)
    close_models(ours)
    del ours
    tok = AutoTokenizer.from_pretrained(str(path))
    lm = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.bfloat16)
    data = Dataset.from_dict({"prompt": texts * (args.steps + 1)})
    rng = random.Random(0)

    def reward(completions: list[Any], **_: Any) -> list[float]:
        return [rng.random() for _ in completions]

    config = GRPOConfig(
        output_dir="/tmp/bench_grpo_trl",
        use_cpu=True,
        bf16=False,  # the weights are bf16 already; autocast is a GPU feature here
        per_device_train_batch_size=args.prompts * args.group,
        num_generations=args.group,
        max_completion_length=args.new,
        generation_kwargs={"min_new_tokens": args.new},
        learning_rate=5e-5,
        max_steps=args.steps,
        gradient_checkpointing=args.trl_gc,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=lm,
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tok,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    gen_times: list[float] = []
    gen_tokens: list[int] = []
    inner = trainer._generate_and_score_completions

    def timed(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        out = inner(*a, **k)
        gen_times.append(time.perf_counter() - t)
        gen_tokens.append(int(out["completion_mask"].sum()))
        return out

    trainer._generate_and_score_completions = timed  # type: ignore[method-assign]
    step_times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            step_times.append(time.perf_counter() - self.t)

    trainer.add_callback(Clock())
    trainer.train()
    steps = [
        {"generate_s": g, "train_s": s - g, "new_tokens": n}
        for g, s, n in zip(gen_times, step_times, gen_tokens, strict=False)
    ]
    prompt_tokens = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    return {"steps": steps, "prompt_tokens": prompt_tokens, "peak_rss_gib": peak_rss_gib()}


# --- the comparison ----------------------------------------------------------------------------
def run_worker(side: str, argv: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_grpo", "--worker", side, *argv],
        capture_output=True,
        text=True,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        sys.exit(f"the {side} worker failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def best(steps: list[dict[str, Any]]) -> dict[str, Any]:
    later = steps[1:] or steps  # step 1 is a warm-up
    return min(later, key=lambda s: s["generate_s"] + s["train_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_POLICY_MODEL)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--trl-gc", action="store_true", help="TRL with gradient checkpointing (its default)")
    ap.add_argument("--ours-gc", action="store_true", help="ours with gradient checkpointing")
    ap.add_argument("--no-trl", action="store_true", help="only ours, with and without prefix sharing")
    ap.add_argument("--worker", choices=["ours", "ours-unshared", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.worker:
        fn = worker_trl if args.worker == "trl" else worker_ours
        print("RESULT " + json.dumps(fn(args)), flush=True)
        return

    argv = [a for a in sys.argv[1:] if not a.startswith("--json")]
    if args.json:
        argv = [a for a in argv if a != args.json]
    results = {"ours": run_worker("ours", argv), "ours-unshared": run_worker("ours-unshared", argv)}
    if not args.no_trl:
        results["trl"] = run_worker("trl", argv)
    ours = results["ours"]
    import torch

    from mcp_rl.models import close_models, load_model

    m = load_model(args.model)
    params = sum(p.numel() for p in m.model.parameters())
    close_models(m)
    peak = matmul_peak_flops()
    rows = {}
    for name, res in results.items():
        s = best(res["steps"])
        tokens = sum(res["prompt_tokens"]) * args.group + s["new_tokens"]
        # What the decoder really runs: with prefix sharing each prompt once, not once per sample.
        run_tokens = tokens if name != "ours" else sum(res["prompt_tokens"]) + s["new_tokens"]
        floor = 4 * params * run_tokens / peak
        rows[name] = {
            **s,
            "step_s": s["generate_s"] + s["train_s"],
            "gen_tok_s": s["new_tokens"] / s["generate_s"],
            "train_share_of_bf16_peak": floor / s["train_s"],
            "train_tokens": tokens,
            "decoder_tokens": run_tokens,
            "peak_rss_gib": res["peak_rss_gib"],
            "all_steps": res["steps"],
        }
    print(f"model {args.model} ({params / 1e6:.0f}M params), {args.prompts} prompts x {args.group} samples, "
          f"{args.new} new tokens each, prompt {ours['prompt_tokens']} tokens; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; bf16 matmul peak {peak / 1e9:.0f} GFLOP/s")  # fmt: skip
    print(
        f"{'':14} {'step s':>8} {'generate s':>11} {'train s':>8} {'gen tok/s':>10} {'decoder tokens':>15} "
        f"{'train % of peak':>16} {'peak RSS GiB':>13}"
    )
    for name, r in rows.items():
        print(f"{name:14} {r['step_s']:8.1f} {r['generate_s']:11.1f} {r['train_s']:8.1f} {r['gen_tok_s']:10.1f} "
              f"{r['decoder_tokens']:15d} {r['train_share_of_bf16_peak']:16.1%} {r['peak_rss_gib']:13.2f}")  # fmt: skip
    o, u = rows["ours"], rows["ours-unshared"]
    print(f"prefix sharing: training {u['train_s'] / o['train_s']:.2f}x faster "
          f"({u['decoder_tokens']} -> {o['decoder_tokens']} decoder tokens)")  # fmt: skip
    if "trl" in rows:
        t = rows["trl"]
        print(f"ratio TRL/ours: step {t['step_s'] / o['step_s']:.2f}x, generation {t['generate_s'] / o['generate_s']:.2f}x, "
              f"training {t['train_s'] / o['train_s']:.2f}x, peak memory {t['peak_rss_gib'] / o['peak_rss_gib']:.2f}x")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "params": params, "bf16_peak_flops": peak, **rows}, f, indent=2)


if __name__ == "__main__":
    main()

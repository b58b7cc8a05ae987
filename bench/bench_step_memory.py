"""Peak memory and time of one GRPO step on long episodes, with and without gradient checkpointing.

Agent episodes grow long (tool schemas, results, several turns), and the step's activations grow with
them: this is what decides whether a policy, its judge and a step fit the machine. Each setting runs
in its own subprocess so its peak resident size is its own.

    python -m bench.bench_step_memory [--model qwen2.5-coder-0.5b-instruct] [--length 3000]
                                      [--sampled 400] [--episodes 4]

Token ids are random (the cost does not depend on them); rewards differ so no group is dropped.
Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL


def worker(args: argparse.Namespace) -> dict[str, float]:
    from mcp_rl.grpo import GRPOConfig, grpo_step, make_optimizer
    from mcp_rl.models import close_models, load_model
    from mcp_rl.trajectory import Trajectory

    model = load_model(args.model, max_batch=8)
    model.attach_lora(r=16, alpha=32)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    cfg = GRPOConfig(gradient_checkpointing=args.worker == "gc")
    opt = make_optimizer(model.model, cfg)
    rng = random.Random(0)
    trajs = []
    for i in range(args.episodes):
        ids = [rng.randrange(1000, 30000) for _ in range(args.length)]
        mask = [0] * (args.length - args.sampled) + [1] * args.sampled
        trajs.append(
            Trajectory(
                id=str(i), task_id="t", group_id="g", token_ids=ids, sampled_mask=mask,
                logprobs=[-1.0] * args.length, reward=float(i),
            )
        )  # fmt: skip
    t = time.perf_counter()
    stats = grpo_step(model.model, opt, trajs, cfg, pad_id=model.pad_token_id)
    seconds = time.perf_counter() - t
    close_models(model)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"loaded_gib": loaded, "peak_gib": peak, "step_s": seconds, "loss": stats["loss"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_POLICY_MODEL)
    ap.add_argument("--length", type=int, default=3000, help="tokens per episode")
    ap.add_argument("--sampled", type=int, default=400, help="of which the policy sampled")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--worker", choices=["gc", "nogc"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return
    rows = {}
    for side in ("nogc", "gc"):
        out = subprocess.run(
            [sys.executable, "-m", "bench.bench_step_memory", "--worker", side, *sys.argv[1:]],
            capture_output=True,
            text=True,
        )
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode != 0 or not line:
            sys.exit(f"the {side} worker failed ({out.returncode}):\n{out.stderr[-3000:]}")
        rows[side] = json.loads(line[-1][len("RESULT ") :])
    print(f"{args.model}: {args.episodes} episodes x {args.length} tokens ({args.sampled} sampled), LoRA r16")
    print(f"{'':28} {'after load GiB':>15} {'peak GiB':>9} {'step s':>7} {'loss':>8}")
    for side, label in (("nogc", "no gradient checkpointing"), ("gc", "gradient checkpointing")):
        r = rows[side]
        print(f"{label:28} {r['loaded_gib']:15.2f} {r['peak_gib']:9.2f} {r['step_s']:7.1f} {r['loss']:8.4f}")
    a, b = rows["nogc"], rows["gc"]
    print(f"checkpointing: peak x{b['peak_gib'] / a['peak_gib']:.2f}, time x{b['step_s'] / a['step_s']:.2f}")


if __name__ == "__main__":
    main()

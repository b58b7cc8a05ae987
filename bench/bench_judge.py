"""How far can a judge be trusted? Score the hand-labeled set (bench/data) and report:

- agreement of the judge's ranking with the labels, per group: Kendall tau-b and pairwise accuracy
  (pairs with different labels ordered the same way; ties count half);
- position bias: each group scored in K orders (given, reversed, shuffled); the spread (std) of each
  trajectory's score across orders, and the mean score at each displayed position minus the
  trajectory's own mean (a judge without position bias has all of these near 0);
- cost: judge calls, repair retries, unscored groups, tokens and seconds;
- for comparison, the same agreement for the deterministic checks alone and for the combined reward;
- with --verdicts, the binary success verdict (one trajectory at a time, as used for tasks with no
  reference) against the success labels, with the reference answers hidden from the judge.

    python -m bench.bench_judge --judge qwen2.5-coder-1.5b-instruct [--permutations 3] [--verdicts] [--json out.json]

Prints figures, never pass/fail. No cache is used, so times are real.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from judges import JudgeConfig, Ruler, combine, judge_verdict, run_checks
from judges.ruler import GroupScore, permutation_orders
from mcp_rl.models.defaults import DEFAULT_JUDGE_MODEL
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory, load_trajectories

DATA = Path(__file__).parent / "data"


def load_set() -> tuple[list[Trajectory], dict[str, Task], list[dict[str, Any]]]:
    tasks = {
        t.id: t for t in (Task.model_validate_json(line) for line in (DATA / "judge_tasks.jsonl").open())
    }
    tools = json.loads((DATA / "judge_tools.json").read_text())
    return load_trajectories(DATA / "judge_labeled.jsonl"), tasks, tools


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif (dx > 0) == (dy > 0):
            conc += 1
        else:
            disc += 1
    denom = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / denom if denom else 0.0


def pairwise_accuracy(scores: list[float], labels: list[float]) -> tuple[float, int]:
    """Share of differently-labeled pairs the scores order the same way (a tie counts half)."""
    right, n = 0.0, 0
    for i, j in itertools.combinations(range(len(labels)), 2):
        if labels[i] == labels[j]:
            continue
        n += 1
        d = (scores[i] - scores[j]) * (labels[i] - labels[j])
        right += 1.0 if d > 0 else 0.5 if d == 0 else 0.0
    return right, n


def agreement(groups: dict[str, list[Trajectory]], score: dict[str, float]) -> dict[str, float | None]:
    taus, right, pairs = [], 0.0, 0
    for members in groups.values():
        if not all(t.id in score for t in members):
            continue
        s = [score[t.id] for t in members]
        lab = [float(t.metadata["label"]) for t in members]
        taus.append(kendall_tau_b(s, lab))
        r, n = pairwise_accuracy(s, lab)
        right, pairs = right + r, pairs + n
    return {
        "kendall_tau": round(statistics.fmean(taus), 3) if taus else None,
        "pairwise_accuracy": round(right / pairs, 3) if pairs else None,
        "groups": len(taus),
    }


def position_effect(gs: GroupScore, n: int, k: int, seed: int) -> list[float]:
    """Mean (score at displayed position p - that trajectory's mean score), for p = 1..n."""
    orders = permutation_orders(n, k, seed)
    # permutation_scores only holds orders that succeeded; with failures the order mapping is lost.
    if len(gs.permutation_scores) != len(orders):
        return []
    by_pos = [[] for _ in range(n)]
    for order, scores in zip(orders, gs.permutation_scores, strict=True):
        for pos, idx in enumerate(order):
            tid = gs.trajectory_ids[idx]
            by_pos[pos].append(scores[tid] - gs.scores[tid])
    return [statistics.fmean(v) for v in by_pos]


async def run_judge(
    args: argparse.Namespace, groups: dict[str, list[Trajectory]], tasks, tools
) -> dict[str, Any]:
    from mcp_rl.models.registry import load_model

    t0 = time.perf_counter()
    judge = load_model(args.judge)
    load_s = time.perf_counter() - t0
    cfg = JudgeConfig(permutations=args.permutations, max_retries=args.max_retries, max_concurrency=1)
    ruler = Ruler(judge, cfg)
    results: list[GroupScore] = []
    t0 = time.perf_counter()
    for members in groups.values():
        t1 = time.perf_counter()
        gs = await ruler.score_group(members, tasks.get(members[0].task_id), tools)
        results.append(gs)
        state = "scored" if gs.scored else f"UNSCORED ({gs.reason[:120]})"
        print(
            f"  {gs.group_id}: {state} in {time.perf_counter() - t1:.0f} s, {gs.attempts} calls", flush=True
        )
        for tid in gs.trajectory_ids:
            print(f"    {tid}: {gs.scores.get(tid, float('nan')):.2f}  {gs.explanations.get(tid, '')[:100]}")
    judge_s = time.perf_counter() - t0
    verdicts: dict[str, Any] = {}
    if args.verdicts:
        t1 = time.perf_counter()
        right = unknown = 0
        trajs = [t for members in groups.values() for t in members]
        for t in trajs:
            task = tasks.get(t.task_id)
            # Hide the reference: verdicts are what grades tasks that have none.
            v = await judge_verdict(
                judge, t, task.model_copy(update={"reference_answer": None}) if task else None
            )
            if v.success is None:
                unknown += 1
            else:
                right += v.success == bool(t.metadata["label_success"])
            print(f"  verdict {t.id}: {v.success} (label {t.metadata['label_success']}) {v.explanation[:80]}")
        verdicts = {
            "accuracy": right / len(trajs),
            "right": right,
            "n": len(trajs),
            "no_verdict": unknown,
            "seconds": round(time.perf_counter() - t1, 1),
        }
    scores = {tid: s for g in results for tid, s in g.scores.items()}
    stds = [v for g in results for v in g.score_std.values()]
    effects = [
        e
        for g in results
        for e in [position_effect(g, len(g.trajectory_ids), args.permutations, cfg.seed)]
        if e
    ]
    usage = sum((g.usage for g in results[1:]), results[0].usage) if results else None
    calls = sum(g.attempts for g in results)
    orders = len(groups) * args.permutations
    return {
        "judge": args.judge,
        "permutations": args.permutations,
        "load_s": round(load_s, 1),
        "judge_s": round(judge_s, 1),
        "scores": scores,
        "agreement": agreement(groups, scores),
        "unscored_groups": sum(1 for g in results if not g.scored),
        "failed_orders": sum(g.failed_permutations for g in results),
        "calls": calls,
        "repair_calls": calls - orders,
        "position_std_mean": statistics.fmean(stds) if stds else None,
        "position_std_max": max(stds) if stds else None,
        "position_effect_by_slot": [round(statistics.fmean(c), 3) for c in zip(*effects, strict=True)]
        if effects
        else [],
        "usage": usage.model_dump() if usage else None,
        "seconds_per_call": round(judge_s / max(1, calls), 1),
        "verdicts": verdicts,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--judge",
        default=DEFAULT_JUDGE_MODEL,
        help="a model name for load_model; 'none' = checks only",
    )
    p.add_argument("--permutations", type=int, default=3)
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--verdicts", action="store_true", help="also grade each trajectory's success alone")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)

    trajs, tasks, tools = load_set()
    groups: dict[str, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(t.group_id, []).append(t)
    checks = {t.id: run_checks(t, tasks[t.task_id]) for t in trajs}
    check_reward = {t.id: combine(checks[t.id], None)["reward"] for t in trajs}
    out: dict[str, Any] = {"trajectories": len(trajs), "groups": len(groups)}
    out["checks_only"] = agreement(groups, check_reward)
    print(f"labeled set: {len(trajs)} trajectories in {len(groups)} groups")
    print(f"checks only (no judge): {out['checks_only']}")
    if args.judge.lower() != "none":
        print(f"judge {args.judge}, {args.permutations} orders per group:")
        res = anyio.run(run_judge, args, groups, tasks, tools)
        combined = {t.id: combine(checks[t.id], res["scores"].get(t.id))["reward"] for t in trajs}
        res["combined_reward"] = agreement(groups, combined)
        out["judge"] = res
        u = res["usage"] or {}
        print(f"judge alone:      {res['agreement']}")
        print(f"judge + checks:   {res['combined_reward']}")
        print(
            f"position bias: score std across orders mean {res['position_std_mean']}, max {res['position_std_max']}; "
            f"mean offset by displayed slot {res['position_effect_by_slot']}"
        )
        print(
            f"cost: {res['calls']} calls ({res['repair_calls']} repairs), {res['unscored_groups']} unscored groups, "
            f"{res['failed_orders']} failed orders, tokens {u.get('prompt_tokens')} in / {u.get('completion_tokens')} out, "
            f"{res['judge_s']} s judging ({res['seconds_per_call']} s/call), model load {res['load_s']} s"
        )
        if res["verdicts"]:
            print(f"success verdicts (no reference shown): {res['verdicts']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

"""A run's figures as inline SVG, drawn from its metrics records: one set for the HTML report and
the dashboard alike (`mcp-rl report`, `mcp-rl dashboard`), so the two never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_rl.svgplot import bar_chart, line_chart

Metrics = list[dict[str, Any]]


def _points(records: Metrics, key: str) -> list[tuple[float, float]]:
    return [(m["step"], m[key]) for m in records if m.get(key) is not None]


def _kind(metrics: Metrics, *kinds: str) -> Metrics:
    return [m for m in metrics if m.get("kind") in kinds]


def per_tool_totals(metrics: Metrics) -> dict[str, dict[str, float]]:
    """Calls, invalid calls and tool errors per tool, summed over the training steps."""
    totals: dict[str, dict[str, float]] = {}
    for m in _kind(metrics, "step"):
        for name, c in (m.get("per_tool") or {}).items():
            agg = totals.setdefault(name, {"calls": 0, "invalid": 0, "errors": 0})
            for k in agg:
                agg[k] += c.get(k, 0)
    return totals


def _spread(rewards: list[float]) -> tuple[float, float]:
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    return mean - std, mean + std


def trainable_share(m: Mapping[str, Any], group_size: int) -> float | None:
    """The share of a step's groups that carried a signal (not dropped as flat)."""
    groups = (m.get("episodes") or 0) // max(1, group_size)
    if not groups:
        return None
    return max(0.0, groups - (m.get("groups_dropped") or 0)) / groups


def run_charts(
    metrics: Metrics,
    group_size: int = 1,
    step_rewards: Mapping[int, list[float]] | None = None,
) -> dict[str, str]:
    """{name: svg} for a run. `step_rewards`: step -> the rewards of its training episodes (read from
    its trajectories); their mean -/+ one standard deviation is drawn as a band around the mean."""
    evals = [m for m in _kind(metrics, "eval", "base_eval") if m.get("success") is not None]
    tests = _kind(metrics, "test_eval")
    steps = _kind(metrics, "step")
    last = max([m.get("step", 0) for m in metrics] + [0])
    success = {"val": [(m["step"], m["success"]) for m in evals]}
    # The test split runs once with the base model and once with the best: drawn at the run's end.
    for t in tests:
        if t.get("success") is not None:
            success[f"test, {t.get('model')}"] = [(last, t["success"])]
    charts = {
        "success": line_chart(
            "checked success on val (95% interval), test at the end",
            success,
            {"val": [(m["step"], m["success_low"], m["success_high"]) for m in evals]},
            y_range=(0.0, 1.0),
            percent=True,
        ),
        "reward": line_chart(
            "reward (training episodes): mean and spread",
            {"reward mean": _points(steps, "reward_mean")},
            {"reward mean": [(s, *_spread(r)) for s, r in sorted((step_rewards or {}).items()) if r]},
        ),
        "trainable": line_chart(
            "trainable-group share",
            {
                "trainable groups": [
                    (m["step"], v) for m in steps if (v := trainable_share(m, group_size)) is not None
                ]
            },
            y_range=(0.0, 1.0),
            percent=True,
        ),
        "calls": line_chart(
            "tool calls",
            {
                "valid-call rate": _points(steps, "valid_call_rate"),
                "tool-error rate": _points(steps, "tool_error_rate"),
            },
            y_range=(0.0, 1.0),
            percent=True,
        ),
        "judge": line_chart(
            "judge calls and cost (USD) per step",
            {"judge calls": _points(steps, "judge_calls"), "cost USD": _points(steps, "judge_cost_usd")},
        ),
    }
    per_tool = per_tool_totals(metrics)
    if per_tool:
        charts["tools"] = bar_chart(
            "per-tool failure rates (training)",
            {
                (n or "(no tool named)"): {
                    "invalid": a["invalid"] / max(1, a["calls"]),
                    "tool error": a["errors"] / max(1, a["calls"]),
                }
                # an unparsable call names no tool: say so rather than draw a bar with no label
                for n, a in per_tool.items()
            },
            percent=True,
        )
    if steps:
        charts["phases"] = bar_chart(
            "seconds per phase",
            {
                f"step {m['step']}": {k: m.get(f"{k}_s") or 0.0 for k in ("rollout", "judge", "train")}
                for m in steps[-12:]
            },
        )
    return charts


def compare_charts(runs: Mapping[str, Metrics]) -> dict[str, str]:
    """Two or more runs' curves overlaid, one line per run."""

    def overlay(kinds: tuple[str, ...], key: str) -> dict[str, list[tuple[float, float]]]:
        return {name: _points(_kind(m, *kinds), key) for name, m in runs.items()}

    return {
        "success": line_chart(
            "checked success on val",
            overlay(("eval", "base_eval"), "success"),
            y_range=(0.0, 1.0),
            percent=True,
        ),
        "reward": line_chart("reward mean (training episodes)", overlay(("step",), "reward_mean")),
        "valid": line_chart(
            "valid-call rate", overlay(("step",), "valid_call_rate"), y_range=(0.0, 1.0), percent=True
        ),
    }

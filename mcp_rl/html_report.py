"""`mcp-rl report`: one self-contained HTML page about a run (plots inline, no network)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from mcp_rl.atomic import write_atomic
from mcp_rl.errors import RunDirError
from mcp_rl.figures import pct, rate_text
from mcp_rl.run_charts import run_charts
from mcp_rl.rundir import RunDir
from mcp_rl.trajectory import Trajectory, load_trajectories

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;color:#111}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.grid{display:flex;flex-wrap:wrap;gap:12px} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:left} .traj{border:1px solid #ddd;border-radius:6px;
padding:8px;margin:8px 0;font-size:12px} .msg{white-space:pre-wrap;margin:4px 0;padding:4px;border-radius:4px}
.system{background:#f3f4f6}.user{background:#eff6ff}.assistant{background:#f0fdf4}.tool{background:#fefce8}
.tag{display:inline-block;padding:0 6px;border-radius:8px;background:#e5e7eb;margin-right:4px}
"""


def _summary_table(rows_in: list[tuple[str, dict[str, Any] | None]]) -> str:
    """Checked success (the headline) and judged success (apart), with the call figures."""
    rows = []
    for label, m in rows_in:
        if not m:
            continue
        rows.append(
            f"<tr><td>{escape(label)} (step {m['step']})</td><td>{rate_text(m)}</td><td>{rate_text(m, 'judged')}</td>"
            f"<td>{pct(m.get('pasted_rate'))}</td><td>{pct(m.get('valid_call_rate'))}</td>"
            f"<td>{pct(m.get('tool_error_rate'))}</td><td>{m['mean_turns']:.2f}</td></tr>"
        )
    head = (
        "<tr><th></th><th>checked success [95% CI]</th><th>judged success [95% CI]</th><th>pasted</th>"
        "<th>valid calls</th><th>tool errors</th><th>mean turns</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _trajectory_html(t: Trajectory, label: str) -> str:
    tags = [label, f"reward {t.reward:.3f}" if t.reward is not None else "no reward", f"end: {t.end}"]
    if "success" in t.metadata:
        tags.append(f"success: {t.metadata['success']}")
    msgs = []
    for m in t.messages:
        role = m.get("role", "")
        content = m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        if role == "system":
            content = content[:400] + ("..." if len(content) > 400 else "")
        msgs.append(f'<div class="msg {escape(role)}"><b>{escape(role)}</b>: {escape(content[:2000])}</div>')
    head = "".join(f'<span class="tag">{escape(x)}</span>' for x in tags)
    return f'<div class="traj">{head}<div><b>task:</b> {escape(t.task_text)}</div>{"".join(msgs)}</div>'


def _examples(run: RunDir, metrics: list[dict[str, Any]], best_step: int) -> str:
    parts = []
    base_file, best_file = run.eval_file(0), run.eval_file(best_step)
    if base_file.exists() and best_file.exists() and best_step:
        base = {t.task_id: t for t in load_trajectories(base_file)}
        for t in load_trajectories(best_file)[:2]:
            if t.task_id in base:
                parts.append(
                    "<div class='grid'><div>" + _trajectory_html(base[t.task_id], "before (base)") + "</div>"
                )
                parts.append("<div>" + _trajectory_html(t, f"after (step {best_step})") + "</div></div>")
    steps = sorted(run.path.glob("steps/*.parquet"))
    if steps:
        trajs = [t for t in load_trajectories(steps[-1]) if t.reward is not None]
        trajs.sort(key=lambda t: t.reward or 0.0)
        if trajs:
            parts.append(
                _trajectory_html(trajs[-1], f"best of the last step ({steps[-1].stem.lstrip('0') or 0})")
            )
            parts.append(_trajectory_html(trajs[0], "worst of the last step"))
    return "\n".join(parts) or "<p>no trajectories saved yet</p>"


def step_rewards(run: RunDir) -> dict[int, list[float]]:
    """step -> the rewards of its training episodes."""
    return {
        int(f.stem): [t.reward for t in load_trajectories(f) if t.reward is not None]
        for f in sorted(run.path.glob("steps/*.parquet"))
        if f.stem.isdigit()
    }


def build_report(run_dir: str | Path) -> str:
    run = RunDir(run_dir)
    cfg = run.load_config()
    metrics = run.read_metrics()
    if not metrics:
        raise RunDirError(
            f"{run.path} has no metrics yet", hint="run `mcp-rl train` first, or wait for its first step"
        )
    state = run.load_state()
    evals = [m for m in metrics if m.get("kind") in ("eval", "base_eval")]
    tests = {m.get("model"): m for m in metrics if m.get("kind") == "test_eval"}
    steps = [m for m in metrics if m.get("kind") == "step"]
    by_step = {m["step"]: m for m in evals}
    group_size = int(cfg.get("group_size") or 1)
    charts = list(run_charts(metrics, group_size, step_rewards(run)).values())
    best_step = state.best_step or 0
    html = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>mcp-rl run {escape(run.path.name)}</title><style>{CSS}</style></head><body>",
        f"<h1>mcp-rl run <code>{escape(str(run.path))}</code></h1>",
        f"<p>model <b>{escape(str(cfg.get('model')))}</b> on server <b>{escape(str(cfg.get('server', {}).get('name', '')))}</b>; "
        f"{len(steps)} steps done; state: {escape(state.stopped or 'running or interrupted')}; best step {best_step}.</p>",
        "<h2>Base vs best on test</h2>",
        "<p>The test split is run once with the base model and once with the checkpoint val chose: its "
        "figures are the run's result. Checked success needs the right answer and the calls behind it; "
        "judged success (tasks without a reference) is a separate figure.</p>",
        _summary_table([("test, base", tests.get("base")), ("test, best", tests.get("best"))])
        if tests
        else "<p>The test split has not been run yet.</p>",
        "<h2>Base vs best on val</h2>",
        _summary_table([("val, base", by_step.get(0)), ("val, best", by_step.get(best_step))]),
        "<h2>Plots</h2><div class='grid'>",
        *charts,
        "</div><h2>Example trajectories</h2>",
        _examples(run, metrics, best_step),
        "</body></html>",
    ]
    return "\n".join(html)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    path = Path(out) if out else Path(run_dir) / "report.html"
    return write_atomic(path, build_report(run_dir))

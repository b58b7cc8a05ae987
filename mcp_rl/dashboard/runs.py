"""Reading run directories for the dashboard: read-only, and tolerant of a run still being written.

Nothing here opens a file for writing, takes a lock or creates a file: a training run beside it is
never disturbed. Whatever is half-written reads as absent: a cut line of metrics.jsonl or tasks.jsonl
is skipped, a JSON file that does not parse reads as missing, trajectory files are only ever read
under their final names (the trainer writes them to a temp name, then renames).

A run is named by its directory's name, one path component under the runs root; it is looked up
among the root's own children, so no id can reach outside the root (`..`, `/`, a symlink out).
"""

from __future__ import annotations

import json
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from mcp_rl.errors import RunDirError
from mcp_rl.grpo_config import group_advantages
from mcp_rl.run_charts import compare_charts, per_tool_totals, run_charts
from mcp_rl.rundir import RunDir, RunState
from mcp_rl.trajectory import Trajectory, load_trajectories

RUNNING_WITHIN_S = 1800.0
"""A run with no `stopped` reason is shown as running if any of its files changed this recently (a
step of a 0.5B model on a CPU can take many minutes), else as crashed or stopped."""
RESULT_CLIP = 20_000
"""Characters of a tool result sent to the page (which shows fewer, expandable)."""
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$")
_CACHE: OrderedDict[tuple[str, int, int], list[Trajectory]] = OrderedDict()


class NotFound(RunDirError):
    """A run, step, group or episode that is not there (or an id that is not allowed)."""


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _trajectories(path: Path) -> list[Trajectory]:
    """The trajectories of one file, cached by (path, mtime, size); [] for a missing or unreadable file."""
    try:
        st = path.stat()
    except OSError:
        return []
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    try:
        trajs = load_trajectories(path)
    except Exception:  # a file cut by a full disk or a kill before the rename: read as absent
        return []
    _CACHE[key] = trajs
    while len(_CACHE) > 64:
        _CACHE.popitem(last=False)
    return trajs


def _step_of(path: Path) -> int | None:
    return int(path.stem) if path.stem.isdigit() else None


_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|authorization|cookie)", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def mask_secrets(value: Any, key: str = "") -> Any:
    """A config with every secret replaced by "***": all values of `env` and `headers`, any key that
    names a token, key, password or cookie, and the user:password part of any URL."""
    if isinstance(value, dict):
        if key in ("env", "headers"):
            return {k: "***" for k in value}
        return {k: mask_secrets(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, key) for v in value]
    if isinstance(value, str):
        if _SECRET_KEY.search(key) and value:
            return "***"
        return _URL_CREDENTIALS.sub("***@", value)
    return value


def _episode(t: Trajectory, advantage: float | None = None) -> dict[str, Any]:
    calls = [
        {
            "turn": c.turn,
            "name": c.name,
            "arguments": c.arguments,
            "valid": c.valid,
            "status": str(c.status.value),
            "result": c.result_text[:RESULT_CLIP],
            "result_chars": len(c.result_text),
        }
        for c in t.tool_calls
    ]
    meta = t.metadata
    return {
        "id": t.id,
        "task_id": t.task_id,
        "group_id": t.group_key,
        "task_text": t.task_text,
        "turns": t.turns,
        "end": t.end,
        "calls": calls,
        "final_answer": t.final_answer,
        "reward": t.reward,
        "reward_components": t.reward_components,
        "ruler": t.reward_components.get("ruler"),
        "judge_explanation": t.judge_explanation,
        "advantage": advantage,
        "success": meta.get("success"),
        "success_explanation": meta.get("success_explanation", ""),
        "reference": meta.get("reference"),
        "messages": [
            {"role": m.get("role", ""), "content": str(m.get("content") or "")[:RESULT_CLIP]}
            for m in t.messages
        ],
    }


class Run:
    """One run directory, read on demand (every call reads the files as they are now)."""

    def __init__(self, run_id: str, path: Path) -> None:
        self.id, self.dir = run_id, RunDir(path)

    # --- plain files -----------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return _json(self.dir.config_file) or {}

    def state(self) -> RunState:
        data = _json(self.dir.state_file)
        try:
            return RunState.model_validate(data) if isinstance(data, dict) else RunState()
        except ValueError:
            return RunState()

    def metrics(self) -> list[dict[str, Any]]:
        try:
            return [m for m in self.dir.read_metrics() if isinstance(m, dict) and "step" in m]
        except OSError:
            return []

    def tasks(self) -> list[dict[str, Any]]:
        try:
            lines = self.dir.tasks_file.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line still being written
        return out

    def updated(self) -> float:
        """The newest modification time among the run's files (the top level and its step folders)."""
        times = [0.0]
        for where in (self.dir.path, *(self.dir.path / d for d in ("steps", "evals", "test", "checkpoints"))):
            try:
                times.extend(p.stat().st_mtime for p in where.iterdir())
            except OSError:
                continue
        return max(times)

    def version(self) -> str:
        """Changes whenever the run writes something the page shows: cheap (a few stat calls)."""
        parts = []
        for f in (self.dir.state_file, self.dir.metrics_file, self.dir.best_file):
            try:
                st = f.stat()
                parts.append(f"{st.st_mtime_ns}:{st.st_size}")
            except OSError:
                parts.append("-")
        return "|".join(parts)

    # --- summaries -------------------------------------------------------------------------------
    def status(self, state: RunState) -> str:
        if state.stopped:
            return "plateaued" if state.stopped.startswith("plateau") else "finished"
        return "running" if time.time() - self.updated() < RUNNING_WITHIN_S else "crashed or stopped"

    def summary(self) -> dict[str, Any]:
        cfg, state, metrics = self.config(), self.state(), self.metrics()
        tests = {m.get("model"): m for m in metrics if m.get("kind") == "test_eval"}
        return {
            "id": self.id,
            "server": (cfg.get("server") or {}).get("name") or "",
            "model": cfg.get("model") or "",
            "state": self.status(state),
            "stopped": state.stopped,
            "steps": state.completed_step,
            "max_steps": cfg.get("max_steps"),
            "best_step": state.best_step,
            "test_base": (tests.get("base") or {}).get("success"),
            "test_best": (tests.get("best") or {}).get("success"),
            "updated": self.updated(),
        }

    def step_rewards(self) -> dict[int, list[float]]:
        return {
            step: [t.reward for t in _trajectories(self.dir.step_file(step)) if t.reward is not None]
            for step in self.step_files()
        }

    def charts(self) -> dict[str, str]:
        group_size = int(self.config().get("group_size") or 1)
        return run_charts(self.metrics(), group_size, self.step_rewards())

    def tools(self) -> list[dict[str, Any]]:
        """Per tool: calls, invalid, errors (from the metrics) and success where used (from the
        training episodes that called it: the share whose answer was checked or judged right)."""
        used: dict[str, list[bool]] = {}
        for f in sorted((self.dir.path / "steps").glob("*.parquet")):
            for t in _trajectories(f):
                if t.metadata.get("success") is None:
                    continue
                for name in {c.name for c in t.tool_calls}:
                    used.setdefault(name, []).append(bool(t.metadata["success"]))
        rows = []
        for name, agg in sorted(per_tool_totals(self.metrics()).items()):
            wins = used.get(name, [])
            rows.append({"tool": name, **agg, "success_where_used": sum(wins) / len(wins) if wins else None})
        return rows

    def task_table(self) -> list[dict[str, Any]]:
        """Every task: split, grounded, its pass rate over the training steps, base against current
        (the base evaluation against the latest one of its split)."""
        metrics = self.metrics()
        train_runs: dict[str, list[float]] = {}
        latest: dict[str, dict[str, float]] = {}
        base: dict[str, dict[str, float]] = {}
        for m in metrics:
            per = {**(m.get("per_task_judged") or {}), **(m.get("per_task_success") or {})}
            kind = m.get("kind")
            if kind == "step":
                for tid, v in per.items():
                    train_runs.setdefault(tid, []).append(v)
            elif kind == "base_eval":
                base["val"], latest["val"] = per, per
            elif kind == "eval":
                latest["val"] = per
            elif kind == "test_eval":
                (base if m.get("model") == "base" else latest)["test"] = per
        rows = []
        for t in self.tasks():
            tid, split = t.get("id", ""), t.get("split", "")
            passes = train_runs.get(tid, [])
            rows.append(
                {
                    "id": tid,
                    "split": split,
                    "grounded": t.get("source") == "grounded",
                    "text": t.get("text", ""),
                    "pass_rate": sum(passes) / len(passes) if passes else None,
                    "attempted_steps": len(passes),
                    "base": base.get(split, {}).get(tid),
                    "current": latest.get(split, {}).get(tid),
                }
            )
        return rows

    # --- episodes --------------------------------------------------------------------------------
    def step_files(self) -> list[int]:
        return sorted(
            s for f in (self.dir.path / "steps").glob("*.parquet") if (s := _step_of(f)) is not None
        )

    def groups(self, step: int) -> list[dict[str, Any]]:
        """The GRPO groups of a training step: task, rewards, and whether the group trained."""
        return [
            {k: g[k] for k in ("group_id", "task_id", "task_text", "rewards", "trained")}
            for g in self._groups(step).values()
        ]

    def _groups(self, step: int) -> dict[str, dict[str, Any]]:
        trajs = _trajectories(self.dir.step_file(step))
        if not trajs:
            raise NotFound(f"no trajectories for step {step} in run {self.id}")
        scale = bool((self.config().get("grpo") or {}).get("scale_by_std", True))
        members: dict[str, list[Trajectory]] = {}
        for t in trajs:
            members.setdefault(t.group_key, []).append(t)
        out = {}
        for key, ts in members.items():
            # The trainer's own rule (grpo.assign_advantages): scored episodes with sampled tokens.
            scored = [t for t in ts if t.reward is not None and t.num_sampled_tokens > 0]
            adv = group_advantages([t.reward for t in scored], scale) if scored else None  # type: ignore[misc]
            by_id = dict(zip((t.id for t in scored), adv, strict=True)) if adv else {}
            out[key] = {
                "group_id": key,
                "task_id": ts[0].task_id,
                "task_text": ts[0].task_text,
                "rewards": [t.reward for t in ts],
                "trained": adv is not None,
                "attempts": [_episode(t, by_id.get(t.id)) for t in ts],
            }
        return out

    def group(self, step: int, group_id: str) -> dict[str, Any]:
        group = self._groups(step).get(group_id)
        if group is None:
            raise NotFound(f"no group {group_id!r} in step {step} of run {self.id}")
        return {"step": step, **group}

    def base_vs_best(self, task_id: str) -> dict[str, Any]:
        """A val or test task's base episode beside the chosen best checkpoint's episode."""
        state = self.state()
        best = state.best_step or 0
        pairs = [
            (self.dir.eval_file(0), self.dir.eval_file(best)),
            (self.dir.test_file("base"), self.dir.test_file("best")),
        ]
        for base_file, best_file in pairs:
            base = [t for t in _trajectories(base_file) if t.task_id == task_id]
            if base:
                got = [t for t in _trajectories(best_file) if t.task_id == task_id]
                return {
                    "task_id": task_id,
                    "best_step": best,
                    "base": _episode(base[0]),
                    "best": _episode(got[0]) if got else None,
                }
        raise NotFound(f"no base episode of task {task_id!r} in run {self.id} (val and test tasks only)")

    def prompt(self) -> dict[str, Any]:
        return _json(self.dir.prompt_file) or {}


class RunsRoot:
    """A folder of runs (`runs/`), or one run directory (then the only run listed)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_dir():
            raise RunDirError(f"{path} is not a directory", hint="give a runs folder or one run directory")
        self.single = RunDir(self.path).exists()

    def ids(self) -> list[str]:
        if self.single:
            return [self.path.name]
        try:
            found = [p for p in self.path.iterdir() if p.is_dir() and (p / "config.json").exists()]
        except OSError:
            return []
        return [p.name for p in sorted(found, key=lambda p: p.name) if _ID.match(p.name)]

    def run(self, run_id: str) -> Run:
        """The run of that id; NotFound for anything else, including ids that try to leave the root."""
        if not _ID.match(run_id) or run_id not in self.ids():
            raise NotFound(f"no run {run_id!r} here")
        path = self.path if self.single else self.path / run_id
        if not self.single and not path.resolve().is_relative_to(self.path):
            raise NotFound(f"no run {run_id!r} here")  # a symlink pointing out of the runs folder
        return Run(run_id, path)

    def runs(self) -> list[dict[str, Any]]:
        return [self.run(i).summary() for i in self.ids()]

    def compare(self, run_ids: list[str]) -> dict[str, Any]:
        runs = [self.run(i) for i in run_ids]
        return {"runs": [r.id for r in runs], "charts": compare_charts({r.id: r.metrics() for r in runs})}

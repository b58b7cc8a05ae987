"""A training run killed at every phase of a step, and a run that runs out of disk, then resumed:
no completed step lost or duplicated, no half-written checkpoint taken for a good one.

Real `mcp-rl train` processes (tiny model, example inventory server, checks-only reward). The kill
is deterministic: MCP_RL_FAULT=kill:<phase>:<step> makes the process SIGKILL itself at a named
point (mcp_rl/faults.py). A full disk is a file-size quota that needs no root: RLIMIT_FSIZE in
the child with SIGXFSZ ignored, so writes fail with EFBIG the way they fail with ENOSPC.
The timing-based kill -9 of a live run is tests/test_train_cli.py::test_kill_9_then_resume_loses_no_step.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INVENTORY, REPO
from mcp_rl.task import Task
from scenario_gen.io import save_tasks

pytestmark = pytest.mark.timeout(600)


def tasks_file(path: Path) -> Path:
    q = "How many product categories are there?"
    save_tasks(
        [
            Task(id="c1", text=q, source="grounded", reference_answer="6", split="train"),
            Task(id="c2", text="What is the name of item ITM-001?", split="train"),
            Task(id="v1", text=q, source="grounded", reference_answer="6", split="val"),
            Task(id="x1", text=q, source="grounded", reference_answer="6", split="test"),
        ],
        path,
    )
    return path


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def train(
    run_dir: Path, tasks: Path | None, *, server: str = INVENTORY, fault: str = "", fsize: int | None = None
) -> subprocess.CompletedProcess:
    """One `mcp-rl train` process of 2 steps: a new run when `tasks` is given, else `--resume`."""
    if tasks is not None:
        args = ["--server", server, "--model", "tiny", "--tasks", str(tasks), "--judge", "none",
                "--max-steps", "2", "--eval-every", "5", "--max-new-tokens", "12",
                "--max-turns", "2", "--group-size", "2", "--tasks-per-step", "1", "--run-dir", str(run_dir)]  # fmt: skip
    else:
        args = ["--resume", str(run_dir)]
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("MCP_RL_FAULT", None)
    if fault:
        env["MCP_RL_FAULT"] = fault

    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", "train", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit,
    )  # fmt: skip


def state(run_dir: Path) -> dict:
    path = run_dir / "state.json"
    return json.loads(path.read_text()) if path.exists() else {"completed_step": 0}


def checkpoints(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def assert_finished_whole(run_dir: Path, steps: int) -> None:
    """Every step exactly once, every checkpoint complete, nothing half-written left."""
    st = state(run_dir)
    assert st["completed_step"] == steps and st["stopped"] == "max_steps"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "step"] == list(range(1, steps + 1))
    assert [m["step"] for m in metrics if m["kind"] == "base_eval"] == [0]
    assert checkpoints(run_dir) == [f"{s:06d}" for s in range(1, steps + 1)]
    for s in range(1, steps + 1):
        ckpt = run_dir / "checkpoints" / f"{s:06d}"
        assert (ckpt / "adapter_config.json").exists() and (ckpt / "optimizer.pt").exists()
        assert (ckpt / "adapter_model.safetensors").stat().st_size > 0
        assert (run_dir / "steps" / f"{s:06d}.parquet").exists()
    leftovers = [p for p in run_dir.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]
    assert leftovers == [], leftovers


def killed(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == -signal.SIGKILL, (
        f"the fault point was not reached (exit {r.returncode}); is mcp_rl.faults.fault_point wired "
        f"in mcp_rl/train.py?\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    )


@pytest.mark.slow
def test_killed_in_every_phase_then_resumed_loses_nothing(tmp_path: Path, inventory_http: str) -> None:
    # One HTTP server for all five processes: no server start per episode, so each run is short.
    run_dir = tmp_path / "run"
    # 1. in the middle of the rollouts of step 1 (one episode ended, the other running)
    tasks = tasks_file(tmp_path / "tasks.jsonl")
    killed(train(run_dir, tasks, server=inventory_http, fault="kill:during-rollouts:1"))
    assert state(run_dir)["completed_step"] == 0 and state(run_dir).get("base_evaluated")
    assert not list((run_dir / "steps").glob("*.parquet"))
    # 1b. at the end of the rollouts of step 1, then in the middle of its training phase
    killed(train(run_dir, None, fault="kill:rollout:1"))
    killed(train(run_dir, None, fault="kill:during-training:1"))
    assert state(run_dir)["completed_step"] == 0 and not (run_dir / "checkpoints" / "000001").exists()
    # 2. resumed, killed just after the optimizer step of step 2 (weights changed in memory only)
    killed(train(run_dir, None, fault="kill:optimizer:2"))
    assert state(run_dir)["completed_step"] == 1 and checkpoints(run_dir) == ["000001"]
    step1 = (run_dir / "steps" / "000001.parquet").read_bytes()
    # 3. killed while checkpoint 2 is half written: a temp dir, never under a checkpoint's name
    r = train(run_dir, None, fault="kill:checkpoint:2")
    killed(r)
    assert "resumed after step 1" in flat(r.stdout)
    assert checkpoints(run_dir) == [".000002.tmp", "000001"]
    # 4. checkpoint 2 complete but the step not committed: it is not trusted either
    r = train(run_dir, None, fault="kill:commit:2")
    killed(r)
    assert "checkpoints/.000002.tmp" in flat(r.stdout)  # the half-written one was removed first
    assert checkpoints(run_dir) == ["000001", "000002"] and state(run_dir)["completed_step"] == 1
    # 5. resumed with no fault: step 2 is redone and the run ends whole
    r = train(run_dir, None)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "resumed after step 1" in flat(r.stdout) and "checkpoints/000002" in flat(r.stdout)
    assert_finished_whole(run_dir, 2)
    assert (run_dir / "steps" / "000001.parquet").read_bytes() == step1, "a completed step is never redone"
    assert "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fsize", "where"),
    [(12_000, "parquet"), (60_000, "checkpoint 1")],
    ids=["trajectories", "checkpoint"],
)
def test_full_disk_is_one_clear_message_and_the_run_resumes(
    tmp_path: Path, inventory_http: str, fsize: int, where: str
) -> None:
    # Trajectory files of this run are ~16 kB and the tiny adapter ~130 kB, so a 12 kB quota
    # fails on the first trajectory file and a 60 kB one on the first checkpoint.
    run_dir = tmp_path / "run"
    r = train(run_dir, tasks_file(tmp_path / "tasks.jsonl"), server=inventory_http, fsize=fsize)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    err = flat(r.stderr)
    assert "Traceback" not in err
    assert "no room left on the disk" in err and where in err
    assert f"--resume {run_dir}" in err  # what to do, with the exact path
    assert not any(p.name.startswith("0") for p in (run_dir / "checkpoints").iterdir())
    # space is back: the run resumes and ends whole
    r = train(run_dir, None)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert_finished_whole(run_dir, 2)

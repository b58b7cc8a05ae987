"""`mcp-rl train` as a user runs it: a real process, the example server, the tiny model; killed with
SIGKILL mid-run and resumed without losing a completed step; the report; bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import INVENTORY, REPO
from scenario_gen.io import save_tasks
from scenario_gen.task import Task

SECRET = "sk-planted-secret-0123456789"


def _tasks(path: Path) -> Path:
    tasks = [
        Task(id="c1", text="How many product categories are there?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="train"),
        Task(id="c2", text="What is the name of item ITM-001?", tools_expected=["get_item"], split="train"),
        Task(id="v1", text="How many categories does the shop have?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="val"),
    ]  # fmt: skip
    save_tasks(tasks, path)
    return path


def _train_args(run_dir: Path, tasks: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "mcp_rl", "train", "--server", INVENTORY, "--model", "tiny", "--tasks", str(tasks),
        "--judge", "none", "--max-steps", "3", "--eval-every", "2", "--max-new-tokens", "16", "--max-turns", "2",
        "--env", f"SHOP_API_KEY={SECRET}", "--run-dir", str(run_dir), *extra,
    ]  # fmt: skip


def _committed(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "state.json").read_text())["completed_step"]
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_kill_9_then_resume_loses_no_step(tmp_path):
    run_dir, tasks = tmp_path / "run", _tasks(tmp_path / "tasks.jsonl")
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        _train_args(run_dir, tasks), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 300
    while _committed(run_dir) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _committed(run_dir) >= 1, (
        proc.stdout.read().decode() if proc.poll() is not None else "no step in time"
    )
    os.kill(proc.pid, signal.SIGKILL)  # mid-run: step 2 may be half written
    proc.wait()
    killed_at = _committed(run_dir)
    steps_before = {p.name for p in (run_dir / "steps").glob("*.parquet")}

    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "train", "--resume", str(run_dir), "--server", INVENTORY,
         "--env", f"SHOP_API_KEY={SECRET}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"resumed after step {killed_at}" in r.stdout
    state = json.loads((run_dir / "state.json").read_text())
    assert state["completed_step"] == 3 and state["stopped"] == "max_steps"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m["step"] for m in metrics if m["kind"] == "step"]
    assert steps == [1, 2, 3], "every step exactly once: none lost, none duplicated"
    assert [m["step"] for m in metrics if m["kind"] == "base_eval"] == [0]
    # completed steps were kept, not redone
    assert {f"{s:06d}.parquet" for s in range(1, killed_at + 1)} <= steps_before
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["000001", "000002", "000003"]
    for ckpt in (run_dir / "checkpoints").iterdir():
        assert (ckpt / "adapter_config.json").exists() and (ckpt / "optimizer.pt").exists()
    assert "base vs best" in r.stdout

    # the report renders, self-contained, with its plots
    rep = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "report", str(run_dir)], cwd=REPO, capture_output=True, text=True
    )
    assert rep.returncode == 0, rep.stderr
    html = (run_dir / "report.html").read_text()
    assert (
        html.count("<svg") >= 3
        and "success on val" in html
        and "http://" not in html.replace("http://www.w3.org", "")
    )

    # the secret given to the server never reaches any file of the run
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"secret leaked into {f}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train"], "no server given"),
        (["train", "--server", INVENTORY, "--tasks", "/no/such/tasks.jsonl"], "task file not found"),
        (["train", "--server", INVENTORY, "--temperature", "0"], "--temperature must be above 0"),
        (["train", "--resume", "/no/such/run"], "not a run directory"),
        (["report", "/no/such/run"], "not a run directory"),
        (
            [
                "train",
                "--server",
                INVENTORY,
                "--model",
                "no-such-model-xyz",
                "--tasks",
                "TASKS",
                "--judge",
                "none",
            ],
            "unknown model",
        ),
    ],
)
def test_bad_input_is_one_clear_message(tmp_path, args, message):
    args = [str(_tasks(tmp_path / "t.jsonl")) if a == "TASKS" else a for a in args]
    if args[0] == "train" and "--resume" not in args:
        args += ["--run-dir", str(tmp_path / "run")]
    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr

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
from mcp_rl.task import Task
from scenario_gen.io import save_tasks

SECRET = "sk-planted-secret-0123456789"


def _tasks(path: Path) -> Path:
    tasks = [
        Task(id="c1", text="How many product categories are there?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="train"),
        Task(id="c2", text="What is the name of item ITM-001?", tools_expected=["get_item"], split="train"),
        Task(id="v1", text="How many categories does the shop have?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="val"),
        Task(id="x1", text="Count the shop's product categories.", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="test"),
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
    # the test split ran exactly twice, base and best, once each, despite the kill
    assert sorted(m["model"] for m in metrics if m["kind"] == "test_eval") == ["base", "best"]
    assert (run_dir / "test" / "base.parquet").exists()
    best = json.loads((run_dir / "best.json").read_text())
    assert best["test"]["kind"] == "test_eval" and best["test_base"]["model"] == "base"
    assert "test, base" in r.stdout and "test, best" in r.stdout
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
        and "Base vs best on test" in html
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
        (["train", "--server", INVENTORY, "--tasks", "NOTJSON"], "not valid JSON"),
        (["train", "--server", INVENTORY, "--tasks", "TRAINONLY"], "needs train, val and test tasks"),
        (
            ["train", "--server", "no-such-server-cmd --stdio", "--model", "tiny", "--tasks", "TASKS"],
            "command not found",
        ),
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
    (tmp_path / "bad.jsonl").write_text("this is not json\n")
    save_tasks([Task(id="a", text="How many categories are there?", split="train")], tmp_path / "train.jsonl")
    files = {"TASKS": _tasks(tmp_path / "t.jsonl"), "NOTJSON": tmp_path / "bad.jsonl",
             "TRAINONLY": tmp_path / "train.jsonl"}  # fmt: skip
    args = [str(files[a]) if a in files else a for a in args]
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
    if message == "command not found":  # the server is started before any model (the judge: 1.5B) loads
        assert "Loading weights" not in r.stdout + r.stderr
    # a run that failed before doing any work leaves no empty run directory behind
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_train_shows_phase_bars_and_logs_to_tensorboard_and_wandb(tmp_path):
    # As a user on a terminal sees it (TTY_COMPATIBLE makes rich treat the pipe as one), with both
    # trackers; W&B runs offline (no key), inside the run directory.
    run_dir, tasks = tmp_path / "run", _tasks(tmp_path / "tasks.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"COLUMNS": "200", "TTY_COMPATIBLE": "1", "WANDB_SILENT": "true"}
    args = _train_args(run_dir, tasks, "--log-to", "tensorboard,wandb")
    args[args.index("--max-steps") + 1] = "2"
    r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for phase in ("base eval", "rollouts", "training", "eval"):
        assert phase in r.stdout, phase
    assert "step   2" in r.stdout and "base vs best" in r.stdout

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"step/reward_mean", "step/train_s", "eval/success", "eval/mean_turns"} <= set(tags), tags
    assert [e.step for e in events.Scalars("step/reward_mean")] == [1, 2]
    assert [e.step for e in events.Scalars("eval/success")] == [0, 2]  # the base model, then step 2
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    want = [m["reward_mean"] for m in metrics if m["kind"] == "step"]
    got = [e.value for e in events.Scalars("step/reward_mean")]
    assert got == pytest.approx(want, rel=1e-6)

    offline = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == 1, list((run_dir / "wandb").rglob("*"))
    assert offline[0].stat().st_size > 0

    for f in run_dir.rglob("*"):  # W&B's metadata (the command line holds --env) stays off
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"secret leaked into {f}"


def test_unknown_or_missing_tracker_is_one_clear_message(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "train", "--server", INVENTORY, "--log-to", "mlflow"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2 and "unknown tracker 'mlflow'" in r.stderr and "Traceback" not in r.stderr


def test_evaluation_grades_state_dependent_tasks_against_the_server_as_it_is_now(tmp_path):
    # A val task whose answer moves with the server's state carries a reference that no longer holds
    # (999, where the live server says 6): evaluation must re-run its reference call and grade against 6.
    # Before this test, only training steps refreshed references, so such val tasks always failed.
    from mcp_rl.task import AnswerRule, ReferenceCall
    from mcp_rl.trajectory import load_trajectories

    stale = Task(
        id="v-state", text="How many Basecamp 6P Cabin Tents are in stock?", source="grounded", split="val",
        answer_depends_on_state=True, reference_answer="999",
        reference_calls=[ReferenceCall(tool="get_item", arguments={"item_id": "ITM-003"}, result_text="{}")],
        answer_rule=AnswerRule(kind="field", call_index=0, path=["stock"]),
    )  # fmt: skip
    train = Task(id="t", text="List the categories.", split="train")
    test = Task(id="x", text="List the shop's categories.", split="test")
    save_tasks([train, stale, test], tmp_path / "tasks.jsonl")
    args = _train_args(tmp_path / "run", tmp_path / "tasks.jsonl")
    args[args.index("--max-steps") + 1] = "1"
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (t,) = load_trajectories(tmp_path / "run" / "evals" / "000000.parquet")
    assert t.metadata["success_method"] == "checked"
    # graded against what the server said right after the episode, on the episode's own session
    assert t.metadata["probe"]["reference"] == "6" and t.metadata["reference"] == "6", t.metadata

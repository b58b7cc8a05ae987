"""Flags that say what they do (issue 19, item 5): `train --resume` applies what may change and
refuses the rest; `--base-url` exists where the docs and hints name it; one name and one meaning per
option across commands; `--version`; a Ctrl-C says what was kept and how to go on.

Real `mcp-rl` processes (the example inventory server, the tiny model), and the fake
OpenAI-compatible endpoint of tests/test_models_api.py for `--base-url`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_models_api import FakeOpenAI
from typer.testing import CliRunner

from conftest import INVENTORY, REPO
from mcp_rl.cli import app
from mcp_rl.task import Task
from scenario_gen.io import save_tasks

pytestmark = pytest.mark.timeout(600)
ENV = {**os.environ, "COLUMNS": "250", "MCP_RL_THREADS": "1", "OMP_NUM_THREADS": "1"}


def mcp_rl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=ENV
    )


def _help(*command: str) -> str:
    r = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    return r.output


def test_version_prints_the_installed_version():
    r = mcp_rl("--version", timeout=60)
    assert r.returncode == 0, r.stderr
    from importlib.metadata import version

    assert r.stdout.strip() == f"mcp-rl {version('mcp-rl')}"


@pytest.mark.parametrize("command", ["rollout", "generate", "judge", "report", "export", "split"])
def test_every_output_is_output_dash_o_and_the_old_names_are_hidden(command):
    shown = _help(command)
    assert " --output " in shown and " -o " in shown, shown
    assert " --save " not in shown and " --out " not in shown


def test_dash_n_means_episodes_per_task_wherever_it_is_shown():
    assert "-n " in _help("train") and "Episodes per task" in _help("train")
    assert "-n " in _help("rollout") and "Episodes per task" in _help("rollout")
    generate = _help("generate")
    assert " -n " not in generate and " --num " not in generate and " --n-tasks " in generate


def test_old_output_names_still_work(tmp_path):
    rollout = ["rollout", "--server", INVENTORY, "--model", "tiny", "--task", "Hi", "-n", "1", "--max-turns", "1",
               "--max-new-tokens", "4"]  # fmt: skip
    out = tmp_path / "episodes.jsonl"
    r = mcp_rl(*rollout, "--save", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert out.is_file() and out.read_text().strip()
    r = mcp_rl(*rollout, "--save", str(out), "--output", str(tmp_path / "other.jsonl"))
    assert r.returncode == 2 and "either --output or --save" in r.stderr


def test_base_url_sends_the_named_model_to_an_openai_compatible_endpoint():
    fake = FakeOpenAI()
    try:
        r = mcp_rl(
            "rollout", "--server", INVENTORY, "--model", "my-served-model", "--base-url", fake.url,
            "--task", "How many categories are there?", "-n", "1", "--max-turns", "1",
        )  # fmt: skip
    finally:
        fake.server.shutdown()
    assert r.returncode == 0, r.stderr[-3000:]
    assert "answer 0" in r.stdout
    assert fake.requests and fake.requests[0]["model"] == "my-served-model"


@pytest.mark.parametrize("command", ["train", "rollout", "generate", "judge", "chat"])
def test_every_command_that_loads_a_model_has_base_url(command):
    assert " --base-url " in _help(command)


def _tasks(path: Path) -> Path:
    tasks = [
        Task(id="c1", text="How many product categories are there?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="train"),
        Task(id="v1", text="How many categories does the shop have?", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="val"),
        Task(id="x1", text="Count the shop's product categories.", source="grounded", reference_answer="6",
             tools_expected=["list_categories"], split="test"),
    ]  # fmt: skip
    save_tasks(tasks, path)
    return path


def _state(run: Path) -> dict:
    try:
        return json.loads((run / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def _steps(run: Path) -> list[int]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["step"] for r in map(json.loads, lines) if r["kind"] == "step"]


def test_ctrl_c_says_what_was_kept_and_resume_applies_a_new_max_steps(tmp_path):
    run, tasks = tmp_path / "run", _tasks(tmp_path / "tasks.jsonl")
    args = [
        sys.executable, "-m", "mcp_rl", "train", "--server", INVENTORY, "--model", "tiny", "--tasks", str(tasks),
        "--judge", "none", "--group-size", "2", "--tasks-per-step", "1", "--max-new-tokens", "8",
        "--max-turns", "1", "--max-steps", "40", "--eval-every", "40", "--run-dir", str(run),
    ]  # fmt: skip
    proc = subprocess.Popen(args, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 400
        while _state(run).get("completed_step", 0) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("interrupted")]
    kept = _state(run)["completed_step"]
    assert len(lines) == 1, err[-3000:]
    assert f"mcp-rl train --resume {run}" in lines[0]
    assert ("step 1," if kept == 1 else f"steps 1-{kept}") in lines[0]

    # a setting the committed steps were made with is refused, by name
    r = mcp_rl("train", "--resume", str(run), "--lora-rank", "4", "--max-turns", "3")
    assert r.returncode == 2 and "--lora-rank, --max-turns cannot change" in " ".join(r.stderr.split())
    # the same value again (the original command line plus --resume) is not a change
    # ... and max steps is applied: one more step, then the run stops there (not at 40)
    r = mcp_rl("train", "--resume", str(run), "--max-turns", "1", "--max-steps", str(kept + 1))
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"max_steps 40 -> {kept + 1}" in r.stdout
    assert _steps(run) == list(range(1, kept + 2))
    assert _state(run)["stopped"] == "max_steps"
    assert json.loads((run / "config.json").read_text())["max_steps"] == kept + 1

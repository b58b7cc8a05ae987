"""Bad input to every command ends in exit code 2 and one clear message, never a traceback.

Real `mcp-rl` processes. Cases already covered elsewhere are not repeated: inspect's bad servers and
flags (test_cli_inspect.py), train's missing server/task file/unknown model/bad resume
(test_train_cli.py), rollout's missing task and bad --save (test_rollout_cli.py), generate's bad
output format and --policy without --check-with (test_scenario_cli.py), judge's missing or broken
trajectory file (test_judges_cli.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INVENTORY, REPO

pytestmark = pytest.mark.timeout(300)


def mcp_rl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "250"},
    )


def one_clear_error(r: subprocess.CompletedProcess, *words: str) -> None:
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr + r.stdout
    assert err.count("error:") == 1, err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    not_json = tmp_path / "not-json.jsonl"
    not_json.write_text("this is {not json\n")
    missing = tmp_path / "missing-fields.jsonl"
    missing.write_text(json.dumps({"id": "t1", "split": "train"}) + "\n")  # no text
    blocker = tmp_path / "a-file"
    blocker.write_text("x")  # a path under a regular file can never be created
    good = tmp_path / "tasks.jsonl"
    good.write_text(
        "\n".join(
            json.dumps({"id": i, "text": "How many categories?", "split": s})
            for i, s in (("a", "train"), ("b", "val"), ("c", "test"))
        )
        + "\n"
    )
    trajs = tmp_path / "trajs.jsonl"
    return {
        "not_json": not_json, "missing": missing, "good": good, "trajs": trajs,
        "unwritable": blocker / "sub" / "out.jsonl", "unwritable_dir": blocker / "run",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("case", "args", "words"),
    [
        (
            "train: task file not JSON",
            [
                "train",
                "--server",
                INVENTORY,
                "--tasks",
                "{not_json}",
                "--model",
                "tiny",
                "--judge",
                "none",
                "--run-dir",
                "{tmp}/r1",
            ],
            ["not-json.jsonl"],
        ),
        (
            "train: task without text",
            [
                "train",
                "--server",
                INVENTORY,
                "--tasks",
                "{missing}",
                "--model",
                "tiny",
                "--judge",
                "none",
                "--run-dir",
                "{tmp}/r2",
            ],
            ["missing-fields.jsonl"],
        ),
        (
            "train: unwritable run dir",
            [
                "train",
                "--server",
                INVENTORY,
                "--tasks",
                "{good}",
                "--model",
                "tiny",
                "--judge",
                "none",
                "--run-dir",
                "{unwritable_dir}",
            ],
            ["a-file"],
        ),
        (
            "train: --resume with --run-dir",
            ["train", "--resume", "{tmp}", "--run-dir", "{tmp}/r3"],
            ["--resume", "--run-dir"],
        ),
        (
            "train: unknown judge",
            [
                "train",
                "--server",
                INVENTORY,
                "--tasks",
                "{good}",
                "--model",
                "tiny",
                "--judge",
                "no-such-judge-xyz",
                "--run-dir",
                "{tmp}/r4",
            ],
            ["unknown model"],
        ),
        (
            "rollout: unknown model",
            ["rollout", "--server", INVENTORY, "--task", "x", "--model", "no-such-xyz"],
            ["unknown model"],
        ),
        (
            "rollout: unwritable --save",
            [
                "rollout",
                "--server",
                INVENTORY,
                "--task",
                "x",
                "--model",
                "tiny",
                "-n",
                "1",
                "--max-turns",
                "1",
                "--max-new-tokens",
                "4",
                "--save",
                "{unwritable}",
            ],
            ["out.jsonl"],
        ),
        (
            "generate: unknown generator",
            [
                "generate",
                "--server",
                INVENTORY,
                "-n",
                "2",
                "-o",
                "{tmp}/t.jsonl",
                "--generator",
                "no-such-xyz",
            ],
            ["unknown model"],
        ),
        (
            "generate: unwritable output",
            [
                "generate",
                "--server",
                INVENTORY,
                "-n",
                "2",
                "-o",
                "{unwritable}",
                "--generator",
                "tiny",
                "--explore-calls",
                "2",
            ],
            ["out.jsonl"],
        ),
        (
            "judge: task file not JSON",
            ["judge", "{trajs}", "--tasks", "{not_json}", "--judge", "none"],
            ["not-json.jsonl"],
        ),
        (
            "judge: unknown judge",
            ["judge", "{trajs}", "--judge", "no-such-xyz", "--no-cache"],
            ["unknown model"],
        ),
        (
            "judge: unwritable output",
            ["judge", "{trajs}", "--judge", "none", "-o", "{unwritable}"],
            ["out.jsonl"],
        ),
        ("report: unwritable output", ["report", "{run}", "-o", "{unwritable}"], ["out.jsonl"]),
        (
            "inspect: --server with --config",
            ["inspect", "--server", INVENTORY, "--config", "{good}"],
            ["either --server or --config"],
        ),
        ("inspect: config not JSON", ["inspect", "--config", "{not_json}"], ["not valid JSON"]),
    ],
    ids=lambda v: v if isinstance(v, str) and ":" in v else "",
)
def test_bad_input(
    case: str, args: list[str], words: list[str], files: dict[str, Path], tmp_path: Path
) -> None:
    if "{trajs}" in args:
        _write_trajectories(files["trajs"])
    run = tmp_path / "run"
    if "{run}" in args:
        _fake_finished_run(run)
    subs = {f"{{{k}}}": str(v) for k, v in files.items()} | {"{tmp}": str(tmp_path), "{run}": str(run)}
    argv = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    one_clear_error(mcp_rl(*argv), *words)


def _write_trajectories(path: Path) -> None:
    from mcp_rl.trajectory import Trajectory, save_trajectories

    save_trajectories(
        [
            Trajectory(id=f"g-{k}", task_id="a", group_id="g", task_text="t", final_answer="6")
            for k in range(2)
        ],
        path,
    )


def _fake_finished_run(run: Path) -> None:
    """The smallest run directory `report` accepts: config, state and one metrics line."""
    (run / "steps").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": "tiny", "server": {"transport": "stdio"}}))
    (run / "state.json").write_text(json.dumps({"completed_step": 0, "base_evaluated": True}))
    (run / "metrics.jsonl").write_text("")


def test_an_error_is_printed_whole_on_a_narrow_pipe(tmp_path: Path) -> None:
    # stderr is a pipe here (rich assumes 80 columns, here 40): a long path must stay on one line so it
    # can be copied back, and `[...]` in it is text, not a style tag. CI's failure before this: a long
    # temp path was wrapped after "error:", splitting the message it was checked for.
    run = tmp_path / ("a-rather-long-directory-name-" * 3 + "[v2]") / "no-such-run"
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "report", str(run)],
        cwd=REPO, capture_output=True, text=True, timeout=240, env={**os.environ, "COLUMNS": "40"},
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"error: {run} is not a run directory (no config.json)", lines
    assert lines[1].startswith("hint: "), lines

"""`mcp-rl rollout` end to end: a real model (the tiny one) against the inventory server over stdio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_rl.trajectory import load_trajectories
from tests.conftest import INVENTORY, REPO

pytestmark = pytest.mark.timeout(300)


def mcp_rl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "mcp-rl"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={
            "COLUMNS": "160",
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
            "HOME": str(Path.home()),
        },
    )


def test_rollout_prints_and_saves(tmp_path: Path) -> None:
    out = tmp_path / "episodes.parquet"
    r = mcp_rl(
        "rollout", "--server", INVENTORY, "--task", "How many tents are in stock?", "--model", "tiny",
        "-n", "2", "--max-turns", "2", "--max-new-tokens", "12", "--seed", "0", "--save", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "How many tents are in stock?" in r.stdout
    assert "episode 0" in r.stdout and "episode 1" in r.stdout
    assert "Episodes" in r.stdout  # the summary table of a group
    trajs = load_trajectories(out)
    assert len(trajs) == 2 and trajs[0].group_id == trajs[1].group_id
    assert all(t.token_ids and sum(t.sampled_mask) > 0 for t in trajs)


def test_rollout_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    r = mcp_rl("rollout", "--server", INVENTORY, "--model", "tiny")
    assert r.returncode == 2 and "no task given" in r.stderr and "Traceback" not in r.stderr
    r = mcp_rl(
        "rollout", "--server", INVENTORY, "--task", "x", "--model", "tiny", "--save", str(tmp_path / "a.csv")
    )
    assert r.returncode == 2 and ".parquet or .jsonl" in r.stderr
    r = mcp_rl("rollout", "--server", "no-such-command-xyz", "--task", "x", "--model", "tiny")
    assert r.returncode == 2 and "command not found" in r.stderr and "Traceback" not in r.stderr

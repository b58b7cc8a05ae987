"""`mcp-rl judge` on the labeled set: checks only, with a (fake scripted) judge and its cache, and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mcp_rl.cli.judge_cmd as judge_cmd
from mcp_rl.cli import app
from mcp_rl.trajectory import load_trajectories
from tests.judge_fakes import FakeScriptedJudge

DATA = Path(__file__).resolve().parents[1] / "bench" / "data"
runner = CliRunner()


def scorer(messages):
    user = messages[1]["content"]
    n = user.count("\n### t")
    return json.dumps(
        {
            "scores": [
                {"id": f"t{i}", "explanation": f"EXPLAINED-{i}", "score": i / n} for i in range(1, n + 1)
            ]
        }
    )


def test_checks_only_scores_and_writes(tmp_path: Path):
    out = tmp_path / "scored.parquet"
    res = runner.invoke(
        app,
        [
            "judge",
            str(DATA / "judge_labeled.jsonl"),
            "--tasks",
            str(DATA / "judge_tasks.jsonl"),
            "--judge",
            "none",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "A1" in res.output and "C4" in res.output and "5/12" in res.output
    scored = load_trajectories(out)
    assert len(scored) == 12 and all(t.reward is not None for t in scored)
    assert next(t for t in scored if t.id == "A1").reward_components["answer_correct"] == 1.0


def test_with_a_judge_prints_explanations_and_reuses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    judges_made: list[FakeScriptedJudge] = []

    def fake_loader(name: str, base_url: str | None = None) -> FakeScriptedJudge:
        judges_made.append(FakeScriptedJudge([scorer], name=name))
        return judges_made[-1]

    monkeypatch.setattr(judge_cmd, "load_judge", fake_loader)
    args = [
        "judge", str(DATA / "judge_labeled.jsonl"), "--tasks", str(DATA / "judge_tasks.jsonl"),
        "--judge", "some-judge", "--cache-dir", str(tmp_path / "cache"), "--judge-permutations", "2",
        "--tools", str(DATA / "judge_tools.json"),
    ]  # fmt: skip
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "EXPLAINED-1" in first.output and "0 unscored" in first.output
    assert len(judges_made[0].calls) == 6  # 3 groups x 2 orders
    assert "filter_items(" in judges_made[0].calls[0][1]["content"]  # the tools were in context
    second = runner.invoke(app, args)
    assert second.exit_code == 0 and len(judges_made[1].calls) == 0
    assert "+6 cached" in second.output


def test_unscored_groups_are_reported_not_fatal(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(judge_cmd, "load_judge", lambda name, base_url=None: FakeScriptedJudge(["no idea"]))
    res = runner.invoke(
        app, ["judge", str(DATA / "judge_labeled.jsonl"), "--judge", "x", "--no-cache", "--max-retries", "0"]
    )
    assert res.exit_code == 0, res.output
    assert "3 unscored" in res.output and "could not be read as JSON" in res.output


def test_bad_input_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "t.jsonl"
    bad.write_text("{not json\n")
    for target, expected in ((tmp_path / "missing.parquet", "not found"), (bad, "cannot read trajectories")):
        proc = subprocess.run(
            [sys.executable, "-m", "mcp_rl", "judge", str(target), "--judge", "none"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert expected in proc.stderr and "Traceback" not in proc.stderr

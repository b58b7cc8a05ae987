"""`mcp-rl recheck` as a user runs it: a real process re-running a committed task set's reference calls
against a fresh example server, and one task whose recorded answer is wrong."""

from __future__ import annotations

import json

from test_scenario_cli import mcp_rl

from conftest import INVENTORY, REPO
from scenario_gen import load_tasks, save_tasks


def test_recheck_passes_a_committed_task_set_and_writes_a_report(tmp_path):
    report = tmp_path / "recheck.json"
    r = mcp_rl("recheck", str(REPO / "examples/tasks/inventory-48.jsonl"), "--server", INVENTORY,
               "--report", str(report), timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = json.loads(report.read_text())
    grounded = [t for t in load_tasks(REPO / "examples/tasks/inventory-48.jsonl") if t.source == "grounded"]
    assert len(rows) == len(grounded) > 0
    assert all(row["status"] == "stable" for row in rows), [r for r in rows if r["status"] != "stable"]
    assert f"stable {len(rows)}" in r.stdout


def test_recheck_fails_on_a_reference_the_server_does_not_give(tmp_path):
    tasks = [t for t in load_tasks(REPO / "examples/tasks/inventory-48.jsonl") if t.source == "grounded"][:3]
    wrong = tasks[1].model_copy(update={"reference_answer": "not what the server says"})
    path = tmp_path / "tasks.jsonl"
    save_tasks([tasks[0], wrong, tasks[2]], path)
    r = mcp_rl("recheck", str(path), "--server", INVENTORY, timeout=300)
    assert r.returncode == 1
    assert wrong.id in r.stdout and "changed" in r.stdout
    assert "stable 2, changed 1" in r.stdout and "broken: 1" in r.stdout

"""`mcp-rl generate` as a user runs it: a real process, real servers, real models.

The fast tests check what fails before any model loads, and the whole path with the tiny random
model (its output is garbage: generation must still end cleanly). The slow ones are the issue's
done-criterion: the offline default writer, 30 tasks on the example server and on mcp-server-time,
at least a third grounded, every grounded reference re-checked against a fresh server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import INVENTORY, REPO, have
from scenario_gen import apply_rule, load_tasks


def mcp_rl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _has_load_model() -> bool:
    import mcp_rl.models as m

    return hasattr(m, "load_model")


def test_bad_options_fail_before_any_model_loads(tmp_path):
    r = mcp_rl("generate", "--server", INVENTORY, "-n", "3", "-o", str(tmp_path / "tasks.csv"), timeout=60)
    assert r.returncode == 2 and "cannot tell the format" in r.stderr and "Traceback" not in r.stderr
    r = mcp_rl(
        "generate", "--server", INVENTORY, "--policy", "tiny", "--no-solvability", "-o", str(tmp_path / "t.jsonl"),
        timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--check-with" in r.stderr
    r = mcp_rl("generate", "-n", "3", timeout=60)
    assert r.returncode == 2 and "no server given" in r.stderr


@pytest.mark.skipif(not _has_load_model(), reason="mcp_rl.models.load_model is not available")
def test_generate_with_a_model_that_writes_garbage_ends_cleanly(tmp_path):
    out = tmp_path / "tasks.jsonl"
    r = mcp_rl(
        "generate", "--server", INVENTORY, "-n", "2", "-o", str(out), "--generator", "tiny",
        "--explore-calls", "6", "--seed", "1", timeout=600,
    )  # fmt: skip
    # The random writer keeps nothing: one message, exit 2, and no empty task file (it used to
    # write one and exit 0; issue 19, item 4). The report is still shown: exploration really ran.
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "no task was kept" in r.stderr
    assert not out.exists() and not out.with_name("tasks.report.json").exists()
    assert not out.with_name("tasks.jsonl.journal.jsonl").exists()  # nothing made, nothing to go on from
    calls = re.search(r"exploration\s+│?\s*(\d+) calls", r.stdout)
    assert calls and int(calls.group(1)) > 0, r.stdout[-2000:]


@pytest.mark.skipif(not _has_load_model(), reason="mcp_rl.models.load_model is not available")
def test_a_generation_interrupted_says_where_its_work_is_and_the_next_run_goes_on_from_it(tmp_path):
    import signal
    import time

    out = tmp_path / "tasks.jsonl"
    journal = tmp_path / "tasks.jsonl.journal.jsonl"
    args = [sys.executable, "-m", "mcp_rl", "generate", "--server", INVENTORY, "-n", "4", "-o", str(out)]
    args += ["--generator", "tiny", "--explore-calls", "6", "--seed", "1"]
    p = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Ctrl-C once the first grounded question is on record (the tiny model's are all refused)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1][-2000:]
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert f"kept in {journal}" in err.replace("\n", "") and "run the same command again" in err
    assert journal.exists() and not out.exists()
    r = mcp_rl(*args[3:], timeout=600)
    assert "resuming" in r.stderr and str(journal) in r.stderr.replace("\n", ""), r.stderr[-2000:]
    assert r.returncode == 2 and not journal.exists()  # the tiny writer keeps nothing, as above


async def _check_references(server: str, tasks) -> dict[str, int]:
    from mcp_rl.servers import ServerSession, ServerSpec

    counts = {"same": 0, "fresh": 0, "wrong": 0}
    async with ServerSession(
        ServerSpec.parse(server).with_connection(result_budget=20000, connect_timeout=120)
    ) as s:
        for t in tasks:
            texts = [(await s.call(c.tool, c.arguments)).text for c in t.reference_calls]
            now = apply_rule(t.answer_rule, texts)
            if now == t.reference_answer:
                counts["same"] += 1
            elif now is not None and t.answer_depends_on_state:
                counts["fresh"] += 1
            else:
                counts["wrong"] += 1
    return counts


def _done_criterion(server: str, out: Path) -> None:
    r = mcp_rl("generate", "--server", server, "-n", "30", "-o", str(out), "--seed", "0", timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    tasks = load_tasks(out)
    assert len(tasks) == 30
    assert len({t.text.strip().lower() for t in tasks}) == 30
    grounded = [t for t in tasks if t.source == "grounded"]
    assert len(grounded) >= 10
    counts = anyio.run(_check_references, server, grounded)
    assert counts["wrong"] == 0, counts
    print(r.stdout[-4000:])


@pytest.mark.slow
@pytest.mark.models
@pytest.mark.criterion
@pytest.mark.skipif(not _has_load_model(), reason="mcp_rl.models.load_model is not available")
def test_done_criterion_inventory(tmp_path):
    _done_criterion(INVENTORY, tmp_path / "inventory.jsonl")


@pytest.mark.slow
@pytest.mark.models
@pytest.mark.criterion
@pytest.mark.skipif(not (_has_load_model() and have("uvx")), reason="needs load_model and uvx")
def test_done_criterion_time_server(tmp_path):
    _done_criterion("uvx mcp-server-time", tmp_path / "time.jsonl")

"""Files the user made are never lost or left half-written: issue 19, item 4.

Real `mcp-rl` processes against the example inventory server. A full disk is a file-size quota
that needs no root (RLIMIT_FSIZE in the child, SIGXFSZ ignored: writes fail with EFBIG as on a
full disk, as tests/test_reliability_run.py does for `train`); inside this process it is a fault
injection, a writer that raises OSError(ENOSPC) half-way.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from conftest import INVENTORY, REPO
from mcp_rl.atomic import write_atomic
from mcp_rl.errors import OutputError, TaskError
from mcp_rl.task import MAX_TASK_TEXT, Task
from mcp_rl.trajectory import ToolCallRecord, Trajectory, save_trajectories
from scenario_gen.io import load_tasks, save_tasks

pytestmark = pytest.mark.timeout(300)

KEEP = '{"id": "a", "text": "a task the user wrote by hand"}\n'


def mcp_rl(*args: str, fsize: int | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
        env={**os.environ, "COLUMNS": "200", "MCP_RL_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name)


def trajectories(path: Path, n: int = 4, size: int = 3000) -> Path:
    """A trajectory file to judge: groups of two with long tool results (so the output is large)."""
    trajs = [
        Trajectory(
            id=f"t{i}", task_id=f"task{i // 2}", group_id=f"g{i // 2}", task_text="How many categories?",
            messages=[{"role": "user", "content": "How many categories?"}, {"role": "assistant", "content": "6"}],
            tool_calls=[ToolCallRecord(turn=0, name="list_categories", status="ok", result_text="c" * size)],
            final_answer="6", turns=2,
        )
        for i in range(n)
    ]  # fmt: skip
    return save_trajectories(trajs, path)


# --- no overwrite without --force ----------------------------------------------------------------
@pytest.mark.parametrize("command", ["generate", "rollout", "judge"])
def test_a_non_empty_output_is_never_replaced_without_force(tmp_path: Path, command: str) -> None:
    out = tmp_path / ("mine.jsonl")
    out.write_text(KEEP)
    args = {
        "generate": ["generate", "--server", INVENTORY, "--generator", "tiny", "-n", "1", "-o", str(out)],
        "rollout": ["rollout", "--server", INVENTORY, "--task", "List the categories.", "--model", "tiny",
                    "-n", "1", "--max-turns", "1", "--max-new-tokens", "4", "--save", str(out)],
        "judge": ["judge", str(trajectories(tmp_path / "in.jsonl")), "--judge", "none", "-o", str(out)],
    }[command]  # fmt: skip
    r = mcp_rl(*args)
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "exists and is not empty" in r.stderr and "--force" in r.stderr and "Traceback" not in r.stderr
    assert out.read_text() == KEEP
    if command == "judge":  # and with --force it is replaced, whole
        r = mcp_rl(*args, "--force")
        assert r.returncode == 0, r.stderr[-1500:]
        assert len(out.read_text().splitlines()) == 4 and leftovers(tmp_path) == []


def test_a_generation_that_keeps_no_task_writes_nothing_and_fails(tmp_path: Path) -> None:
    # The random tiny writer produces nothing usable and exploration is off: 0 tasks kept. Before,
    # an empty tasks.jsonl was written (over the user's file with -o) and the command exited 0.
    out = tmp_path / "new.jsonl"
    r = mcp_rl("generate", "--server", INVENTORY, "--generator", "tiny", "-n", "1", "--explore-calls", "0",
               "-o", str(out))  # fmt: skip
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "no task was kept" in r.stderr and "nothing was written" in r.stderr
    assert not out.exists() and not (tmp_path / "new.report.json").exists() and leftovers(tmp_path) == []


def test_an_empty_task_set_is_never_written_over_anything(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(KEEP)
    with pytest.raises(TaskError, match="no tasks to write"):
        save_tasks([], path)
    assert path.read_text() == KEEP


# --- a full disk ---------------------------------------------------------------------------------
def _half_then_enospc(tmp: Path) -> None:
    tmp.write_bytes(b"half a file")
    raise OSError(errno.ENOSPC, "No space left on device", str(tmp))


def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    """Fault injection: the writer fills half the temporary file, then the disk is full."""
    path = tmp_path / "out.jsonl"
    path.write_text(KEEP)
    with pytest.raises(OutputError, match="no room left on the disk while writing") as e:
        write_atomic(path, _half_then_enospc)
    assert isinstance(e.value.__cause__, OSError) and "unchanged" in str(e.value.hint)
    assert path.read_text() == KEEP and leftovers(tmp_path) == []
    # the same for each writer that uses it: trajectories, tasks, a datasets directory
    import mcp_rl.atomic

    monkeypatch.setattr(mcp_rl.atomic, "_write_bytes", lambda data: _half_then_enospc)
    with pytest.raises(OutputError):
        save_trajectories([Trajectory(id="t", task_id="x")], tmp_path / "t.parquet")
    with pytest.raises(OutputError):
        save_tasks([Task(id="a", text="q", split="val")], tmp_path / "dataset", hf_files="parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


@pytest.mark.parametrize("command", ["judge", "rollout"])
def test_a_full_disk_in_judge_or_rollout_is_one_message_and_leaves_nothing(
    tmp_path: Path, command: str
) -> None:
    out = tmp_path / "out" / "scored.parquet"
    if command == "judge":
        args = ["judge", str(trajectories(tmp_path / "in.jsonl", n=8)), "--judge", "none", "-o", str(out)]
    else:
        args = ["rollout", "--server", INVENTORY, "--task", "List the categories.", "--model", "tiny", "-n", "4",
                "--max-turns", "2", "--max-new-tokens", "24", "--save", str(out)]  # fmt: skip
    r = mcp_rl(*args, fsize=4000)  # each output is well over 4 kB
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    err = " ".join(r.stderr.split())
    assert "no room left on the disk while writing" in err and str(out) in err
    assert "Traceback" not in r.stderr and [x[:6] for x in r.stderr.splitlines()].count("error:") == 1
    assert not out.exists() and leftovers(tmp_path) == []


# --- a failed generation in train ----------------------------------------------------------------
def test_a_train_run_whose_generation_keeps_no_task_leaves_no_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    r = mcp_rl("train", "--server", INVENTORY, "--model", "tiny", "--generator", "tiny", "--n-tasks", "3",
               "--judge", "none", "--run-dir", str(run_dir), timeout=280)  # fmt: skip
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "needs train, val and test tasks" in r.stderr and "Traceback" not in r.stderr
    assert not run_dir.exists(), "a run that can be neither reused nor resumed was left behind"


# --- sizes ---------------------------------------------------------------------------------------
def test_a_huge_task_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    text = "x" * 50_000_000  # the 50 MB task text
    path.write_text('{"id": "big", "text": "' + text + '"}\n')
    del text
    tracemalloc.start()
    try:
        with pytest.raises(TaskError, match=r"huge\.jsonl:1: this task is over"):
            load_tasks(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"{peak / 1e6:.0f} MB held to refuse it: the line was read whole"


def test_a_task_text_or_answer_over_its_limit_is_one_clear_message(tmp_path: Path) -> None:
    long = tmp_path / "long.jsonl"
    long.write_text('{"id": "a", "text": "' + "y" * (MAX_TASK_TEXT + 1) + '"}\n')
    with pytest.raises(TaskError, match=r"long.jsonl:1: not a valid task \(text: .*at most 20000"):
        load_tasks(long)
    answer = tmp_path / "answer.jsonl"
    answer.write_text('{"id": "a", "text": "q", "reference_answer": "' + "z" * 20_001 + '"}\n')
    with pytest.raises(TaskError, match="reference_answer"):
        load_tasks(answer)
    # `train --tasks` refuses it before a model loads or a run directory is made
    run_dir = tmp_path / "run"
    r = mcp_rl(
        "train", "--server", INVENTORY, "--model", "tiny", "--tasks", str(long), "--run-dir", str(run_dir)
    )
    assert r.returncode == 2 and "at most 20000" in " ".join(r.stderr.split()) and not run_dir.exists()
    # and a --task typed on the command line
    r = mcp_rl("rollout", "--server", INVENTORY, "--model", "tiny", "--task", "y" * (MAX_TASK_TEXT + 1))
    assert r.returncode == 2 and "at most 20,000" in r.stderr and "Traceback" not in r.stderr

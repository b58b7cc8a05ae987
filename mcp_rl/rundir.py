"""Everything a training run does lands in one directory, written so a kill -9 loses nothing.

    runs/<name>/
      config.json            resolved config (no secrets)
      tasks.jsonl            the task set, train and val
      state.json             the last *committed* step, best step, plateau counter
      metrics.jsonl          one line per step and per evaluation
      steps/000003.parquet   trajectories of step 3, all reward components
      evals/000004.parquet   val trajectories of the evaluation after step 4 (base: 000000)
      checkpoints/000004/    PEFT adapter (+ optimizer.pt), written to a temp dir then renamed
      best.json              which checkpoint is best, and its figures
      server-stderr.log, judge-cache/

A step is committed by rewriting state.json (atomically) after its trajectories, metrics and
checkpoint are on disk. On resume, anything newer than the committed step is a half-written
step: it is removed and redone.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_rl.errors import RunDirError


class RunState(BaseModel):
    completed_step: int = 0
    """Steps 1..completed_step are done and on disk."""
    base_evaluated: bool = False
    best_step: int | None = None
    """0 means the base model (no adapter) is best so far."""
    best_success: float | None = None
    evals_without_improvement: int = 0
    stopped: str | None = None
    """Why the run ended (max_steps, plateau), once it has."""


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def _guard(action: str, path: Path, fn: Callable[[], Any]) -> Any:
    """Run a write; turn a full disk or a permission problem into a clear, resumable error."""
    try:
        return fn()
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise RunDirError(
                f"the disk is full while {action} ({path})",
                hint="free some space, then continue with `mcp-rl train --resume "
                f"{path.parents[0] if path.is_file() else path}`: completed steps are kept",
            ) from e
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise RunDirError(
                f"cannot write {path} while {action}: {e.strerror}", hint="choose a writable --run-dir"
            ) from e
        raise


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # --- layout ------------------------------------------------------------------------------
    @property
    def config_file(self) -> Path:
        return self.path / "config.json"

    @property
    def tasks_file(self) -> Path:
        return self.path / "tasks.jsonl"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def stderr_file(self) -> Path:
        return self.path / "server-stderr.log"

    @property
    def judge_cache(self) -> Path:
        return self.path / "judge-cache"

    def step_file(self, step: int) -> Path:
        return self.path / "steps" / f"{step:06d}.parquet"

    def eval_file(self, step: int) -> Path:
        return self.path / "evals" / f"{step:06d}.parquet"

    def checkpoint(self, step: int) -> Path:
        return self.path / "checkpoints" / f"{step:06d}"

    @property
    def best_file(self) -> Path:
        return self.path / "best.json"

    # --- creation and state --------------------------------------------------------------------
    def create(self, config: dict[str, Any]) -> None:
        def make() -> None:
            for sub in ("steps", "evals", "checkpoints"):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
            _write_atomic(self.config_file, json.dumps(config, indent=2, default=str).encode())

        _guard("creating the run directory", self.path, make)

    def exists(self) -> bool:
        return self.config_file.exists()

    def load_config(self) -> dict[str, Any]:
        if not self.config_file.exists():
            raise RunDirError(
                f"{self.path} is not a run directory (no config.json)",
                hint="give the directory a `train` run created",
            )
        return json.loads(self.config_file.read_text())

    def load_state(self) -> RunState:
        if not self.state_file.exists():
            return RunState()
        try:
            return RunState.model_validate_json(self.state_file.read_text())
        except ValueError as e:
            raise RunDirError(
                f"{self.state_file} is corrupt: {e}", hint="restore it or start a new run"
            ) from e

    def commit(self, state: RunState) -> None:
        """The single point where a step becomes done."""
        _guard(
            "saving the run state",
            self.state_file,
            lambda: _write_atomic(self.state_file, state.model_dump_json(indent=2).encode()),
        )

    def write_json(self, path: Path, data: Any) -> None:
        _guard(
            f"writing {path.name}",
            path,
            lambda: _write_atomic(path, json.dumps(data, indent=2, default=str).encode()),
        )

    def append_metrics(self, record: dict[str, Any]) -> None:
        def append() -> None:
            with self.metrics_file.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())

        _guard("writing metrics", self.metrics_file, append)

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_file.exists():
            return []
        out = []
        for line in self.metrics_file.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill: ignored (and dropped by discard_uncommitted)
        return out

    def save_checkpoint(self, step: int, save: Callable[[Path], None]) -> Path:
        """`save(tmp_dir)` writes the adapter; the directory appears under its final name only when complete."""
        final = self.checkpoint(step)
        tmp = final.with_name(f".{final.name}.tmp")

        def write() -> None:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            save(tmp)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)

        _guard(f"saving checkpoint {step}", final, write)
        return final

    def discard_uncommitted(self, state: RunState) -> list[str]:
        """Remove what a killed run left beyond its last committed step. Returns what was removed."""
        removed: list[str] = []
        last = state.completed_step
        for folder in ("steps", "evals"):
            for f in sorted((self.path / folder).glob("*")):
                stem = f.name.split(".")[0].lstrip(".")
                if f.name.endswith(".tmp") or (stem.isdigit() and int(stem) > last):
                    if folder == "evals" and stem.isdigit() and int(stem) == 0 and state.base_evaluated:
                        continue
                    f.unlink()
                    removed.append(str(f.relative_to(self.path)))
        for d in sorted((self.path / "checkpoints").glob("*")):
            name = d.name.lstrip(".").split(".")[0]
            if d.name.startswith(".") or (name.isdigit() and int(name) > last):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d.relative_to(self.path)))
        kept = [
            m for m in self.read_metrics()
            if m.get("step", 0) <= last and (m.get("kind") != "base_eval" or state.base_evaluated)
        ]  # fmt: skip
        if self.metrics_file.exists():
            data = "".join(json.dumps(m, default=str) + "\n" for m in kept).encode()
            _guard("rewriting metrics", self.metrics_file, lambda: _write_atomic(self.metrics_file, data))
        return removed

"""Everything a training run does lands in one directory, written so a kill -9 loses nothing.

    runs/<name>/
      config.json            resolved config (no secrets)
      tasks.jsonl            the task set: train, val and test
      state.json             the last *committed* step, best step, plateau counter
      metrics.jsonl          one line per step and per evaluation
      steps/000003.parquet   trajectories of step 3, all reward components
      evals/000004.parquet   val trajectories of the evaluation after step 4 (base: 000000)
      test/base.parquet      the test split, run once with the base model, once with the best
      test/best.parquet      checkpoint (the run's reported figure)
      checkpoints/000004/    PEFT adapter (+ optimizer.pt), written to a temp dir then renamed
      best.json              which checkpoint val chose, its val figures, and base vs best on test
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
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from mcp_rl.atomic import no_room, write_atomic
from mcp_rl.errors import OutputError, RunDirError
from mcp_rl.faults import fault_point

if TYPE_CHECKING:
    from mcp_rl.trajectory import Trajectory


class RunState(BaseModel):
    completed_step: int = 0
    """Steps 1..completed_step are done and on disk."""
    base_evaluated: bool = False
    best_step: int | None = None
    """0 means the base model (no adapter) is best so far."""
    best_success: float | None = None
    evals_without_improvement: int = 0
    test_base_done: bool = False
    """The base model's one run on the test split is on disk."""
    test_best_done: bool = False
    """The chosen best checkpoint's one run on the test split is on disk (the run's figure)."""
    stopped: str | None = None
    """Why the run ended (max_steps, plateau), once it has."""


# A read-only place, no permission, or a path through a regular file (NOTDIR, EXIST).
_NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EEXIST}


def no_room_error(action: str, path: Path, run_path: Path, exc: BaseException) -> RunDirError:
    if isinstance(exc, OutputError) and exc.__cause__ is not None:  # write_atomic's: say the cause once
        exc = exc.__cause__
    detail = getattr(exc, "strerror", None) or str(exc).splitlines()[0][:200]
    return RunDirError(
        f"no room left on the disk while {action} ({path}): {detail}",
        hint=f"free some space (or raise the quota), then continue with `mcp-rl train --resume {run_path}`: "
        "completed steps are kept and the unfinished one is redone",
    )


def _guard(action: str, path: Path, fn: Callable[[], Any], run_path: Path | None = None) -> Any:
    """Run a write; turn a full disk or a permission problem into a clear, resumable error."""
    run_path = run_path or (path.parent if path.suffix else path)
    try:
        return fn()
    except RunDirError:
        raise
    except Exception as e:
        if no_room(e):
            raise no_room_error(action, path, run_path, e) from e
        if isinstance(e, OSError) and e.errno in _NOT_WRITABLE:
            where = e.filename or path
            raise RunDirError(
                f"cannot write {where} while {action}: {e.strerror}", hint="choose a writable --run-dir"
            ) from e
        raise


class RunDir:
    def __init__(self, path: str | Path, redact: Callable[[str], str] | None = None) -> None:
        """`redact`: the server's `ServerSpec.redact`, applied to every string of the JSON and the
        trajectories written here (tool results were redacted when made: this is the second guard)."""
        self.path = Path(path)
        self.redact = redact

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
    def prompt_file(self) -> Path:
        return self.path / "prompt.json"

    @property
    def judge_cache(self) -> Path:
        return self.path / "judge-cache"

    def step_file(self, step: int) -> Path:
        return self.path / "steps" / f"{step:06d}.parquet"

    def eval_file(self, step: int) -> Path:
        return self.path / "evals" / f"{step:06d}.parquet"

    def test_file(self, which: str) -> Path:
        """The test split's episodes: `base` or `best` (each run exactly once)."""
        return self.path / "test" / f"{which}.parquet"

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
            write_atomic(self.config_file, json.dumps(config, indent=2, default=str).encode())

        _guard("creating the run directory", self.path, make, self.path)

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
        fault_point("commit", state.completed_step)
        _guard(
            "saving the run state",
            self.state_file,
            lambda: write_atomic(self.state_file, state.model_dump_json(indent=2).encode()),
            self.path,
        )

    def write_json(self, path: Path, data: Any) -> None:
        if self.redact is not None:
            from mcp_rl.trajectory import redact_strings

            data = redact_strings(data, self.redact)
        _guard(
            f"writing {path.name}",
            path,
            lambda: write_atomic(path, json.dumps(data, indent=2, default=str).encode()),
            self.path,
        )

    def save_trajectories(self, trajs: list[Trajectory], path: Path) -> Path:
        """`trajectory.save_trajectories` with a full disk turned into a clear, resumable error."""
        from mcp_rl.trajectory import save_trajectories

        return _guard(
            f"writing trajectories {path.name}",
            path,
            lambda: save_trajectories(trajs, path, redact=self.redact),
            self.path,
        )

    def append_metrics(self, record: dict[str, Any]) -> None:
        def append() -> None:
            with self.metrics_file.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())

        _guard("writing metrics", self.metrics_file, append, self.path)

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
            try:
                save(tmp)
            except BaseException:
                # A half-written checkpoint only takes space: the name alone keeps it from being used.
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            fault_point("checkpoint", step)  # written, not yet under its final name
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)

        _guard(f"saving checkpoint {step}", final, write, self.path)
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
        done_test = {"base": state.test_base_done, "best": state.test_best_done}
        kept = [
            m for m in self.read_metrics()
            if m.get("step", 0) <= last and (m.get("kind") != "base_eval" or state.base_evaluated)
            and (m.get("kind") != "test_eval" or done_test.get(m.get("model", ""), False))
        ]  # fmt: skip
        if self.metrics_file.exists():
            data = "".join(json.dumps(m, default=str) + "\n" for m in kept).encode()
            _guard(
                "rewriting metrics",
                self.metrics_file,
                lambda: write_atomic(self.metrics_file, data),
                self.path,
            )
        return removed

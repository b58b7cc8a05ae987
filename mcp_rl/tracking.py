"""Optional experiment trackers: every record the run writes to `metrics.jsonl` also goes to
TensorBoard and/or Weights & Biases, when installed and asked for (`--log-to tensorboard,wandb`).

Only numbers are sent (and, to W&B, the run's config with its secrets already masked). Both write
inside the run directory, so a run stays one folder. W&B runs offline unless the user has given it a
key (`WANDB_API_KEY`) or chosen a mode (`WANDB_MODE`): an offline tool never phones home on its
own, and an offline W&B run can be uploaded later with `wandb sync`. W&B's own metadata (the
command line, which carries `--env`/`--header` values) and console capture are turned off, since
they would copy secrets out of the run.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path
from typing import Any, Protocol

from mcp_rl.errors import ConfigError

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""tracker name -> the package it needs."""


class Tracker(Protocol):
    def log(self, record: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


def check_trackers(names: list[str]) -> None:
    """Fail before any work when a tracker is unknown or not installed."""
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(f"unknown tracker {name!r}", hint=f"--log-to takes {', '.join(TRACKERS)}")
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise ConfigError(
                f"--log-to {name} needs the {TRACKERS[name]} package, which is not installed",
                hint=f'pip install "mcp-rl[tracking]" (or pip install {TRACKERS[name]})',
            )


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The record's numbers as `kind/name` tags: 'step/reward_mean', 'eval/success', ... (the base
    evaluation is 'eval' at step 0, so the success curve starts at the base model). Figures that
    were not measured (None) are left out, not logged as 0."""
    kind = "eval" if record.get("kind") in ("eval", "base_eval") else str(record.get("kind", "step"))
    if kind == "test_eval":  # the test split's two runs: 'test_base/success', 'test_best/success'
        kind = f"test_{record.get('model', 'eval')}"
    out = {}
    for key, value in record.items():
        if key in ("kind", "step") or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        out[f"{kind}/{key}"] = float(value)
    return out


class TensorBoardTracker:
    def __init__(self, run_path: Path, resume_after: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: a resumed run drops what a killed process wrote after its last committed step.
        self.writer = SummaryWriter(str(run_path / "tensorboard"), purge_step=resume_after + 1)

    def log(self, record: dict[str, Any]) -> None:
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, global_step=int(record.get("step", 0)))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, run_path: Path, config: dict[str, Any]) -> None:
        import wandb

        id_file = run_path / "wandb-id"  # one W&B run per run directory, resumed with it
        if not id_file.exists():
            id_file.write_text(uuid.uuid4().hex[:12])
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        settings = wandb.Settings(x_disable_meta=True, console="off", save_code=False, disable_git=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "mcp-rl"),
            name=run_path.name,
            id=id_file.read_text().strip(),
            resume="allow",
            dir=str(run_path),
            config=config,
            mode=mode,
            settings=settings,
        )
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")  # a redone step overwrites, never shifts

    def log(self, record: dict[str, Any]) -> None:
        self.run.log({"step": int(record.get("step", 0)), **scalars(record)})

    def close(self) -> None:
        self.run.finish()


def open_trackers(
    names: list[str], run_path: Path, config: dict[str, Any], resume_after: int = -1
) -> list[Tracker]:
    """`resume_after`: the last committed step (-1: nothing committed yet, not even the base eval)."""
    check_trackers(names)
    out: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            out.append(TensorBoardTracker(run_path, resume_after))
        else:
            out.append(WandbTracker(run_path, config))
    return out

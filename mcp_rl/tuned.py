"""Find and load a tuned model: a training run's checkpoint, or a directory `mcp-rl export` wrote.

Export, serve and chat all start from "this run, that checkpoint"; this module is the one place that
turns such a path into the base model's name, the adapter directory and the run's record (its
config, tasks and metrics), with clear errors for the paths that are not one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_rl.errors import ModelError
from mcp_rl.rundir import RunDir, RunDirError, RunState

EXPORT_INFO = "mcp-rl-export.json"
"""Written by `mcp-rl export` next to every export: what it was made from (no secrets)."""


class TunedSource(BaseModel):
    """Where a tuned model comes from."""

    base_model: str
    """The policy model the run trained (a built-in name, a directory, a .gguf file)."""
    adapter_dir: Path | None
    """A standard PEFT adapter directory; None for a merged export (weights already folded in)."""
    model_dir: Path | None = None
    """A merged export's transformers directory, or a GGUF export's .gguf file (both load with load_model)."""
    step: int | None = None
    run_dir: Path | None = None
    config: dict[str, Any] = {}
    """The run's resolved config (server, rollout and prompt settings), secrets already masked."""
    prompt: dict[str, Any] = {}
    """What the policy saw besides the task: system_prompt, server_name, tools, answer_convention."""


def read_json(path: Path, what: str) -> Any:
    """A JSON file mcp-rl wrote, or one clear error when it was damaged."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RunDirError(
            f"{path} ({what}) cannot be read: {e}", hint="restore it, or export again"
        ) from None


def _checkpoints(run: RunDir, state: RunState) -> list[int]:
    """Complete checkpoints of committed steps. A checkpoint of a step the run never committed
    (killed between saving it and committing the step) is not trusted: `--resume` redoes that step."""
    folder = run.path / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in folder.iterdir()
        if p.is_dir() and p.name.isdigit() and int(p.name) <= state.completed_step and _is_adapter(p)
    )


def _is_adapter(path: Path) -> bool:
    return (path / "adapter_config.json").is_file() and any(path.glob("adapter_model.*"))


def resolve_checkpoint(run: RunDir, checkpoint: str | int = "best") -> int:
    """'best' (the best committed evaluation), 'last' (the last committed step), or a step number."""
    state = run.load_state()
    steps = _checkpoints(run, state)
    if not steps:
        raise RunDirError(
            f"{run.path} has no checkpoint yet",
            hint="train at least one step (mcp-rl train ... --max-steps 1), or pass an exported directory",
        )
    if checkpoint == "last":
        return steps[-1]
    if checkpoint == "best":
        if state.best_step in steps:
            return state.best_step
        if not state.best_step:  # said plainly rather than handing over an adapter that lost
            raise RunDirError(
                f"no checkpoint of {run.path} beat the base model on the val split",
                hint=f"pass --checkpoint last (or a step: {', '.join(map(str, steps))}) to use an adapter anyway",
            )
        raise RunDirError(f"the best checkpoint of {run.path} (step {state.best_step}) is missing")
    try:
        step = int(checkpoint)
    except ValueError:
        raise RunDirError(
            f"unknown checkpoint {checkpoint!r}", hint="use 'best', 'last' or a step number"
        ) from None
    if (
        step not in steps
        and step > state.completed_step
        and (run.checkpoint(step) / "adapter_config.json").is_file()
    ):
        raise RunDirError(
            f"step {step} of {run.path} was never committed (the run was killed while finishing it)",
            hint=f"resume the run (mcp-rl train --resume {run.path}), or pick a committed step: "
            + ", ".join(map(str, steps)),
        )
    if step not in steps:
        raise RunDirError(
            f"{run.path} has no checkpoint for step {step}",
            hint=f"complete checkpoints: {', '.join(map(str, steps))}",
        )
    return step


def find_tuned(path: str | Path, checkpoint: str | int = "best") -> TunedSource:
    """A run directory, one of its checkpoint directories, or an export directory."""
    p = Path(path).expanduser()
    if not p.exists():
        raise RunDirError(f"{p} does not exist", hint="give a run directory (runs/<name>) or an export")
    if (p / EXPORT_INFO).is_file():
        info = read_json(p / EXPORT_INFO, "what the export was made from")
        merged = (p / "config.json").is_file() and not _is_adapter(p)
        gguf = p / str(info.get("file") or "") if info.get("format") == "gguf" else None
        if gguf is not None and not gguf.is_file():
            raise RunDirError(f"{p} is a GGUF export without its file {gguf.name}", hint="export it again")
        return TunedSource(
            base_model=info.get("base_model", ""),
            adapter_dir=None if merged or gguf else p,
            model_dir=gguf or (p if merged else None),
            step=info.get("step"),
            config=info.get("config", {}),
            prompt=info.get("prompt", {}),
        )
    if _is_adapter(p) and (p.parent.parent / "config.json").is_file():  # runs/<name>/checkpoints/<step>
        run = RunDir(p.parent.parent)
        step = int(p.name) if p.name.isdigit() else None
        if step is not None and step > run.load_state().completed_step:
            raise RunDirError(
                f"{p} belongs to step {step}, which the run never committed (it was killed while saving it)",
                hint=f"resume the run (mcp-rl train --resume {run.path}) or pick a committed step",
            )
    elif (p / "config.json").is_file() and (p / "checkpoints").is_dir():
        run = RunDir(p)
        step = resolve_checkpoint(run, checkpoint)
    else:
        raise RunDirError(
            f"{p} is neither a training run nor an mcp-rl export",
            hint="give runs/<name> (it has config.json and checkpoints/), or a directory `mcp-rl export` wrote",
        )
    config = run.load_config()
    return TunedSource(
        base_model=config.get("model", ""),
        adapter_dir=run.checkpoint(step) if step is not None else p,
        step=step,
        run_dir=run.path,
        config=config,
        prompt=run_prompt(run),
    )


def run_prompt(run: RunDir) -> dict[str, Any]:
    """`prompt.json`, or for runs older than it, the system message and tools of a recorded episode."""
    if run.prompt_file.is_file():
        return read_json(run.prompt_file, "the training prompt")
    from mcp_rl.trajectory import load_trajectories

    for f in sorted((run.path / "evals").glob("*.parquet")) + sorted((run.path / "steps").glob("*.parquet")):
        for t in load_trajectories(f)[:1]:
            system = next((m.get("content") for m in t.messages if m.get("role") == "system"), "")
            return {"system_prompt": system or "", "tools": t.metadata.get("tools", [])}
    return {}


def load_tuned(source: TunedSource, **opts: Any) -> Any:
    """The tuned model as a TransformersModel (base model + adapter, or the merged export)."""
    from mcp_rl.models import load_model

    if source.model_dir is not None:
        return load_model(str(source.model_dir), **opts)
    if not source.base_model:
        raise ModelError("the run does not record its base model", hint="its config.json lacks 'model'")
    model = load_model(source.base_model, **opts)
    if not hasattr(model, "load_adapter"):
        raise ModelError(f"{source.base_model} is not a local model: an adapter cannot be applied to it")
    model.load_adapter(source.adapter_dir)
    return model

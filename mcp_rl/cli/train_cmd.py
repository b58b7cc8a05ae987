"""`mcp-rl train`: the main job."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.options import (
    AllowDestructiveOpt,
    AllowToolsOpt,
    ConfigOpt,
    DenyToolsOpt,
    EnvOpt,
    HeaderOpt,
    NameOpt,
    ServerOpt,
    server_spec,
    tool_policy,
)
from mcp_rl.cli.progress import RichPhases
from mcp_rl.errors import ConfigError, McpRlError
from mcp_rl.rundir import RunDir, no_room, no_room_error
from mcp_rl.servers import ServerSpec
from mcp_rl.tracking import check_trackers
from mcp_rl.train_config import DEFAULT_JUDGE_MODEL, DEFAULT_POLICY_MODEL, DEFAULT_WRITER_MODEL, TrainConfig


def _resumed_spec(saved: dict[str, Any], given: ServerSpec | None) -> ServerSpec:
    if given is not None:
        return given
    spec = ServerSpec.model_validate(saved)
    if "***" in spec.env.values() or "***" in spec.headers.values():
        raise ConfigError(
            "this run's server needs env values or headers that were not saved (they are secrets)",
            hint="pass the same --server/--config (and --env/--header) again with --resume",
        )
    return spec


def _pct(m: dict[str, Any] | None, key: str) -> str:
    v = None if m is None else m.get(key)
    return "-" if v is None else f"{v:.0%}"


def _report(result: dict[str, Any]) -> None:
    from mcp_rl.train import rate_text

    state = result["state"]
    rows = [
        ("test, base", result.get("test_base")),
        (f"test, best (step {state.best_step or 0})", result.get("test_best")),
        ("val, base", result["base"]),
        (f"val, best (step {state.best_step or 0})", result["best"]),
    ]
    table = Table(title="base vs best: the test split is the result (run once each); val chose the checkpoint")
    # Evaluations are graded, not rewarded. Checked success (tasks with a reference) is the headline;
    # judged success (tasks without one) is its own column, never mixed in.
    for col in ("", "checked success [95% CI]", "judged success", "pasted", "valid calls", "tool errors", "turns"):
        table.add_column(col)
    for label, m in rows:
        if m is None:
            continue
        table.add_row(
            label,
            rate_text(m),
            rate_text(m, "judged"),
            _pct(m, "pasted_rate"),
            _pct(m, "valid_call_rate"),
            _pct(m, "tool_error_rate"),
            f"{m['mean_turns']:.2f}",
        )
    console.print(table)
    console.print(
        f"stopped: {state.stopped}.  The run lives in [bold]{result['run_dir']}[/] (mcp-rl report {result['run_dir']})"
    )


@app.command("train")
def train_command(
    server: ServerOpt = None,
    config: ConfigOpt = None,
    name: NameOpt = None,
    env: EnvOpt = None,
    header: HeaderOpt = None,
    allow_tools: AllowToolsOpt = None,
    deny_tools: DenyToolsOpt = None,
    allow_destructive: AllowDestructiveOpt = False,
    model: Annotated[
        str, typer.Option(help="Policy model: a built-in name, HF dir, .gguf file, or hub id.")
    ] = DEFAULT_POLICY_MODEL,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Task file (JSONL/Parquet/dataset dir); else tasks are generated."),
    ] = None,
    n_tasks: Annotated[int, typer.Option(help="Tasks to generate when no --tasks file is given.")] = 24,
    val_fraction: Annotated[
        float,
        typer.Option(
            min=0.05,
            max=0.9,
            help="Share of generated tasks held out for evaluation (a --tasks file keeps its split).",
        ),
    ] = 0.25,
    generator: Annotated[str, typer.Option(help="Task-writing model.")] = DEFAULT_WRITER_MODEL,
    instructions: Annotated[str, typer.Option(help="Steer the theme of generated tasks.")] = "",
    judge: Annotated[
        str, typer.Option(help="RULER judge model, or 'none' for checks only.")
    ] = DEFAULT_JUDGE_MODEL,
    judge_grounded: Annotated[
        bool,
        typer.Option(
            help="Also judge groups of grounded tasks (those have a reference answer, and the checks grade "
            "them on their own by default). Worth it with a strong API judge; the offline one hurt there."
        ),
    ] = False,
    rubric: Annotated[Path | None, typer.Option(help="A file with your own RULER rubric.")] = None,
    judge_permutations: Annotated[
        int, typer.Option(help="Score K shuffled orders and average (position bias).")
    ] = 1,
    group_size: Annotated[
        int, typer.Option("--group-size", "-n", help="Episodes per task (a GRPO group).")
    ] = 4,
    tasks_per_step: Annotated[int, typer.Option(help="Tasks (groups) per step.")] = 2,
    max_steps: Annotated[int, typer.Option(help="Stop after this many steps at most.")] = 20,
    eval_every: Annotated[int, typer.Option(help="Evaluate on val every K steps.")] = 2,
    patience: Annotated[int, typer.Option(help="Stop after P evaluations without improvement.")] = 3,
    min_improvement: Annotated[
        float, typer.Option(help="The margin an evaluation must beat the best by.")
    ] = 0.02,
    learning_rate: Annotated[float, typer.Option(help="LoRA learning rate.")] = 1e-4,
    lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
    gradient_checkpointing: Annotated[
        bool,
        typer.Option(
            help="Recompute activations in the backward pass: 7 GB less peak memory for the 0.5B "
            "policy on 3k-token episodes (11.7 -> 4.6 GiB), for about 1.5x the training time."
        ),
    ] = True,
    max_turns: Annotated[int, typer.Option(help="Assistant turns per episode.")] = 4,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens per assistant turn.")] = 160,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed for tasks, sampling and splits.")] = 0,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Where the run lives (default runs/<server>-<time>).")
    ] = None,
    log_to: Annotated[
        list[str] | None,
        typer.Option(
            "--log-to",
            help="Also log metrics to 'tensorboard' and/or 'wandb' (repeatable or comma-separated; "
            "written inside the run directory; W&B runs offline unless WANDB_API_KEY or WANDB_MODE is set).",
        ),
    ] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue the run in this directory.")
    ] = None,
) -> None:
    """Train the model to use the server's tools: tasks, episodes, RULER + checks, GRPO on a LoRA,
    evaluation on held-out tasks until success plateaus. Offline by default."""
    from mcp_rl.train import Trainer, check_config

    given = server_spec(server, config, name, env, header) if (server or config) else None
    trackers = [n.strip() for item in log_to or [] for n in item.split(",") if n.strip()]
    made_here = False
    if resume is not None:
        if run_dir is not None:
            raise ConfigError("give either --resume DIR or --run-dir DIR, not both")
        run = RunDir(resume)
        cfg = TrainConfig.model_validate(run.load_config())
        spec = _resumed_spec(cfg.server, given)
        if trackers:  # a resumed run may add or change its trackers
            check_trackers(trackers)
            cfg.log_to = trackers
    else:
        if given is None:
            raise ConfigError(
                "no server given", hint="pass --server URL_OR_COMMAND, or --config FILE [--name NAME]"
            )
        spec = given
        cfg = TrainConfig(
            model=model,
            server=spec.public(),
            policy=tool_policy(allow_tools, deny_tools, allow_destructive),
            tasks_file=str(tasks) if tasks else None,
            n_tasks=n_tasks,
            val_fraction=val_fraction,
            generator=generator,
            instructions=instructions,
            judge=judge,
            judge_grounded=judge_grounded,
            rubric_file=str(rubric) if rubric else None,
            judge_permutations=judge_permutations,
            group_size=group_size,
            tasks_per_step=tasks_per_step,
            max_steps=max_steps,
            eval_every=eval_every,
            patience=patience,
            min_improvement=min_improvement,
            seed=seed,
            log_to=trackers,
        )
        cfg.grpo.learning_rate = learning_rate
        cfg.grpo.gradient_checkpointing = gradient_checkpointing
        cfg.grpo.temperature = temperature
        cfg.lora.r, cfg.lora.alpha = lora_rank, 2 * lora_rank
        cfg.rollout = cfg.rollout.model_copy(
            update={"max_turns": max_turns, "max_new_tokens": max_new_tokens, "temperature": temperature}
        )
        check_config(cfg)
        run = RunDir(run_dir or Path("runs") / f"{spec.name or 'server'}-{time.strftime('%Y%m%d-%H%M%S')}")
        if run.exists():
            raise ConfigError(
                f"{run.path} already holds a run",
                hint=f"continue it with --resume {run.path}, or choose another --run-dir",
            )
        made_here = not run.path.exists()
        run.create(cfg.model_dump(mode="json"))
    console.print(f"run directory: [bold]{run.path}[/]")
    trainer = Trainer(
        cfg, spec, run, say=lambda s: console.print(s, highlight=False), phases=RichPhases(console)
    )
    try:
        result = anyio.run(trainer.fit, resume is not None)
    except Exception as e:
        if made_here and not run.tasks_file.exists() and not no_room(e):
            # Failed before any work worth keeping (e.g. the server would not start): leave no
            # empty run behind to be mistaken for a real one. Its error message says what happened.
            shutil.rmtree(run.path, ignore_errors=True)
        # Writes outside RunDir's own guards (trajectory files, a library's own writer) that ran
        # out of room still end in one clear, resumable message.
        if isinstance(e, McpRlError) or not no_room(e):
            raise
        raise no_room_error("writing the run", run.path, run.path, e) from None
    _report(result)

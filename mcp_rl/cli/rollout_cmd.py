"""`mcp-rl rollout`: a model works a task against a live server, n times, and the episodes are printed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import anyio
import anyio.to_thread
import typer

from mcp_rl.cli.app import app, console, err_console
from mcp_rl.cli.from_config import checked, config_options, range_help
from mcp_rl.cli.options import ROLLOUT_FLAGS, BaseUrlOpt, SaveAlias, ServerOptions, check_output, one_output
from mcp_rl.errors import ConfigError
from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL
from mcp_rl.models.registry import check_base_url, check_model_name
from mcp_rl.rollout import RolloutConfig, SessionPool, run_tasks
from mcp_rl.rollout.show import print_trajectories
from mcp_rl.task import MAX_TASK_TEXT
from mcp_rl.trajectory import Trajectory, save_trajectories

_MAX_SERVERS = 8


@app.command("rollout")
@config_options
def rollout(
    *,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", help="What the model should do (repeatable: one group each)."),
    ] = None,
    servers: ServerOptions,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="A built-in offline model name, a local HF directory or GGUF file, a hub id, or an API model "
            "(openai:NAME, or a litellm name).",
        ),
    ] = DEFAULT_POLICY_MODEL,
    n: Annotated[
        int, typer.Option("--episodes", "-n", min=1, help="Episodes per task, run concurrently.")
    ] = 4,
    max_turns: Annotated[
        int,
        typer.Option(
            "--max-turns", help=range_help(RolloutConfig, "max_turns", "Assistant messages per episode.")
        ),
    ] = 6,
    max_new_tokens: Annotated[
        int,
        typer.Option(
            "--max-new-tokens",
            help=range_help(RolloutConfig, "max_new_tokens", "Tokens per assistant message."),
        ),
    ] = 256,
    max_context: Annotated[
        int,
        typer.Option(
            "--max-context",
            help=range_help(RolloutConfig, "max_context_tokens", "Token budget of a whole episode."),
        ),
    ] = 4096,
    temperature: Annotated[
        float,
        typer.Option("--temperature", help=range_help(RolloutConfig, "temperature", "Sampling temperature.")),
    ] = 1.0,
    top_p: Annotated[
        float, typer.Option("--top-p", help=range_help(RolloutConfig, "top_p", "Nucleus sampling."))
    ] = 1.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Sampling seed (same seed, same episodes).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the trajectories to FILE.parquet or FILE.jsonl."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the --output file if it exists and is not empty.")
    ] = False,
    save: SaveAlias = None,
    base_url: BaseUrlOpt = None,
) -> None:
    """Run episodes of a model against a live MCP server and print them (turns, calls, results, answer)."""
    tasks = [t for t in (task or []) if t.strip()]
    if not tasks:
        raise ConfigError("no task given", hint='pass --task "what the model should do" (repeatable)')
    save = one_output(output, save, "--save")
    if save is not None and save.suffix not in (".parquet", ".jsonl"):
        raise ConfigError(
            f"cannot save to {save}: unknown file type", hint="use a .parquet or .jsonl file name"
        )
    check_output(save, "--output", force=force)
    too_long = [n for n, t in enumerate(tasks, 1) if len(t) > MAX_TASK_TEXT]
    if too_long:
        raise ConfigError(
            f"--task number {too_long[0]} is {len(tasks[too_long[0] - 1]):,} characters long; "
            f"a task may have at most {MAX_TASK_TEXT:,}",
            hint="a task is a request a user would type: put data the tools should read into the server",
        )
    cfg = checked(
        RolloutConfig, ROLLOUT_FLAGS,
        max_turns=max_turns, max_new_tokens=max_new_tokens, max_context_tokens=max_context,
        temperature=temperature, top_p=top_p, seed=seed,
    )  # fmt: skip
    spec, policy = servers.spec(), servers.policy()
    check_model_name(model, base_url=check_base_url(base_url))

    from mcp_rl.models.registry import close_models, load_model

    loaded: list[object] = []

    async def main() -> list[list[Trajectory]]:
        pool = SessionPool(spec, policy, size=min(n * len(tasks), _MAX_SERVERS))
        # The server first: a wrong command fails in seconds, before a model load that can take a minute.
        with err_console.status(f"starting server {spec.describe()} ..."):
            await pool.__aenter__()
        try:
            if not pool.tools:
                raise ConfigError(
                    f"server {spec.describe()!r} offers no usable tools",
                    hint="see `mcp-rl inspect`; --allow-destructive or --allow-tools may include some",
                )
            sharing = (
                "one shared session (all tools read-only)"
                if pool.shared
                else f"{pool.session_count} sessions"
            )
            err_console.print(
                f"[dim]server {pool.first.server_name} {pool.first.server_version}: "
                f"{len(pool.tools)} tools, {sharing}[/]",
                highlight=False,
            )
            t0 = time.monotonic()
            with err_console.status(f"loading model {model} ..."):
                chat_model = await anyio.to_thread.run_sync(lambda: load_model(model, base_url=base_url))
            loaded.append(chat_model)
            err_console.print(
                f"[dim]model {model} ready in {time.monotonic() - t0:.1f} s; running {n} x {len(tasks)} episodes[/]"
            )
            return await run_tasks(
                chat_model, pool, list(tasks), n=n, config=cfg, max_concurrent=n * len(tasks)
            )
        finally:
            await pool.__aexit__(None, None, None)

    try:
        groups = anyio.run(main)
    finally:
        # A generation worker still running at interpreter exit aborts the process
        # ("terminate called without an active exception", exit -6): stop it first.
        close_models(*loaded)
    for trajs in groups:
        print_trajectories(console, trajs)
    if save is not None:
        path = save_trajectories([t for g in groups for t in g], save, redact=spec.redact)
        console.print(f"saved {sum(len(g) for g in groups)} trajectories to {path}")

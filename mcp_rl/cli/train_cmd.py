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
from mcp_rl.cli.from_config import Given, config_options, validate
from mcp_rl.cli.options import ServerOptions
from mcp_rl.cli.progress import RichPhases
from mcp_rl.errors import ConfigError, McpRlError, OutputError
from mcp_rl.rundir import RunDir, no_room, no_room_error
from mcp_rl.servers import ServerSpec
from mcp_rl.tracking import check_trackers
from mcp_rl.train_config import TrainConfig


def _resumed_spec(saved: dict[str, Any], given: ServerSpec | None, connection: dict[str, Any]) -> ServerSpec:
    """The server of a resumed run: the one given again, else the saved one; reached with the saved
    timeouts, except those given again."""
    old = ServerSpec.model_validate(saved)
    if given is None:
        if "***" in old.env.values() or "***" in old.headers.values() or "***" in (old.url or ""):
            raise ConfigError(
                "this run's server needs env values, headers or URL credentials that were not saved "
                "(they are secrets)",
                hint="pass the same --server/--config (and --env/--header) again with --resume",
            )
        given = old
    return given.model_copy(update={"connection": old.connection}).with_connection(**connection)


def _report(result: dict[str, Any]) -> None:
    from mcp_rl.figures import pct, rate_text

    state = result["state"]
    rows = [
        ("test, base", result.get("test_base")),
        (f"test, best (step {state.best_step or 0})", result.get("test_best")),
        ("val, base", result["base"]),
        (f"val, best (step {state.best_step or 0})", result["best"]),
    ]
    table = Table(
        title="base vs best: the test split is the result (run once each); val chose the checkpoint"
    )
    # Evaluations are graded, not rewarded. Checked success (tasks with a reference) is the headline;
    # judged success (tasks without one) is its own column, never mixed in.
    for col in (
        "",
        "checked success [95% CI]",
        "judged success",
        "pasted",
        "valid calls",
        "tool errors",
        "turns",
    ):
        table.add_column(col)
    for label, m in rows:
        if m is None:
            continue
        table.add_row(
            label,
            rate_text(m),
            rate_text(m, "judged"),
            pct(m.get("pasted_rate")),
            pct(m.get("valid_call_rate")),
            pct(m.get("tool_error_rate")),
            f"{m['mean_turns']:.2f}",
        )
    console.print(table)
    console.print(
        f"stopped: {state.stopped}.  The run lives in [bold]{result['run_dir']}[/] (mcp-rl report {result['run_dir']})"
    )


@app.command("train")
@config_options
def train_command(
    servers: Given[ServerOptions],
    cfg: Given[TrainConfig],
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Where the run lives (default runs/<server>-<time>).")
    ] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue the run in this directory.")
    ] = None,
    dashboard: Annotated[
        bool,
        typer.Option(
            "--dashboard",
            help="Start `mcp-rl dashboard` beside the run (its own process, 127.0.0.1) and print its URL.",
        ),
    ] = False,
    dashboard_port: Annotated[
        int, typer.Option("--dashboard-port", min=0, max=65535, help="The dashboard's port (if free).")
    ] = 8050,
) -> None:
    """Train the model to use the server's tools: tasks, episodes, RULER + checks, GRPO on a LoRA,
    evaluation on held-out tasks until success plateaus. Offline by default."""
    # Every option is validated here, before a server starts, a model loads or a directory is made.
    srv = servers.build()
    made_here = False
    if resume is not None:
        if run_dir is not None:
            raise ConfigError("give either --resume DIR or --run-dir DIR, not both")
        run = RunDir(resume)
        saved = run.load_config()
        if "log_to" in cfg:  # a resumed run keeps its settings, but may add or change its trackers
            saved["log_to"] = cfg.get("log_to")
        train_cfg = validate(TrainConfig, saved)
        if "log_to" in cfg:
            check_trackers(train_cfg.log_to)
        timeouts = {path[-1]: v for path, v in servers.values.items() if path[0] == "connection"}
        spec = _resumed_spec(train_cfg.server, srv.spec() if srv.given else None, timeouts)
    else:
        train_cfg = cfg.build()
        spec = srv.spec()
        train_cfg = train_cfg.model_copy(update={"server": spec.public(), "policy": srv.policy()})
        from mcp_rl.train import check_config  # torch: imported once the options are known good

        check_config(train_cfg)
        run = RunDir(run_dir or Path("runs") / f"{spec.name or 'server'}-{time.strftime('%Y%m%d-%H%M%S')}")
        if run.exists():
            raise ConfigError(
                f"{run.path} already holds a run",
                hint=f"continue it with --resume {run.path}, or choose another --run-dir",
            )
        made_here = not run.path.exists()
        run.create(train_cfg.model_dump(mode="json"))
    console.print(f"run directory: [bold]{run.path}[/]")
    watcher = None
    if dashboard:
        from mcp_rl.cli.dashboard_cmd import start_beside

        watcher, url = start_beside(run.path, dashboard_port)
        console.print(f"dashboard: {url}", highlight=False, soft_wrap=True)
    try:
        _fit(train_cfg, spec, run, resume is not None, made_here)
    finally:
        if watcher is not None:
            watcher.terminate()  # it only reads the run: stopping it loses nothing
            watcher.wait(timeout=10)


def _fit(train_cfg: TrainConfig, spec: ServerSpec, run: RunDir, resumed: bool, made_here: bool) -> None:
    from mcp_rl.train import Trainer

    trainer = Trainer(
        train_cfg, spec, run, say=lambda s: console.print(s, highlight=False), phases=RichPhases(console)
    )
    try:
        result = anyio.run(trainer.fit, resumed)
    except Exception as e:
        if made_here and not run.tasks_file.exists() and not no_room(e):
            # Failed before any work worth keeping (e.g. the server would not start): leave no
            # empty run behind to be mistaken for a real one. Its error message says what happened.
            shutil.rmtree(run.path, ignore_errors=True)
        # Writes outside RunDir's own guards (trajectory files, a library's own writer) that ran
        # out of room still end in one clear, resumable message.
        if (isinstance(e, McpRlError) and not isinstance(e, OutputError)) or not no_room(e):
            raise
        raise no_room_error("writing the run", run.path, run.path, e) from None
    _report(result)

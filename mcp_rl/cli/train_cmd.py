"""`mcp-rl train`: the main job."""

from __future__ import annotations

import shlex
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.from_config import Given, config_options, validate
from mcp_rl.cli.interrupt import on_interrupt
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


RESUMABLE = ("max_steps", "eval_every", "patience", "log_to")
"""The settings `train --resume` applies: when to stop and how to log. Every other one (the model,
the tasks, the scoring, the LoRA, GRPO, the episodes) is what the committed steps were made with,
and changing it halfway would make one run of two."""


_POLICY = {"allow_tools": "allow", "deny_tools": "deny", "allow_destructive": "allow_destructive"}


def _refuse_fixed_settings(
    cfg: Given[TrainConfig], servers: Given[ServerOptions], saved: TrainConfig, run: RunDir
) -> None:
    """A setting given again with its saved value is fine (the original command line plus --resume);
    a different one is refused, unless it is one of RESUMABLE."""

    def saved_value(path: tuple[str, ...]) -> Any:
        node: Any = saved
        for key in path:
            node = getattr(node, key)
        return node

    fixed = [
        f.flag
        for f in cfg.fields
        if f.path in cfg.values and f.path[-1] not in RESUMABLE and cfg.values[f.path] != saved_value(f.path)
    ]
    # the server may be named again (its secrets were not saved) and its timeouts changed; its tool
    # policy is part of what the run learned
    fixed += [
        f.flag
        for f in servers.fields
        if f.path in servers.values
        and f.path[-1] in _POLICY
        and servers.values[f.path] != getattr(saved.policy, _POLICY[f.path[-1]])
    ]
    if fixed:
        flags = " ".join(f"--{name.replace('_', '-')}" for name in RESUMABLE)
        raise ConfigError(
            f"{', '.join(fixed)} cannot change when a run is resumed: its steps were made with the saved value",
            hint=f"on resume only {flags} (and the server's timeouts) may change; start a new run for "
            f"the others (--tasks {run.tasks_file} reuses this run's tasks)",
        )
    state = run.load_state()
    changes = [p for p in cfg.values if p[-1] in RESUMABLE and cfg.values[p] != saved_value(p)]
    if changes and state.test_best_done:
        raise ConfigError(
            f"{run.path} has finished ({state.stopped}): its test figure is final, so its settings no longer change",
            hint=f"start a new run (--tasks {run.tasks_file} reuses its tasks)",
        )


def _changed(new: TrainConfig, old: TrainConfig) -> str:
    return ", ".join(
        f"{name} {_shown(getattr(old, name))} -> {_shown(getattr(new, name))}"
        for name in RESUMABLE
        if getattr(new, name) != getattr(old, name)
    )


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _kept(run: RunDir, spec: ServerSpec) -> str:
    """The one line a Ctrl-C of `train` prints: what is on disk, and the command that continues."""
    again = " (with the same --server/--config and --env/--header)" if spec.secret_values() else ""
    resume = f"mcp-rl train --resume {run.path}{again}"
    if not run.tasks_file.exists():
        return f"interrupted before the tasks were ready: nothing of {run.path} is worth keeping yet; {resume} writes them again"
    state = run.load_state()
    if not state.base_evaluated:
        kept = "its tasks (the base model's evaluation was not finished)"
    elif state.completed_step == 0:
        kept = "its tasks and the base model's evaluation"
    else:
        steps = "step 1" if state.completed_step == 1 else f"steps 1-{state.completed_step}"
        kept = f"its tasks, the base evaluation and {steps}, each whole"
    if state.test_best_done:
        return f"interrupted after the run finished: {run.path} is complete (mcp-rl report {run.path})"
    return f"interrupted: {run.path} keeps {kept}; anything newer is redone. Continue with: {resume}"


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
        saved = validate(TrainConfig, run.load_config())
        _refuse_fixed_settings(cfg, servers, saved, run)
        # the settings that may change on resume are applied (and saved, for the next resume)
        train_cfg = cfg.build(base=saved.model_dump(mode="json"))
        check_trackers(train_cfg.log_to)
        timeouts = {path[-1]: v for path, v in servers.values.items() if path[0] == "connection"}
        spec = _resumed_spec(train_cfg.server, srv.spec() if srv.given else None, timeouts)
        if train_cfg != saved:
            run.write_json(run.config_file, train_cfg.model_dump(mode="json"))
            console.print(f"resuming with {_changed(train_cfg, saved)}", highlight=False)
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
    on_interrupt(lambda: _kept(run, spec))
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
            # the open page now says "reconnecting": say how to read the run again
            again = f"mcp-rl dashboard {shlex.quote(str(run.path.resolve().parent))}"
            console.print(
                f"dashboard stopped with the run; to read it again: {again}", highlight=False, soft_wrap=True
            )


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

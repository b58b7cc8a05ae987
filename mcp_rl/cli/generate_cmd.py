"""`mcp-rl generate`: a validated, split task set from a live server's tools, with no labeled data."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from mcp_rl.atomic import write_atomic
from mcp_rl.cli.app import app, console, err_console, load_helper_model
from mcp_rl.cli.from_config import checked, config_options, range_help
from mcp_rl.cli.interrupt import on_interrupt
from mcp_rl.cli.options import (
    BaseUrlOpt,
    ServerOptions,
    TestFractionOpt,
    ValFractionOpt,
    check_fractions,
    check_output,
)
from mcp_rl.errors import ConfigError, TaskError
from mcp_rl.models import close_models
from mcp_rl.models.defaults import DEFAULT_WRITER_MODEL
from mcp_rl.models.registry import check_base_url, check_model_name
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
from mcp_rl.solvability import SolvabilitySettings
from scenario_gen.generate import EXPLORE_RESULT_BUDGET, GenerateConfig

_DEFAULT_N = 100
_FLAGS = {
    "n": "--n-tasks",
    "grounded_share": "--grounded-share",
    "explore_calls": "--explore-calls",
    "val_fraction": "--val-fraction",
    "test_fraction": "--test-fraction",
    "seed": "--seed",
}


def _journal(output: Path, spec: ServerSpec, cfg: GenerateConfig) -> Any:
    """The record of this generation's work as it is made, next to OUTPUT; an earlier run's, if that
    one stopped. The server is named by a hash of where it is: a URL may hold a token."""
    from scenario_gen.journal import Journal

    where = spec.url or " ".join(spec.command)
    run = {
        "server": f"{spec.name or spec.transport} {hashlib.sha256(where.encode()).hexdigest()[:12]}",
        "language": cfg.language,
        "instructions": cfg.instructions,
        "allow_destructive": cfg.allow_destructive,
    }
    path = output.with_name(output.name + ".journal.jsonl")
    journal = Journal(path, run)
    if journal.resumed:
        err_console.print(
            f"[yellow]resuming[/] from {path}: {journal.made} tasks made by an earlier run of this "
            "command that stopped (delete that file to start over)"
        )
    return journal


def _kept(journal: Any) -> str:
    made = f"the {journal.made} tasks made so far are" if journal.made else "what was tried so far is"
    return (
        f"stopped: {made} kept in {journal.path}; run the same command again to go on from there "
        "(delete that file to start over)"
    )


def _load(name: str, what: str, base_url: str | None) -> Any:
    return load_helper_model(name, what, max_batch=8, base_url=base_url)


def _progress_line(msg: str, report: Any) -> str:
    drops = sorted(report.dropped.items(), key=lambda kv: -kv[1])[:3]
    why = ", ".join(f"{k} {v}" for k, v in drops)
    e = report.exploration
    return (
        f"kept [bold]{report.kept}[/]/{report.requested}  ·  explored {e.calls} calls ({e.ok} ok)  ·  "
        f"written {report.candidates_written}, grounded {report.candidates_grounded}  ·  "
        f"dropped {sum(report.dropped.values())}{f' ({why})' if why else ''}  ·  [dim]{msg}[/]"
    )


def _show(status: Any, line: str) -> None:
    """The live status line on a terminal; in a log (no terminal), the same line printed, so a long
    generation says what it is doing instead of staying silent for half an hour."""
    if err_console.is_terminal:
        status.update(line)
    else:
        err_console.print(line, highlight=False, soft_wrap=True)


async def _run(
    spec: ServerSpec,
    policy: ToolPolicy,
    generator: Any,
    cfg: Any,
    checker: Any,
    policy_model: Any,
    check: SolvabilitySettings,
    journal: Any,
) -> tuple[list[Any], Any, list[str]]:
    """The tasks, the report, and the names of the tools the policy may call."""
    from scenario_gen import generate_tasks

    solvability = None
    if checker is not None:
        from mcp_rl.rollout.pool import SessionPool
        from mcp_rl.solvability import check_solvability

        async def solvability(tasks: list[Any], say: Any, dropped: Any, seen: str) -> list[Any]:
            async with SessionPool(spec, policy, size=2) as pool:
                return await check_solvability(
                    tasks, pool, checker, attempts=check.attempts, policy=policy_model,
                    max_turns=check.max_turns, grounded=check.grounded, say=say, dropped=dropped, seen=seen,
                )  # fmt: skip

    # exploration reads whole results (a cut JSON result yields no facts)
    session = ServerSession(spec.with_connection(result_budget=EXPLORE_RESULT_BUDGET), policy)
    with err_console.status("connecting ...") as status:
        async with session as s:
            if not s.tools:
                raise ConfigError(
                    f"server {s.server_name!r} offers no usable tools",
                    hint="check --allow-tools/--deny-tools, or --allow-destructive: "
                    + json.dumps(s.excluded),
                )
            if spec.reset_command:  # explore the state episodes will start from, not the last run's
                await s.reset()
            tasks, report = await generate_tasks(
                s,
                generator,
                cfg,
                progress=lambda msg, r: _show(status, _progress_line(msg, r)),
                solvability=solvability,
                journal=journal,
            )
            return tasks, report, [t.name for t in s.tools]


@app.command("generate")
@config_options
def generate_command(
    servers: ServerOptions,
    check: SolvabilitySettings,
    n: Annotated[
        int, typer.Option("--n-tasks", help=range_help(GenerateConfig, "n", "How many tasks to write."))
    ] = _DEFAULT_N,
    num: Annotated[
        int | None, typer.Option("--num", "-n", hidden=True, help="Old name of --n-tasks.")
    ] = None,
    output: Annotated[
        Path,
        typer.Option(
            "-o",
            "--output",
            help="tasks.jsonl, tasks.parquet, or a directory (Hugging Face datasets layout).",
        ),
    ] = Path("tasks.jsonl"),
    generator: Annotated[
        str,
        typer.Option(
            "--generator",
            help="The task-writing model: a built-in offline name, a local path, or an API name "
            "(e.g. openai/gpt-4.1-mini).",
        ),
    ] = DEFAULT_WRITER_MODEL,
    instructions: Annotated[str, typer.Option("--instructions", help="Steer the theme of the tasks.")] = "",
    language: Annotated[
        str, typer.Option("--language", help="Language of the tasks (ISO 639-1 code).")
    ] = "en",
    seed: Annotated[int, typer.Option("--seed", help="Seed for exploration, sampling and the split.")] = 0,
    val_fraction: ValFractionOpt = 0.2,
    test_fraction: TestFractionOpt = 0.3,
    grounded_share: Annotated[
        float,
        typer.Option(
            "--grounded-share",
            help=range_help(GenerateConfig, "grounded_share", "Share of grounded tasks to aim for."),
        ),
    ] = 0.5,
    explore_calls: Annotated[
        int,
        typer.Option(
            "--explore-calls",
            help=range_help(GenerateConfig, "explore_calls", "Most exploratory tool calls."),
        ),
    ] = 60,
    policy_model: Annotated[
        str | None,
        typer.Option(
            "--policy", help="Also mark the tasks this model always or never solves (solvability pass)."
        ),
    ] = None,
    report_path: Annotated[
        Path | None,
        typer.Option(
            "--report", help="Write the generation report as JSON here (default: next to the output)."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUTPUT if it exists and is not empty.")
    ] = False,
    base_url: BaseUrlOpt = None,
) -> None:
    """Write a validated, split task set for a server: tasks an LLM writes from the tools, and grounded
    tasks whose reference answers come from real calls (re-run to check them)."""
    from scenario_gen import save_tasks
    from scenario_gen.gen_report import render
    from scenario_gen.io import detect_format
    from scenario_gen.quality import quality_figures, quality_lines

    if num is not None:
        if n not in (num, _DEFAULT_N):
            raise ConfigError("give either --n-tasks or -n/--num (its old name), not both")
        err_console.print(
            "[yellow]note:[/] -n/--num of generate is now --n-tasks (-n is episodes per task elsewhere)"
        )
        n = num
    check_fractions(val_fraction, test_fraction)
    spec, policy = servers.spec(), servers.policy()
    cfg = checked(
        GenerateConfig, _FLAGS,
        n=n, grounded_share=grounded_share, language=language, instructions=instructions, seed=seed,
        val_fraction=val_fraction, test_fraction=test_fraction, allow_destructive=policy.allow_destructive, explore_calls=explore_calls,
    )  # fmt: skip
    detect_format(output)  # a bad output name fails now, not after minutes of generation
    check_output(output, "--output", force=force, directory=detect_format(output) == "hf")
    if policy_model and not check.enabled:
        raise ConfigError(
            "--policy needs the solvability pass, which --no-solvability turns off",
            hint="drop --no-solvability (the pass uses the task writer, or --check-with MODEL)",
        )
    base_url = check_base_url(base_url)
    for name in filter(None, (generator, check.check_with, policy_model)):
        check_model_name(name, base_url=base_url)
    gen_model = _load(generator, "task writer", base_url)
    # the checker is the writer unless another model is named: one model loaded, not two
    own_checker = check.enabled and check.check_with not in (None, generator)
    checker = (
        (_load(check.check_with, "checker", base_url) if own_checker else gen_model)
        if check.enabled
        else None
    )
    pol = _load(policy_model, "policy", base_url) if policy_model else None
    t0 = time.monotonic()
    journal = _journal(output, spec, cfg)
    on_interrupt(lambda: _kept(journal))  # Ctrl-C ends the process at once: the journal is on disk
    try:
        tasks, report, allowed = anyio.run(_run, spec, policy, gen_model, cfg, checker, pol, check, journal)
    except BaseException:
        journal.close(remove=not journal.made)
        if journal.made:  # an hour of work is not thrown away with the run
            err_console.print(_kept(journal), markup=False, highlight=False)
        raise
    finally:
        close_models(gen_model, checker if own_checker else None, pol)
    if not tasks:  # never an empty result over anything: the old output, if any, is left as it was
        journal.close(remove=True)  # nothing was kept: nothing to go on from
        render(report, console)
        raise TaskError(
            f"no task was kept ({report.requested} asked for; dropped: {dict(report.dropped) or 'none'}): "
            f"nothing was written to {output}",
            hint="see why tasks were dropped above; try more --explore-calls, another --generator or --seed",
        )
    try:
        path = save_tasks(tasks, output)
    except BaseException:
        journal.close()  # a full disk: the work stays in the journal for the next run
        raise
    journal.close(remove=True)
    rpath = report_path or (
        path / "generation_report.json" if path.is_dir() else path.with_name(path.stem + ".report.json")
    )
    figures = quality_figures(tasks, allowed, report)
    write_atomic(
        rpath,
        json.dumps({**report.model_dump(mode="json"), "quality": figures.model_dump(mode="json")}, indent=2)
        + "\n",
    )
    render(report, console)
    for line in quality_lines(figures):
        console.print(
            line, markup=False, highlight=False, style="yellow" if line.startswith("warning") else None
        )
    console.print(
        f"[bold green]wrote {len(tasks)} tasks[/] to {path} in {time.monotonic() - t0:.0f} s "
        f"({report.grounded} grounded, {report.written} written; {report.train} train / {report.val} val / {report.test} test); report: {rpath}"
    )

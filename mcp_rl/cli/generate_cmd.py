"""`mcp-rl generate`: a validated, split task set from a live server's tools, with no labeled data."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from mcp_rl.cli.app import app, console, err_console, load_helper_model
from mcp_rl.cli.from_config import checked, config_options, range_help
from mcp_rl.cli.options import (
    BaseUrlOpt,
    ServerOptions,
    TestFractionOpt,
    ValFractionOpt,
    check_fractions,
    check_output,
)
from mcp_rl.errors import ConfigError
from mcp_rl.models import close_models
from mcp_rl.models.defaults import DEFAULT_WRITER_MODEL
from mcp_rl.models.registry import check_base_url, check_model_name
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
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


async def _run(
    spec: ServerSpec,
    policy: ToolPolicy,
    generator: Any,
    cfg: Any,
    checker: Any,
    policy_model: Any,
    check_attempts: int,
) -> tuple[list[Any], Any]:
    from scenario_gen import generate_tasks

    solvability = None
    if checker is not None:
        from mcp_rl.rollout.pool import SessionPool
        from mcp_rl.solvability import check_solvability

        async def solvability(tasks: list[Any]) -> list[Any]:
            async with SessionPool(spec, policy, size=2) as pool:
                return await check_solvability(
                    tasks, pool, checker, attempts=check_attempts, policy=policy_model
                )

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
            return await generate_tasks(
                s,
                generator,
                cfg,
                progress=lambda msg, r: status.update(_progress_line(msg, r)),
                solvability=solvability,
            )


@app.command("generate")
@config_options
def generate_command(
    servers: ServerOptions,
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
            "--grounded-share", help=range_help(GenerateConfig, "grounded_share", "Share of grounded tasks to aim for.")
        ),
    ] = 0.5,
    explore_calls: Annotated[
        int, typer.Option("--explore-calls", help=range_help(GenerateConfig, "explore_calls", "Most exploratory tool calls."))
    ] = 60,
    check_with: Annotated[
        str | None,
        typer.Option(
            "--check-with", help="A stronger model that attempts each task; unsolved tasks are dropped."
        ),
    ] = None,
    policy_model: Annotated[
        str | None,
        typer.Option("--policy", help="With --check-with: mark tasks this model always or never solves."),
    ] = None,
    check_attempts: Annotated[
        int, typer.Option("--check-attempts", min=1, help="Attempts per task in the check.")
    ] = 2,
    report_path: Annotated[
        Path | None,
        typer.Option(
            "--report", help="Write the generation report as JSON here (default: next to the output)."
        ),
    ] = None,
    base_url: BaseUrlOpt = None,
) -> None:
    """Write a validated, split task set for a server: tasks an LLM writes from the tools, and grounded
    tasks whose reference answers come from real calls (re-run to check them)."""
    from scenario_gen import save_tasks
    from scenario_gen.gen_report import render
    from scenario_gen.io import detect_format

    if num is not None:
        if n not in (num, _DEFAULT_N):
            raise ConfigError("give either --n-tasks or -n/--num (its old name), not both")
        err_console.print("[yellow]note:[/] -n/--num of generate is now --n-tasks (-n is episodes per task elsewhere)")
        n = num
    check_fractions(val_fraction, test_fraction)
    spec, policy = servers.spec(), servers.policy()
    cfg = checked(
        GenerateConfig, _FLAGS,
        n=n, grounded_share=grounded_share, language=language, instructions=instructions, seed=seed,
        val_fraction=val_fraction, test_fraction=test_fraction, allow_destructive=policy.allow_destructive, explore_calls=explore_calls,
    )  # fmt: skip
    detect_format(output)  # a bad output name fails now, not after minutes of generation
    check_output(output, "--output")
    if policy_model and not check_with:
        raise ConfigError(
            "--policy needs --check-with", hint="pass --check-with MODEL to run the solvability pass"
        )
    base_url = check_base_url(base_url)
    for name in filter(None, (generator, check_with, policy_model)):
        check_model_name(name, base_url=base_url)
    gen_model = _load(generator, "task writer", base_url)
    checker = _load(check_with, "checker", base_url) if check_with else None
    pol = _load(policy_model, "policy", base_url) if policy_model else None
    t0 = time.monotonic()
    try:
        tasks, report = anyio.run(_run, spec, policy, gen_model, cfg, checker, pol, check_attempts)
    finally:
        close_models(gen_model, checker, pol)
    path = save_tasks(tasks, output)
    rpath = report_path or (
        path / "generation_report.json" if path.is_dir() else path.with_name(path.stem + ".report.json")
    )
    rpath.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    render(report, console)
    console.print(
        f"[bold green]wrote {len(tasks)} tasks[/] to {path} in {time.monotonic() - t0:.0f} s "
        f"({report.grounded} grounded, {report.written} written; {report.train} train / {report.val} val / {report.test} test); report: {rpath}"
    )

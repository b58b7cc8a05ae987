"""`mcp-rl judge`: score saved trajectories with RULER and the checks, print scores with explanations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from judges.ruler import JudgeConfig
from mcp_rl.cli.app import app, console, err_console, load_helper_model
from mcp_rl.cli.from_config import checked, range_help
from mcp_rl.cli.options import BaseUrlOpt, check_output
from mcp_rl.errors import ConfigError, McpRlError
from mcp_rl.models.defaults import DEFAULT_JUDGE_MODEL
from mcp_rl.models.registry import check_base_url

_FLAGS = {
    "permutations": "--judge-permutations",
    "max_retries": "--max-retries",
    "max_concurrency": "--concurrency",
    "timeout_s": "--timeout",
}


def _load_trajectories(path: Path) -> list[Any]:
    from mcp_rl.trajectory import load_trajectories

    if not path.exists():
        raise ConfigError(f"trajectory file not found: {path}", "save some with `mcp-rl rollout ... -o FILE`")
    try:
        trajs = load_trajectories(path)
    except McpRlError:
        raise
    except Exception as e:  # polars, JSON and validation errors all mean the same to the user
        raise ConfigError(
            f"cannot read trajectories from {path}: {type(e).__name__}: {str(e)[:300]}",
            "pass a .parquet or .jsonl file written by mcp-rl",
        ) from None
    if not trajs:
        raise ConfigError(f"{path} holds no trajectories")
    return trajs


def _load_tasks(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    from scenario_gen.io import load_tasks

    return {t.id: t for t in load_tasks(path)}


def _load_tools(path: Path | None, trajs: list[Any]) -> list[dict[str, Any]] | None:
    if path is not None:
        try:
            tools = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"cannot read tools from {path}: {e}", "pass a JSON list of tool definitions"
            ) from None
        if not isinstance(tools, list):
            raise ConfigError(f"{path} must hold a JSON list of tool definitions")
        return tools
    # Trajectories may carry the tools they were run with.
    for t in trajs:
        tools = t.metadata.get("tools")
        if isinstance(tools, list):
            return tools
    return None


def load_judge(name: str, base_url: str | None = None) -> Any:
    """The judge model by name (a built-in local model, a path, or an API model)."""
    return load_helper_model(name, "judge", max_batch=4, base_url=base_url)  # a few calls at a time


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _print(trajs: list[Any], report: Any, tasks: dict[str, Any]) -> None:
    from judges import group_trajectories, success_rate
    from judges.checks import run_checks
    from judges.success import checked_success

    scores = {tid: (g, s) for g in report.groups for tid, s in g.scores.items()}
    table = Table(title="Judged trajectories", show_lines=True)
    for col in ("group", "id", "ruler", "±", "reward", "answer", "calls ok/valid/all", "explanation"):
        table.add_column(col, overflow="fold")
    table.columns[-1].ratio = 1
    outcomes: list[bool | None] = []
    for gid, members in group_trajectories(trajs).items():
        for t in members:
            comps = t.reward_components
            g, ruler = scores.get(t.id, (None, None))
            std = g.score_std.get(t.id) if g is not None else None
            chk = run_checks(t, tasks.get(t.task_id))
            ok = sum(1 for c in t.tool_calls if c.valid and c.status == "ok")
            valid = sum(1 for c in t.tool_calls if c.valid)
            if not chk.answered:
                answer = "[red]none[/]"
            elif chk.answer_correct is None:
                answer = "given"
            else:
                answer = "[green]correct[/]" if chk.answer_correct else "[red]wrong[/]"
            task = tasks.get(t.task_id)
            outcomes.append(
                checked_success(t, task, [task.reference_answer]).success
                if chk.answer_correct is not None
                else None
            )
            why = t.judge_explanation or t.metadata.get("judge_unscored", "")
            table.add_row(
                gid, t.id, _fmt(ruler), _fmt(std), _fmt(comps.get("reward")), answer,
                f"{ok}/{valid}/{len(t.tool_calls)}", why,
            )  # fmt: skip
    console.print(table)
    u = report.usage
    est = " (estimated)" if u.estimated else ""
    console.print(
        f"groups: {len(report.groups)} judged, [bold]{report.unscored} unscored[/]  ·  judge calls {u.calls} "
        f"(+{u.cached} cached, {u.failed_calls} failed)  ·  tokens {u.prompt_tokens} in / {u.completion_tokens} out{est}"
        f"  ·  cost ${u.cost_usd:.4f}  ·  {u.seconds:.1f} s in judge calls"
    )
    for gid, reason in report.unscored_reasons.items():
        console.print(f"[yellow]unscored[/] {gid}: {reason}", highlight=False)
    if any(o is not None for o in outcomes):
        console.print(f"checked success (tasks with a reference): {success_rate(outcomes)}")


@app.command("judge")
def judge(
    trajectories: Annotated[Path, typer.Argument(help="Trajectories to score (.parquet or .jsonl).")],
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="The task set (.jsonl/.parquet): reference answers and expected tools."),
    ] = None,
    judge_model: Annotated[
        str,
        typer.Option(
            "--judge",
            help="Judge model: a built-in local model, a path, or an API model name; 'none' for checks only.",
        ),
    ] = DEFAULT_JUDGE_MODEL,
    rubric: Annotated[
        Path | None, typer.Option("--rubric", help="A text file replacing the default rubric.")
    ] = None,
    permutations: Annotated[
        int,
        typer.Option(
            "--judge-permutations",
            help=range_help(JudgeConfig, "permutations", "Score each group in K orders and average."),
        ),
    ] = 1,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the scored trajectories here (.parquet/.jsonl)."),
    ] = None,
    tools: Annotated[
        Path | None, typer.Option("--tools", help="JSON list of the tools the agent had.")
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Judge cache (default: the mcp-rl cache, judge/).")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Ask the judge again even when cached.")
    ] = False,
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries", help=range_help(JudgeConfig, "max_retries", "Repair retries per bad reply.")
        ),
    ] = 2,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", help=range_help(JudgeConfig, "max_concurrency", "Judge calls in flight.")
        ),
    ] = 4,
    timeout: Annotated[
        float, typer.Option("--timeout", help=range_help(JudgeConfig, "timeout_s", "Seconds per judge call."))
    ] = 900.0,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the --output file if it exists and is not empty.")
    ] = False,
    base_url: BaseUrlOpt = None,
) -> None:
    """Score saved trajectories: RULER per group (by group id, else task id) plus the deterministic checks."""
    from judges import JudgeCache, Ruler, judge_trajectories, load_rubric
    from mcp_rl.models.builtin import cache_root
    from mcp_rl.trajectory import save_trajectories

    # every number first (its bounds are JudgeConfig's), before any file is read or a model loads
    settings = checked(
        JudgeConfig, _FLAGS,
        permutations=permutations, max_retries=max_retries, max_concurrency=concurrency, timeout_s=timeout,
    )  # fmt: skip
    base_url = check_base_url(base_url)
    if output is not None and output.suffix not in (".parquet", ".jsonl"):
        raise ConfigError(f"cannot write {output}: use a .parquet or .jsonl file name")
    check_output(output, "--output", force=force)
    trajs = _load_trajectories(trajectories)
    task_map = _load_tasks(tasks)
    tool_list = _load_tools(tools, trajs)
    ruler = None
    if judge_model.lower() != "none":
        cfg = settings.model_copy(update={"rubric": load_rubric(rubric)})
        cache = None if no_cache else JudgeCache(cache_dir or cache_root() / "judge")
        ruler = Ruler(load_judge(judge_model, base_url), cfg, cache)

    try:
        with err_console.status(f"judging {len(trajs)} trajectories ..."):
            report = anyio.run(judge_trajectories, trajs, task_map, ruler, None, tool_list)
    finally:
        if ruler is not None:  # stop a local judge's generation worker before exit (else: abort)
            from mcp_rl.models import close_models

            close_models(ruler.judge)
    _print(trajs, report, task_map)
    if output is not None:
        save_trajectories(trajs, output)
        console.print(f"wrote {len(trajs)} scored trajectories to {output}")

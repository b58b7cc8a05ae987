"""`mcp-rl bench`: outside yardsticks. `bench bfcl` runs BFCL's multi-turn entries through our agent
loop against each entry's backends served over MCP, graded by BFCL's own checker; `bench server`
serves BFCL backends as a stdio MCP server any command takes (`train --server "mcp-rl bench server
bfcl:GorillaFileSystem"`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mcp_rl.cli.app import app, console, err_console, load_helper_model

bench_app = typer.Typer(help="Outside benchmarks (BFCL multi-turn through MCP).", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _model_for(name: str) -> Any:
    """`oracle` (the ground truth replayed), a run or export directory (its tuned adapter), or any
    model name `load_model` takes (`tiny`, the offline defaults, API names)."""
    from mcp_rl.bench.runner import oracle_for

    if name == "oracle":
        return oracle_for
    path = Path(name)
    if path.is_dir() and ((path / "state.json").exists() or (path / "model_card.md").exists()):
        from mcp_rl.tuned import find_tuned, load_tuned

        model = load_tuned(find_tuned(path), max_batch=1)
    else:
        model = load_helper_model(name, "policy", max_batch=1)
    return lambda entry: model


@bench_app.command("bfcl")
def bfcl(
    category: Annotated[
        str, typer.Option("--category", help="A BFCL multi-turn category.")
    ] = "multi_turn_base",
    model: Annotated[
        str,
        typer.Option("--model", "-m", help="oracle, tiny, a built-in or API model name, or a run directory."),
    ] = "oracle",
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="The first N entries (after --backend).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Only entries that involve this class, e.g. GorillaFileSystem."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Where results.parquet and summary.json go.")] = Path(
        "bench-results"
    ),
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, max=64, help="Assistant messages per user turn.")
    ] = 8,
) -> None:
    """Work BFCL multi-turn entries through the agent loop and grade them with BFCL's checker:
    accuracy with a 95% interval per category and per backend, agreement with our strict checks,
    and one Parquet row per entry with its episode."""
    from mcp_rl.bench.bfcl_data import load_entries
    from mcp_rl.bench.results import summary_lines, write_results
    from mcp_rl.bench.runner import BenchConfig, run_bench

    entries = load_entries(category, backend=backend, limit=limit)
    logging.getLogger("mcp_rl.servers.policy").setLevel(logging.ERROR)  # every tool is allowed on purpose
    model_for = _model_for(model)
    with Progress(
        TextColumn("bfcl"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[ok]} pass"),
        TimeElapsedColumn(), console=err_console, transient=True, disable=not err_console.is_terminal,
    ) as bar:  # fmt: skip
        task = bar.add_task("bfcl", total=len(entries), ok=0)
        passed = 0

        def advance(r: Any) -> None:
            nonlocal passed
            passed += int(r.bfcl.valid)
            bar.update(task, advance=1, ok=passed)

        results = anyio.run(run_bench, model_for, entries, BenchConfig(max_steps=max_steps), advance)
    for line in summary_lines(results):
        console.print(line, highlight=False, soft_wrap=True)
    for r in results:
        if not r.bfcl.valid:
            console.print(
                f"  miss {r.id}: {r.bfcl.error_type} {r.bfcl.error_message[:160]}",
                highlight=False,
                soft_wrap=True,
            )
    parquet, _ = write_results(results, out)
    console.print(f"per-entry results: {parquet}", highlight=False)


@bench_app.command("server")
def server(
    target: Annotated[str, typer.Argument(help="bfcl:CLASS, or bfcl:CLASS+CLASS for several at once.")],
    entry: Annotated[
        str | None, typer.Option("--entry", help="Start in this BFCL entry's state (e.g. multi_turn_base_0).")
    ] = None,
    state: Annotated[
        Path | None, typer.Option("--state", help="A JSON file {CLASS: initial_config}.")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="A tool to leave out (repeatable).")
    ] = None,
) -> None:
    """Serve BFCL backend classes as a stdio MCP server (tools from BFCL's function docs; state
    carried between calls for the life of the process)."""
    from mcp_rl.bench.bfcl_server import backends_from_args, serve_stdio

    backends = backends_from_args(target, entry, str(state) if state else None, exclude or [])
    serve_stdio(backends, "bfcl-" + "-".join(backends.instances))

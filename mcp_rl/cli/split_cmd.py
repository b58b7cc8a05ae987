"""`mcp-rl split`: re-split an existing task set into train / val / test sharing no call or entity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.options import TestFractionOpt, ValFractionOpt, check_fractions, not_empty
from mcp_rl.errors import ConfigError


@app.command("split")
def split_command(
    tasks_path: Annotated[
        Path, typer.Argument(metavar="TASKS", help="A task set: .jsonl, .parquet or a datasets directory.")
    ],
    out: Annotated[
        Path,
        typer.Option("-o", "--output", help="Where to write it (.jsonl, .parquet, or a directory)."),
    ],
    val_fraction: ValFractionOpt = 0.2,
    test_fraction: TestFractionOpt = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="Seed for the split.")] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUTPUT if it exists and is not empty.")
    ] = False,
) -> None:
    """Split a task set into train, val and test so that no reference call, id or name is shared
    between splits (tasks that share one go to the same split), and write it."""
    from scenario_gen.io import detect_format, load_tasks, save_tasks
    from scenario_gen.split import SPLITS, split_report, split_tasks

    check_fractions(val_fraction, test_fraction)
    detect_format(out)  # a bad output name fails before the input is read
    if not_empty(out) and not force:
        raise ConfigError(
            f"{out} exists and is not empty", hint="choose another -o, or pass --force to replace it"
        )
    tasks = split_tasks(
        load_tasks(tasks_path), val_fraction=val_fraction, test_fraction=test_fraction, seed=seed
    )
    report = split_report(tasks)
    path = save_tasks(tasks, out, fmt=detect_format(out))  # whole or not at all; OUT may be TASKS

    table = Table(title=f"Split of {len(tasks)} tasks (seed {seed})")
    for col in ("split", "tasks", "grounded", "written"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for s in SPLITS:
        c = report.counts[s]
        table.add_row(s, str(report.total(s)), str(c["grounded"]), str(c["written"]))
    console.print(table)
    console.print(
        f"{report.components} groups sharing no reference call or entity (largest {report.largest_component})"
    )
    if report.ignored_keys:
        console.print("too common to split by (ignored):")
        for key, n in report.ignored_keys.items():
            console.print(f"  {escape(key)} ({n} tasks)", highlight=False)
    console.print(f"leaks: {len(report.leaks)}")
    console.print(f"[bold green]wrote {len(tasks)} tasks[/] to {escape(str(path))}")

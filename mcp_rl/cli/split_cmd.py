"""`mcp-rl split`: re-split an existing task set into train / val / test sharing no call or entity."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.options import TestFractionOpt, ValFractionOpt, check_fractions
from mcp_rl.errors import ConfigError

if TYPE_CHECKING:
    from mcp_rl.task import Task


def _not_empty(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and path.stat().st_size > 0


def _write_atomically(tasks: list[Task], out: Path) -> Path:
    """Write beside `out`, then rename over it: a failure never leaves half a task set, and `out`
    may be the file that was read."""
    from scenario_gen.io import detect_format, save_tasks

    fmt = detect_format(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.split-", dir=out.parent))
    try:
        written = save_tasks(tasks, stage / out.name, fmt=fmt)
        if written.is_dir():
            umask = os.umask(0)
            os.umask(umask)
            written.chmod(0o777 & ~umask)  # mkdtemp's 0700 is for the stage, not the result
        old = stage / "old"
        if out.is_dir():
            os.replace(out, old)  # a directory cannot be renamed over a non-empty one
        try:
            os.replace(written, out)
        except OSError:
            if old.exists():
                os.replace(old, out)
            raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


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
    from scenario_gen.io import detect_format, load_tasks
    from scenario_gen.split import SPLITS, split_report, split_tasks

    check_fractions(val_fraction, test_fraction)
    detect_format(out)  # a bad output name fails before the input is read
    if _not_empty(out) and not force:
        raise ConfigError(
            f"{out} exists and is not empty", hint="choose another -o, or pass --force to replace it"
        )
    tasks = split_tasks(
        load_tasks(tasks_path), val_fraction=val_fraction, test_fraction=test_fraction, seed=seed
    )
    report = split_report(tasks)
    path = _write_atomically(tasks, out)

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

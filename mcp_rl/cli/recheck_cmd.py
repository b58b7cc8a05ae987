"""`mcp-rl recheck`: re-run every grounded task's reference calls on the live server, and say which still hold.

A grounded task's reference answer was read out of real results when the set was written. Before a
set is trusted (or after the server changed), this re-runs each task's calls in a fresh session (reset
first, where the server has a reset command) and
re-applies its answer rule: `stable` (same answer), `changed` (the server now answers otherwise: a
task about the time or the server's state; graders re-run such calls) or `failed` (a call errors, or
the rule no longer finds its value: the task is broken). Written tasks have no calls to re-run.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from mcp_rl.cli.app import app, console
from mcp_rl.cli.from_config import config_options
from mcp_rl.cli.options import ServerOptions
from mcp_rl.servers import ServerSession


async def _recheck(session: ServerSession, tasks: list[Any]) -> list[dict[str, Any]]:
    from scenario_gen.grounded import verify

    rows = []
    for t in tasks:
        outcome = await verify(session, t)
        rows.append(
            {
                "id": t.id,
                "status": outcome.status,
                "reference": t.reference_answer,
                "now": outcome.fresh_answer,
                "detail": outcome.detail,
                "moves": t.answer_depends_on_state,
            }
        )
    return rows


@app.command("recheck")
@config_options
def recheck_command(
    servers: ServerOptions,
    tasks_path: Annotated[
        Path, typer.Argument(metavar="TASKS", help="A task set: .jsonl, .parquet or a datasets directory.")
    ],
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write the per-task outcomes here (JSON).")
    ] = None,
) -> None:
    """Re-run the reference calls of every grounded task in TASKS and check that each answer still
    follows from the results. Exits 1 when a task that should not move (not marked state- or
    time-dependent) changed or failed."""
    from scenario_gen.generate import EXPLORE_RESULT_BUDGET
    from scenario_gen.io import load_tasks

    tasks = [t for t in load_tasks(tasks_path) if t.source == "grounded" and t.reference_calls]
    # whole results, as when the references were read (a cut JSON result yields no answer)
    session = ServerSession(
        servers.spec().with_connection(result_budget=EXPLORE_RESULT_BUDGET), servers.policy()
    )

    async def main() -> list[dict[str, Any]]:
        async with session:
            if session.spec.reset_command:  # the state the references were read from, not the last run's
                await session.reset()
            return await _recheck(session, tasks)

    rows = anyio.run(main)
    counts = Counter(r["status"] for r in rows)
    broken = [r for r in rows if r["status"] == "failed" or (r["status"] == "changed" and not r["moves"])]
    table = Table(title=f"{len(rows)} grounded tasks re-run")
    for col in ("task", "status", "reference", "now", "detail"):
        table.add_column(col)
    for r in broken:
        table.add_row(
            r["id"], r["status"], escape(str(r["reference"])), escape(str(r["now"])), escape(r["detail"])
        )
    if broken:
        console.print(table)
    moved = sum(1 for r in rows if r["status"] == "changed" and r["moves"])
    console.print(
        f"stable {counts['stable']}, changed {counts['changed']} ({moved} marked as moving with time or state), "
        f"failed {counts['failed']}; broken: {len(broken)}"
    )
    if report is not None:
        report.write_text(json.dumps(rows, indent=2) + "\n")
    if broken:
        raise typer.Exit(1)

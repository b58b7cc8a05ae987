"""`mcp-rl report`: a self-contained HTML page about a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mcp_rl.cli.app import app, console
from mcp_rl.cli.options import OutAlias, check_output, one_output


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `mcp-rl train`.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write the HTML (default RUN_DIR/report.html)."),
    ] = None,
    out: OutAlias = None,
) -> None:
    """Write an HTML report: success on val with its interval, reward, valid calls, tool errors,
    per-tool error rates, time per phase, and example trajectories before and after."""
    from mcp_rl.html_report import write_report

    out = one_output(output, out, "--out")
    check_output(
        out, "--output", force=True
    )  # a report is derived from the run: made again, it replaces itself
    path = write_report(run_dir, out)
    console.print(f"report written: [bold]{path}[/] (open it in a browser)")

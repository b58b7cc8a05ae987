"""`mcp-rl` command line. Each command lives in its own module and registers on `app`."""

from __future__ import annotations

import sys

from mcp_rl.cli.app import app, err_console, print_error
from mcp_rl.errors import McpRlError

# Command modules (importing one registers its command).
from mcp_rl.cli import inspect_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import judge_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import generate_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import split_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import recheck_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import rollout_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import train_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import report_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import export_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import serve_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import chat_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import dashboard_cmd  # noqa: F401  isort: skip
from mcp_rl.cli import bench_cmd  # noqa: F401  isort: skip


def main() -> None:
    """Entry point: run the app; user-facing errors print as one clear message, exit code 2."""
    try:
        app()
    except McpRlError as e:
        print_error(e.message, e.hint)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)


__all__ = ["app", "main"]

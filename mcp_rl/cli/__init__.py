"""`mcp-rl` command line. Each command lives in its own module and registers on `app`."""

from __future__ import annotations

import sys

import typer

from mcp_rl.cli import interrupt
from mcp_rl.cli.app import app, print_error
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
    """Entry point: run the app. Every user-facing error, ours or the option parser's (an unknown
    flag, a value of the wrong type), prints as one clear `error:` line, exit code 2; a Ctrl-C
    prints one line saying what was kept and how to go on, exit code 130."""
    with interrupt.installed():
        code = _run()
    sys.exit(code)


def _run() -> int:
    try:
        # standalone_mode=False: click's own errors come here instead of being printed in its format
        rc = app(standalone_mode=False)
    except McpRlError as e:
        print_error(e.message, e.hint)
        return 2
    except typer.TyperException as e:  # the option parser's: unknown flag, bad type, missing value
        if type(e).__name__ == "NoArgsIsHelpError":  # `mcp-rl` alone: the help, as before
            e.show()
            return e.exit_code
        ctx = getattr(e, "ctx", None)
        print_error(e.format_message(), f"see {ctx.command_path if ctx else 'mcp-rl'} --help")
        return 2
    except (KeyboardInterrupt, typer.Abort):
        interrupt.tell()  # already told when the SIGINT arrived; a KeyboardInterrupt of our own says it now
        return interrupt.EXIT_CODE
    return rc if isinstance(rc, int) else 0


__all__ = ["app", "main"]

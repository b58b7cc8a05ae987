"""The typer application every command module attaches to."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="mcp-rl",
    help="Teach a language model to use the tools of any MCP server (synthetic tasks, RULER, GRPO on a LoRA).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)

# Options shared by every command that talks to a server.
SERVER_HELP = (
    "The MCP server: a URL (streamable HTTP; .../sse for SSE), or a command line for stdio "
    "(e.g. 'uvx mcp-server-time'). Or use --config/--name."
)


@app.callback()
def _root() -> None:
    """mcp-rl: reads an MCP server's tools, writes tasks, lets a model work them against the live
    server, scores attempts with RULER and trains a LoRA with GRPO until tool-use success plateaus."""

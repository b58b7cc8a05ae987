"""The typer application every command module attaches to."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from mcp_rl.errors import ModelError

app = typer.Typer(
    name="mcp-rl",
    help="Teach a language model to use the tools of any MCP server (synthetic tasks, RULER, GRPO on a LoRA).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


def print_error(message: str, hint: str | None = None) -> None:
    """One user-facing error on stderr. Never wrapped (a path or command split over two lines cannot be
    copied back, and stderr is often a pipe 80 columns "wide"), and printed as text, not markup (a
    message may hold `[...]`)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[yellow]hint:[/] {escape(hint)}", highlight=False, soft_wrap=True)


# Options shared by every command that talks to a server.
SERVER_HELP = (
    "The MCP server: a URL (streamable HTTP; .../sse for SSE), or a command line for stdio "
    "(e.g. 'uvx mcp-server-time'). Or use --config/--name."
)


def version() -> str:
    """The installed package's version (what `mcp-rl --version` prints)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("mcp-rl")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        console.print(f"mcp-rl {version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print mcp-rl's version and exit."
        ),
    ] = False,
) -> None:
    """mcp-rl: reads an MCP server's tools, writes tasks, lets a model work them against the live
    server, scores attempts with RULER and trains a LoRA with GRPO until tool-use success plateaus."""


def load_helper_model(name: str, what: str, max_batch: int, base_url: str | None = None) -> Any:
    """A model by name (built-in, path or API name) for a command, with a status line while it
    loads and its load time after; `base_url`: the OpenAI-compatible endpoint of API models
    (`--base-url`). `max_batch`: KV-cache slots (the cache is per slot: a judge or a
    writer runs a few calls at a time and needs few)."""
    try:
        from mcp_rl.models.registry import load_model
    except ImportError as e:
        raise ModelError(
            f"cannot load the {what}: model loading is not available in this build ({e})"
        ) from None
    t0 = time.monotonic()
    with err_console.status(f"loading {what} {name} ..."):
        model = load_model(name, max_batch=max_batch, base_url=base_url)
    err_console.print(f"[dim]{what} {name} ready in {time.monotonic() - t0:.1f} s[/]")
    return model

"""`mcp-rl dashboard`: runs in a browser, live; and the helper `train --dashboard` starts it with."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from mcp_rl.cli.app import app, err_console
from mcp_rl.cli.serve_cmd import bind, is_loopback
from mcp_rl.errors import ConfigError

DEFAULT_PORT = 8050


def url_of(host: str, port: int, token: str | None, run_id: str | None = None) -> str:
    shown = f"[{host}]" if ":" in host else host
    query = f"?token={token}" if token else ""
    return f"http://{shown}:{port}/{query}" + (f"#/run/{run_id}" if run_id else "")


@app.command("dashboard")
def dashboard(
    path: Annotated[
        Path, typer.Argument(help="A runs folder (every run in it) or one run directory.")
    ] = Path("runs"),
    host: Annotated[
        str, typer.Option("--host", help="Interface to listen on. Loopback only by default.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, help="Port (0 picks a free one).")
    ] = DEFAULT_PORT,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="Require the token read from this environment variable on every request "
            "(the printed URL carries it once; API clients send 'Authorization: Bearer <token>').",
        ),
    ] = None,
    open_run: Annotated[str | None, typer.Option("--open-run", hidden=True)] = None,
) -> None:
    """Watch runs live in a browser: charts, per-tool and per-task tables, every GRPO group side
    by side, base against best, config and prompt, several runs compared. Reads only."""
    import uvicorn

    from mcp_rl.dashboard import RunsRoot, create_app
    from mcp_rl.serve.auth import token_from_env

    token = token_from_env(token_env)[0] if token_env else None
    root = RunsRoot(path)
    sock = bind(host, port)
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        err_console.print(
            f"dashboard of [bold]{root.path}[/] at {url_of(bound_host, bound_port, token, open_run)}",
            highlight=False,
            soft_wrap=True,
        )
        if not is_loopback(host):
            err_console.print(
                f"[yellow]warning:[/] listening on {host}: reachable from other machines"
                + ("" if token else "; anyone who can reach it can read the runs (set --token-env)"),
                highlight=False,
            )
        logging.basicConfig(level=logging.WARNING)
        config = uvicorn.Config(
            create_app(root, token), log_level="warning", access_log=False, timeout_graceful_shutdown=2
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def start_beside(run_path: Path, port: int = DEFAULT_PORT) -> tuple[subprocess.Popen[bytes], str]:
    """The dashboard of the run's folder (so earlier runs can be compared), in its own process so it
    never slows the training loop; loopback only, with a fresh token. Returns (process, URL)."""
    try:
        sock = bind("127.0.0.1", port)
    except ConfigError:
        sock = bind("127.0.0.1", 0)  # the usual port is taken (another dashboard): any free one
    chosen = sock.getsockname()[1]
    sock.close()  # the child binds it again at once; SO_REUSEADDR makes that safe
    token = secrets.token_urlsafe(16)
    env = {**os.environ, "MCP_RL_DASHBOARD_TOKEN": token}
    cmd = [
        sys.executable, "-m", "mcp_rl", "dashboard", str(run_path.resolve().parent), "--port", str(chosen),
        "--token-env", "MCP_RL_DASHBOARD_TOKEN", "--open-run", run_path.resolve().name,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return proc, url_of("127.0.0.1", chosen, token, run_path.resolve().name)

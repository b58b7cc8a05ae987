"""`mcp-rl serve`: a tuned model (or a plain one, for comparison) behind an OpenAI-compatible API."""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Annotated

import anyio
import typer

from mcp_rl.cli.app import app, err_console
from mcp_rl.errors import ConfigError
from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is one clear error (and port 0 picks a free one)."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise ConfigError(f"cannot resolve --host {host!r}: {e.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {e.strerror}",
            hint="choose another --port (0 picks a free one)" if port else None,
        ) from None
    sock.set_inheritable(True)
    return sock


@app.command("serve")
def serve(
    path: Annotated[
        str | None,
        typer.Argument(
            help="A run directory (runs/<name>), one of its checkpoints, or an `mcp-rl export` directory."
        ),
    ] = None,
    checkpoint: Annotated[
        str,
        typer.Option("--checkpoint", "-c", help="Which checkpoint of a run: best, last, or a step number."),
    ] = "best",
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Serve a plain model instead of a tuned one (a built-in name, a model directory, a .gguf file), "
            "e.g. the base model for comparison.",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Interface to listen on. Loopback only by default.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, help="Port (0 picks a free one).")
    ] = 8000,
    model_name: Annotated[
        str | None,
        typer.Option("--model-name", help="The model id clients use (default: the run's directory name)."),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="Require 'Authorization: Bearer <token>' with the token read from this environment variable "
            "(default: MCP_RL_SERVE_TOKEN when set; else no token).",
        ),
    ] = None,
    no_training_prompt: Annotated[
        bool,
        typer.Option(
            "--no-training-prompt",
            help="Do not add the run's training system prompt to requests that have no system message.",
        ),
    ] = False,
    max_batch: Annotated[
        int, typer.Option("--max-batch", min=1, help="Completions generated together (concurrent requests).")
    ] = 8,
    max_context: Annotated[
        int | None,
        typer.Option("--max-context", min=64, help="Tokens of prompt + reply (default: the model's)."),
    ] = None,
) -> None:
    """Serve a tuned model as an OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions (with tools)."""
    import uvicorn

    from mcp_rl.models.registry import close_models
    from mcp_rl.serve import ServedModel, create_app, open_plain, open_tuned, token_from_env
    from mcp_rl.serve.loading import require_local

    if (path is None) == (model is None):
        raise ConfigError(
            "give either a run/export PATH or --model SPEC",
            hint=f"mcp-rl serve runs/<name>   or   mcp-rl serve --model {DEFAULT_POLICY_MODEL}",
        )
    token, token_var = token_from_env(token_env)
    sock = bind(host, port)  # before the model load: a busy port fails in a second, not after a minute
    opened = None
    try:
        opts = {"max_batch": max_batch, "max_context": max_context}
        what = path or model
        with err_console.status(f"loading {what} ..."):
            opened = open_tuned(path, checkpoint, **opts) if path else open_plain(str(model), **opts)
        require_local(opened)
        prompt = None if no_training_prompt else opened.training_prompt
        served = ServedModel(opened.model, model_name or opened.name, prompt)
        with err_console.status("warming up ..."):
            anyio.run(served.warm_up)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        step = (
            f", checkpoint {opened.source.step}" if opened.source and opened.source.step is not None else ""
        )
        err_console.print(
            f"serving [bold]{served.name}[/] ({opened.model.name}{step}) at http://{shown}:{bound_port}/v1",
            highlight=False,
        )
        if opened.source is not None:
            err_console.print(
                "training system prompt: "
                + (
                    "added to requests without a system message"
                    if prompt
                    else "off (--no-training-prompt or none recorded)"
                ),
                style="dim",
            )
        if token:
            err_console.print(f"bearer token required (from ${token_var})", style="dim")
        if not is_loopback(host):
            err_console.print(
                f"[yellow]warning:[/] listening on {host}: reachable from other machines"
                + ("" if token else "; anyone who can reach it can use it (set --token-env)"),
                highlight=False,
            )
        logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
        config = uvicorn.Config(
            create_app(served, token), log_level="info", access_log=True, timeout_graceful_shutdown=5
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        if opened is not None:
            close_models(opened.model)

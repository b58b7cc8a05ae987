"""Options every server-facing command shares, declared once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from mcp_rl.errors import ConfigError
from mcp_rl.servers import ServerSpec, ToolPolicy

ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        "-s",
        help="The MCP server: a URL (streamable HTTP; a path ending in /sse for SSE) or a stdio command line, "
        "e.g. 'uvx mcp-server-time'.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", help="A JSON file with an 'mcpServers' object (the desktop MCP clients' format)."
    ),
]
NameOpt = Annotated[str | None, typer.Option("--name", help="Which server of --config to use.")]
EnvOpt = Annotated[
    list[str] | None, typer.Option("--env", help="KEY=VALUE for a stdio server's environment (repeatable).")
]
HeaderOpt = Annotated[
    list[str] | None, typer.Option("--header", help="KEY=VALUE HTTP header, e.g. an auth token (repeatable).")
]
AllowToolsOpt = Annotated[
    list[str] | None, typer.Option("--allow-tools", help="Only use tools matching these globs (repeatable).")
]
DenyToolsOpt = Annotated[
    list[str] | None, typer.Option("--deny-tools", help="Never use tools matching these globs (repeatable).")
]
AllowDestructiveOpt = Annotated[
    bool,
    typer.Option(
        "--allow-destructive", help="Include tools annotated (or named) destructive. Off by default."
    ),
]
ConnectTimeoutOpt = Annotated[
    float, typer.Option("--connect-timeout", help="Seconds to wait for the server to start.")
]
CallTimeoutOpt = Annotated[float, typer.Option("--call-timeout", help="Seconds to wait for each tool call.")]

# The split, shared by `generate` and `split`.
ValFractionOpt = Annotated[
    float,
    typer.Option(
        "--val-fraction", min=0.0, max=0.9, help="Share held out for validation (plateau, best step)."
    ),
]
TestFractionOpt = Annotated[
    float,
    typer.Option(
        "--test-fraction", min=0.0, max=0.9, help="Share held out for the test (the figure reported)."
    ),
]


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Fail before any work when the held-out shares leave no room for train."""
    if val_fraction + test_fraction >= 1.0:
        raise ConfigError(
            f"--val-fraction {val_fraction} and --test-fraction {test_fraction} leave nothing to train on",
            hint="keep their sum below 1, e.g. --val-fraction 0.2 --test-fraction 0.3",
        )


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def server_spec(
    server: str | None,
    config: Path | None,
    name: str | None,
    env: list[str] | None = None,
    header: list[str] | None = None,
) -> ServerSpec:
    """Build the ServerSpec from --server or --config/--name (exactly one of them)."""
    if server and config:
        raise ConfigError("give either --server or --config, not both")
    if config is not None:
        spec = ServerSpec.from_config(config, name)
    elif server:
        if name:
            raise ConfigError("--name only applies with --config")
        spec = ServerSpec.parse(server)
    else:
        raise ConfigError(
            "no server given", hint="pass --server URL_OR_COMMAND, or --config FILE [--name NAME]"
        )
    extra_env, extra_headers = _pairs(env, "--env"), _pairs(header, "--header")
    if extra_env and spec.transport != "stdio":
        raise ConfigError("--env only applies to stdio servers (a command line), not to URLs")
    if extra_headers and spec.transport == "stdio":
        raise ConfigError("--header only applies to HTTP servers (a URL), not to command lines")
    return spec.model_copy(
        update={"env": {**spec.env, **extra_env}, "headers": {**spec.headers, **extra_headers}}
    )


def tool_policy(allow: list[str] | None, deny: list[str] | None, allow_destructive: bool) -> ToolPolicy:
    return ToolPolicy(allow=allow or [], deny=deny or [], allow_destructive=allow_destructive)


def check_output(path: Path | None, flag: str) -> None:
    """Fail before any work when an output file cannot be written (a path through a regular file,
    a directory, no permission), instead of with a traceback after minutes of work."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"cannot write {flag} {path}: {e.strerror} ({e.filename})", hint="choose a writable path"
        ) from None
    if path.is_dir():
        raise ConfigError(f"cannot write {flag} {path}: it is a directory", hint="give a file name")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"cannot write {flag} {path}: permission denied", hint="choose a writable path")

"""Options every server-facing command shares, declared once."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict, Field

from mcp_rl.errors import ConfigError
from mcp_rl.servers import ConnectionSettings, ServerSpec, ToolPolicy

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


# One name and one meaning per option across commands: an output is `--output/-o` everywhere
# (the old `--save`, `--out` still work, hidden, for a while); `-n` is always episodes per task.
SaveAlias = Annotated[Path | None, typer.Option("--save", hidden=True, help="Old name of --output.")]
OutAlias = Annotated[Path | None, typer.Option("--out", hidden=True, help="Old name of --output.")]

BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="An OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) for the API models named here: "
        "openai:NAME, or a name the endpoint serves (key from OPENAI_API_KEY). Local models stay local.",
    ),
]

ROLLOUT_FLAGS = {
    "max_turns": "--max-turns",
    "max_new_tokens": "--max-new-tokens",
    "max_context_tokens": "--max-context",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "seed": "--seed",
}
"""The flags `rollout` and `chat` give RolloutConfig's fields (their bounds are the fields')."""


def one_output(output: Path | None, alias: Path | None, alias_flag: str) -> Path | None:
    """The output path, given by `--output` or by its old name `alias_flag` (not both)."""
    if output is not None and alias is not None and output != alias:
        raise ConfigError(f"give either --output or {alias_flag} (its old name), not both")
    return output if output is not None else alias


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Fail before any work when the held-out shares leave no room for train."""
    if val_fraction + test_fraction >= 1.0:
        raise ConfigError(
            f"--val-fraction {val_fraction} and --test-fraction {test_fraction} leave nothing to train on",
            hint="keep their sum below 1, e.g. --val-fraction 0.2 --test-fraction 0.3",
        )


class ServerOptions(BaseModel):
    """The options of every command that talks to a server: each command's flags are built from
    these fields (`config_options`), so they are the same everywhere."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    server: str | None = Field(default=None, json_schema_extra={"cli": ["--server", "-s"]})
    """The MCP server: a URL (streamable HTTP; a path ending in /sse for SSE) or a stdio command line,
    e.g. 'uvx mcp-server-time'."""
    config: Path | None = None
    """A JSON file with an 'mcpServers' object (the desktop MCP clients' format)."""
    name: str | None = None
    """Which server of --config to use."""
    env: list[str] = Field(default_factory=list)
    """KEY=VALUE for a stdio server's environment (repeatable)."""
    header: list[str] = Field(default_factory=list)
    """KEY=VALUE HTTP header, e.g. an auth token, or curl's 'Authorization: Bearer TOKEN' (repeatable)."""
    allow_tools: list[str] = Field(default_factory=list)
    """Only use tools matching these globs (repeatable). An irreversible tool (delete, send, shell
    ...) is used only when a pattern here names it (more than `*`), with a warning."""
    deny_tools: list[str] = Field(default_factory=list)
    """Never use tools matching these globs (repeatable)."""
    allow_destructive: bool = Field(default=False, json_schema_extra={"cli": "--allow-destructive"})
    """Include tools the server annotates destructive, and explore writes on a stdio server
    (restarted to undo them). Unannotated irreversible tools still need --allow-tools. Off by default."""
    connection: ConnectionSettings = Field(default_factory=ConnectionSettings)

    @property
    def given(self) -> bool:
        """Whether a server was named at all (train --resume may do without)."""
        return bool(self.server or self.config)

    @property
    def policy_given(self) -> bool:
        return bool(self.allow_tools or self.deny_tools or self.allow_destructive)

    def spec(self) -> ServerSpec:
        """The server named by --server or --config/--name (exactly one of them), with --env and
        --header added, reached with these timeouts."""
        if self.server and self.config:
            raise ConfigError("give either --server or --config, not both")
        if self.config is not None:
            spec = ServerSpec.from_config(self.config, self.name)
        elif self.server:
            if self.name:
                raise ConfigError("--name only applies with --config")
            spec = ServerSpec.parse(self.server)
        else:
            raise ConfigError(
                "no server given", hint="pass --server URL_OR_COMMAND, or --config FILE [--name NAME]"
            )
        extra_env, extra_headers = _pairs(self.env, "--env"), _pairs(self.header, "--header")
        if extra_env and spec.transport != "stdio":
            raise ConfigError("--env only applies to stdio servers (a command line), not to URLs")
        if extra_headers and spec.transport == "stdio":
            raise ConfigError("--header only applies to HTTP servers (a URL), not to command lines")
        return spec.model_copy(
            update={
                "env": {**spec.env, **extra_env},
                "headers": {**spec.headers, **extra_headers},
                "connection": self.connection,
            }
        )

    def policy(self) -> ToolPolicy:
        return ToolPolicy(
            allow=self.allow_tools, deny=self.deny_tools, allow_destructive=self.allow_destructive
        )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    """KEY=VALUE pairs (and for --header also curl's "Name: value"). The values are secrets: an
    error names the flag, its position and a valid name, never the text given (`--env sk-...` with
    no `=` is a key typed where KEY=VALUE belongs)."""
    header = what == "--header"
    pattern = _HEADER_NAME if header else _ENV_NAME
    out: dict[str, str] = {}
    for n, item in enumerate(items, 1):
        # The first separator wins: a name holds neither, a value may hold both ("Bearer a=b").
        seps = [i for i in (item.find("="), item.find(":") if header else -1) if i >= 0]
        at = min(seps, default=-1)
        key = item[:at].strip()
        if at < 0 or not pattern.fullmatch(key):
            form = "KEY=VALUE (or curl's 'Name: value')" if header else "KEY=VALUE"
            raise ConfigError(
                f"{what} number {n} is not {form}; its text is not shown, since it may be a secret",
                hint=f"e.g. {what} " + ("'Authorization: Bearer TOKEN'" if header else "API_KEY=VALUE"),
            )
        value = item[at + 1 :]
        out[key] = value.strip() if item[at] == ":" else value  # curl's form has a space after ':'
    return out


def not_empty(path: Path) -> bool:
    """A file with content, or a directory with anything in it: what an output must not replace unasked."""
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and path.stat().st_size > 0


def check_output(path: Path | None, flag: str, *, force: bool = False, directory: bool = False) -> None:
    """Fail before any work when an output cannot be written (a path through a regular file, a
    directory where a file belongs, no permission), instead of with a traceback after minutes of
    work; and when it would replace a non-empty file or directory without `--force`. `directory`:
    the output may be a directory (a datasets layout)."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"cannot write {flag} {path}: {e.strerror} ({e.filename})", hint="choose a writable path"
        ) from None
    if path.is_dir() and not directory:
        raise ConfigError(f"cannot write {flag} {path}: it is a directory", hint="give a file name")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"cannot write {flag} {path}: permission denied", hint="choose a writable path")
    if not force and not_empty(path):
        raise ConfigError(
            f"{flag} {path} exists and is not empty",
            hint="choose another path, or pass --force to replace it",
        )

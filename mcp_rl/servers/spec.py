"""How a user names a server: a URL, a stdio command line, or an entry of an `mcpServers` config."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from mcp_rl.errors import ConfigError
from mcp_rl.servers.connection import ConnectionSettings

Transport = Literal["stdio", "http", "sse"]
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
"""Anything that starts like a URL is one (ftp://... is a wrong URL, not a program to run)."""


class ServerSpec(BaseModel):
    """Where a server is and how to reach it. `env` and `headers` may hold secrets: they are
    never printed, logged or written to a run directory (see `public()`)."""

    name: str = ""
    transport: Transport
    command: list[str] = Field(default_factory=list)
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    reset_command: list[str] | None = None
    """Run between episodes to restore the server's state (otherwise stdio servers are restarted)."""
    connection: ConnectionSettings = Field(default_factory=ConnectionSettings)
    """How long to wait for it and how much of a result to keep (--connect-timeout, --call-timeout)."""

    @classmethod
    def parse(
        cls, text: str, *, env: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> ServerSpec:
        """A URL (streamable HTTP, or SSE when the path ends in /sse) or a stdio command line."""
        text = (text or "").strip()
        if not text:
            raise ConfigError(
                "no server given", hint="pass --server URL_OR_COMMAND, or --config FILE --name NAME"
            )
        scheme = _URL_SCHEME.match(text)
        if scheme and scheme.group(1).lower() not in ("http", "https"):
            raise ConfigError(
                f"unsupported server URL scheme {scheme.group(1)!r}: MCP servers are reached over http(s) "
                "or started from a command line",  # the URL itself is not echoed: it may hold a token
                hint="use e.g. http://127.0.0.1:8000/mcp, or a command line such as 'uvx mcp-server-time'",
            )
        if scheme:
            url = urlparse(text)
            if not url.hostname:
                raise ConfigError(
                    f"not a valid server URL: {text!r}", hint="use e.g. http://127.0.0.1:8000/mcp"
                )
            transport: Transport = "sse" if url.path.rstrip("/").endswith("/sse") else "http"
            return cls(name=url.hostname, transport=transport, url=text, headers=headers or {}, env={})
        try:
            argv = shlex.split(text)
        except ValueError as e:
            raise ConfigError(
                f"cannot parse server command line {text!r}: {e}", hint="check the quoting"
            ) from e
        return cls(name=_name_from_argv(argv), transport="stdio", command=argv, env=env or {})

    @classmethod
    def from_config(cls, path: str | Path, name: str | None = None) -> ServerSpec:
        """An entry of the standard `{"mcpServers": {NAME: {...}}}` file desktop MCP clients use."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ConfigError(
                f"config file not found: {path}", hint="check the path given to --config"
            ) from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"config file {path} is not valid JSON: {e}", hint="fix the JSON syntax") from e
        except IsADirectoryError:
            raise ConfigError(
                f"config file {path} is a directory",
                hint="give the JSON file itself, e.g. --config ~/.config/Claude/claude_desktop_config.json",
            ) from None
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}", hint="check the path") from None
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(servers, dict) or not servers:
            raise ConfigError(
                f"config file {path} has no 'mcpServers' object",
                hint='expected {"mcpServers": {"name": {"command": "...", "args": [...]}}}',
            )
        if name is None:
            if len(servers) != 1:
                raise ConfigError(
                    f"config file {path} defines {len(servers)} servers",
                    hint=f"choose one with --name: {', '.join(servers)}",
                )
            name = next(iter(servers))
        if name not in servers:
            raise ConfigError(f"no server named {name!r} in {path}", hint=f"available: {', '.join(servers)}")
        return cls._from_entry(name, servers[name], path)

    @classmethod
    def _from_entry(cls, name: str, entry: Any, path: Path) -> ServerSpec:
        where = f"server {name!r} in {path}"
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{where} is not an object", hint='give {"command": ..., "args": [...]} or {"url": ...}'
            )
        env = _str_dict(entry.get("env"), f"{where}: env")
        headers = _str_dict(entry.get("headers"), f"{where}: headers")
        reset = entry.get("resetCommand")
        if reset is not None and not (isinstance(reset, list) and all(isinstance(x, str) for x in reset)):
            raise ConfigError(f"{where}: resetCommand must be a list of strings")
        if entry.get("url"):
            scheme = _URL_SCHEME.match(str(entry["url"]).strip())
            if not scheme or scheme.group(1).lower() not in ("http", "https"):
                # a config's url is never a command line: "localhost:8000/mcp" must not be run
                raise ConfigError(
                    f"{where}: its url is not an http(s) URL", hint="e.g. http://127.0.0.1:8000/mcp"
                )
            spec = cls.parse(str(entry["url"]), headers=headers)
            kind = str(entry.get("type") or entry.get("transport") or "").lower()
            if kind == "sse":
                spec.transport = "sse"
            elif kind in ("http", "streamable-http", "streamablehttp", "streamable_http"):
                spec.transport = "http"
            return spec.model_copy(update={"name": name, "reset_command": reset})
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where} has neither 'command' nor 'url'", hint="add one of them")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ConfigError(f"{where}: args must be a list of strings")
        return cls(
            name=name,
            transport="stdio",
            command=[command, *map(str, args)],
            env=env,
            cwd=entry.get("cwd"),
            reset_command=reset,
        )

    def public(self) -> dict[str, Any]:
        """What may be shown or saved: secrets (env values, header values) replaced by '***'."""
        data = self.model_dump()
        data["env"] = {k: "***" for k in self.env}
        data["headers"] = {k: "***" for k in self.headers}
        return data

    def secret_values(self) -> list[str]:
        """Every value that must never be written down: env and header values (and the token of an
        "Authorization: Bearer <token>" style header), longest first so that redaction is greedy."""
        values: set[str] = set()
        for v in [*self.env.values(), *self.headers.values()]:
            values.add(v)
            values.update(w for w in v.split() if w.lower() not in _AUTH_SCHEMES)
        return sorted((v for v in values if len(v) >= 6), key=len, reverse=True)

    def redact(self, text: str) -> str:
        for v in self.secret_values():
            text = text.replace(v, "***")
        return text

    def with_connection(self, **changes: Any) -> ServerSpec:
        """The same server, reached with other connection settings (validated: a bad value raises)."""
        return self.model_copy(
            update={
                "connection": ConnectionSettings.model_validate({**self.connection.model_dump(), **changes})
            }
        )

    def describe(self) -> str:
        return self.url if self.transport != "stdio" else shlex.join(self.command)


_AUTH_SCHEMES = {"bearer", "basic", "token", "digest", "apikey"}


def _name_from_argv(argv: list[str]) -> str:
    # "uvx mcp-server-time" -> "mcp-server-time"; "npx -y @scope/server-memory" -> "server-memory"
    words = [a for a in argv if not a.startswith("-")]
    runners = {"uvx", "npx", "uv", "run", "python", "python3", "node", "pipx", "-m"}
    rest = [w for w in words if Path(w).name not in runners] or words or ["server"]
    return Path(rest[0]).name.split("@")[0] or rest[0]


def _str_dict(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}

"""How a user names a server: a URL, a stdio command line, or an entry of an `mcpServers` config."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlparse, urlsplit, urlunsplit

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
                    f"not a valid server URL: {masked_url(text)!r}", hint="use e.g. http://127.0.0.1:8000/mcp"
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
        """What may be shown or saved: secrets (env values, header values) replaced by '***', and the
        URL's credentials masked (`masked_url`). The real URL stays in memory only."""
        data = self.model_dump()
        data["env"] = {k: "***" for k in self.env}
        data["headers"] = {k: "***" for k in self.headers}
        if self.url:
            data["url"] = masked_url(self.url)
        return data

    def secret_values(self) -> list[str]:
        """Every value that must never be written down or shown to a model, longest first so that
        redaction is greedy: env and header values (and the token of an "Authorization: Bearer
        <token>" style header), the credentials in the server URL, and `ambient_secrets()` (API keys
        and tokens in our own environment, the serve token among them)."""
        values: set[str] = set(ambient_secrets())
        for v in [*self.env.values(), *self.headers.values()]:
            values.add(v)
            values.update(w for w in v.split() if w.lower() not in _AUTH_SCHEMES)
        if self.url:
            values.update(url_secrets(self.url))
        return sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True)

    def redact(self, text: str) -> str:
        """`text` with every `secret_values()` value replaced by '***'. Applied where a tool result is
        made (`ServerSession.call`), to the server's stderr log, and by the writers of trajectories."""
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
        """The server as shown to the user: the URL with its credentials masked, or the command line."""
        return masked_url(self.url or "") if self.transport != "stdio" else shlex.join(self.command)


_AUTH_SCHEMES = {"bearer", "basic", "token", "digest", "apikey"}
_MIN_SECRET = 6
"""Shorter values are not redacted: "1" or "true" would blank out every number and flag."""
# A name (env variable, query parameter) whose value is a credential: one of these words, or a
# word ending in one of the endings ("apikey", "accesstoken"; not "monkey"), split at _ - . and case.
_SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "pass", "auth", "authorization",
                 "sig", "signature", "credential", "credentials", "jwt", "bearer"}  # fmt: skip
_SECRET_ENDINGS = ("apikey", "accesskey", "secretkey", "privatekey", "token", "secret", "password")
# Variables we pass on to stdio servers whose value may be a URL with a password in it.
_URL_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "UV_INDEX_URL", "PIP_INDEX_URL",
             "UV_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL", "NPM_CONFIG_REGISTRY", "npm_config_registry")  # fmt: skip


@functools.lru_cache(maxsize=4096)  # asked for every variable of the environment at every redaction
def secret_name(name: str) -> bool:
    """Whether a variable or query parameter called `name` holds a credential (api_key, token,
    OPENAI_API_KEY, MCP_RL_SERVE_TOKEN, accessToken, client_secret, password, sig, ...)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    words = [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS) for w in words)


def ambient_secrets() -> list[str]:
    """Credentials in our own environment: every variable named like one (model API keys, the serve
    token, tracker keys), and the passwords in proxy and package-index URLs passed on to servers."""
    found = [v for k, v in os.environ.items() if secret_name(k) and v.strip()]
    for var in _URL_VARS:
        if os.environ.get(var):
            found += url_secrets(os.environ[var])
    return found


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its user and password, and secret-named query values."""
    try:
        parts = urlsplit(url)
        found = [x for x in (parts.username, parts.password) if x]
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if secret_name(k) and v]
    except ValueError:
        return []
    return found


def masked_url(url: str) -> str:
    """`url` as it may be shown or saved: user:password replaced by '***', and the value of every
    query parameter named like a credential (api_key, token, key, secret, password, ...) by '***'.
    A URL that does not parse is masked whole."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "***"
    if any(secret_name(k) for k, _ in query):
        masked = urlencode([(k, "***" if secret_name(k) else v) for k, v in query], safe="*")
    else:
        masked = parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, masked, parts.fragment))


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

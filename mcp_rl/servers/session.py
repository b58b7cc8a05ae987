"""A live connection to one MCP server: tools listed and filtered, calls validated, every outcome
normalized, crashes turned into results, restarts and resets between episodes.

The SDK's `Client` must be entered and left by the same task, inside any cancel scope that
wraps it. So each connection is owned by a dedicated task (`_Connection.run`) that enters the
client and then waits to be told to close; callers only ever talk to the entered client.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_rl.errors import ServerCrashed, ServerStartError, ServerTimeout
from mcp_rl.servers.errlog import server_errlog
from mcp_rl.servers.policy import ToolPolicy
from mcp_rl.servers.result_text import cut, normalize_call_result
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.servers.schema import schema_problem, to_openai_parameters, validate_arguments
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.servers.stdout_watch import StdoutWatch, watched
from mcp_rl.servers.tools import ToolAnnotations, ToolSpec

# Variables a stdio server may need besides the SDK's minimal set (locale, temp dirs, proxies
# and CA bundles so `uvx`/`npx` can install). API keys and tokens are never passed implicitly.
_PASS_ENV_PREFIXES = ("LANG", "LC_", "TZ", "TMPDIR", "XDG_", "UV_", "NPM_CONFIG_", "npm_config_", "PIP_")
_PASS_ENV_NAMES = {
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}  # fmt: skip
_QUIET_ENV = {
    "FASTMCP_CHECK_FOR_UPDATES": "off",
    "FASTMCP_SHOW_SERVER_BANNER": "false",
    "PYTHONUNBUFFERED": "1",
}
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for e in exc.exceptions:
            yield from _leaves(e)
    else:
        yield exc


def _server_env(spec: ServerSpec) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV_NAMES or k.startswith(_PASS_ENV_PREFIXES)}
    return {**env, **_QUIET_ENV, **spec.env}


class _Connection:
    """One connected client, owned by its own task."""

    def __init__(self, spec: ServerSpec, read_timeout: float, stderr_path: Path) -> None:
        self.spec = spec
        self.read_timeout = read_timeout
        self.stderr_path = stderr_path
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.ready = anyio.Event()
        self.stop = anyio.Event()
        self.closed = anyio.Event()
        self.scope = anyio.CancelScope()
        self.stdout = StdoutWatch()

    def _transport(self, errlog: Any) -> Any:
        spec = self.spec
        if spec.transport == "stdio":
            params = StdioServerParameters(
                command=spec.command[0], args=spec.command[1:], env=_server_env(spec), cwd=spec.cwd
            )
            return watched(stdio_client(params, errlog=errlog), self.stdout)
        if spec.transport == "sse":
            return sse_client(spec.url or "", headers=spec.headers or None)
        http = create_mcp_http_client(headers=spec.headers or None)
        return streamable_http_client(spec.url or "", http_client=http)

    async def run(self) -> None:
        try:
            redact = self.spec.redact if self.spec.secret_values() else None
            with self.scope, server_errlog(self.stderr_path, redact) as errlog:
                async with Client(self._transport(errlog), read_timeout_seconds=self.read_timeout) as client:
                    self.client = client
                    self.ready.set()
                    await self.stop.wait()
        except BaseException as e:
            # a cancellation, or a Ctrl-C that landed in this task, is not the server's failure
            if isinstance(e, anyio.get_cancelled_exc_class()) or not isinstance(e, Exception):
                raise
            self.error = e
        finally:
            self.client = None
            self.ready.set()
            self.closed.set()


class ServerSession:
    """Use as `async with ServerSession(spec) as s:`. See `mcp_rl.servers` for the API."""

    def __init__(
        self,
        spec: ServerSpec,
        policy: ToolPolicy | None = None,
        *,
        stderr_path: str | Path | None = None,
    ) -> None:
        """Timeouts and the result budget come from `spec.connection` (`spec.with_connection(...)`
        to change them)."""
        self.spec = spec
        self.policy = policy or ToolPolicy()
        if spec.reset_command and not self.policy.resettable:
            self.policy = self.policy.model_copy(update={"resettable": True})
        self.connect_timeout = spec.connection.connect_timeout
        self.call_timeout = spec.connection.call_timeout
        self.result_budget = spec.connection.result_budget
        """May be changed for a phase: exploration reads whole results (scenario_gen's budget)."""
        # A temporary stderr log of our own is removed on a clean close; one that failed to start
        # is kept, since the error message points at it.
        self._own_stderr_dir: Path | None = None
        if stderr_path is None:
            self._own_stderr_dir = Path(tempfile.mkdtemp(prefix="mcp-rl-server-"))
            stderr_path = self._own_stderr_dir / "server-stderr.log"
        self.stderr_path = Path(stderr_path)
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self.all_tools: list[ToolSpec] = []
        self.tools: list[ToolSpec] = []
        self.excluded: dict[str, str] = {}
        self.server_name = ""
        self.server_version = ""
        self.protocol_version = ""
        self.instructions: str | None = None
        self.restarts = 0
        self._crashed = False
        self._by_name: dict[str, ToolSpec] = {}
        self._conn: _Connection | None = None
        self._tg: Any = None

    # --- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> ServerSession:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._connect()
            await self._load_tools()
        except BaseException:
            await self._close_connection()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close_connection()
        await self._tg.__aexit__(None, None, None)
        if self._own_stderr_dir is not None:
            shutil.rmtree(self._own_stderr_dir, ignore_errors=True)

    async def _connect(self) -> None:
        conn = _Connection(self.spec, self.call_timeout, self.stderr_path)
        self._conn = conn
        self._crashed = False
        self._tg.start_soon(conn.run)
        deadline = time.monotonic() + self.connect_timeout
        while not conn.ready.is_set() and time.monotonic() < deadline:
            if conn.stdout.gave_up(time.monotonic()):
                # It printed something else where the handshake belongs: say so now, not after the timeout.
                await self._close_connection()
                raise ServerStartError(
                    f"server {self.spec.describe()!r}: {conn.stdout.describe()}",
                    hint=self._stderr_hint(
                        "a stdio server must write only MCP messages on stdout (logs go to stderr); "
                        "check the command, or the server's logging settings"
                    ),
                )
            with anyio.move_on_after(min(0.25, max(0.0, deadline - time.monotonic()))):
                await conn.ready.wait()
        if not conn.ready.is_set():
            await self._close_connection()
            if conn.stdout.first_line is not None:
                raise ServerStartError(
                    f"server {self.spec.describe()!r} did not finish connecting within "
                    f"{self.connect_timeout:g} s: {conn.stdout.describe()}",
                    hint=self._stderr_hint("a stdio server must write only MCP messages on stdout"),
                )
            raise ServerTimeout(
                f"server {self.spec.describe()!r} did not finish connecting within {self.connect_timeout:.0f} s",
                hint=self._stderr_hint(
                    "raise --connect-timeout if it is just slow to start (first `uvx`/`npx` runs install)"
                ),
            )
        if conn.error is not None:
            if conn.stdout.first_line is not None and conn.stdout.messages == 0:
                raise ServerStartError(
                    f"server {self.spec.describe()!r} stopped before the MCP handshake: {conn.stdout.describe()}",
                    hint=self._stderr_hint("a stdio server must write only MCP messages on stdout"),
                )
            raise self._start_error(conn.error)
        client = conn.client
        assert client is not None
        info = client.server_info
        self.server_name = (info.name if info else "") or self.spec.name
        self.server_version = (info.version if info else "") or ""
        self.protocol_version = str(client.protocol_version or "")
        self.instructions = client.instructions

    async def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        conn.stop.set()
        if conn.client is None:  # still in the handshake: nothing to close politely
            conn.scope.cancel()
        with anyio.move_on_after(10):
            await conn.closed.wait()
        if not conn.closed.is_set():
            conn.scope.cancel()
            await conn.closed.wait()

    async def restart(self) -> None:
        """A fresh connection (a new process for stdio). Tools are re-listed."""
        await self._close_connection()
        self.restarts += 1
        await self._connect()
        await self._load_tools()

    async def reset(self) -> None:
        """Restore a clean state between episodes: the user's reset command if given, else a
        restart for stdio servers; a crashed or closed connection is always reconnected.
        A server whose usable tools are all read-only has no state to reset."""
        if self.alive and self.stateless:
            return
        if self.spec.reset_command:
            await self._run_reset_command()
            if self.alive:
                return
            await self.restart()
        elif self.spec.transport == "stdio" or not self.alive:
            await self.restart()

    async def _run_reset_command(self) -> None:
        cmd = self.spec.reset_command or []
        try:
            proc = await anyio.run_process(cmd, check=False, env={**os.environ, **self.spec.env})
        except FileNotFoundError as e:
            raise ServerStartError(f"reset command not found: {cmd[0]!r}", hint="check resetCommand") from e
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace")[-500:]
            raise ServerStartError(f"reset command {cmd!r} exited with code {proc.returncode}: {tail}")

    @property
    def alive(self) -> bool:
        c = self._conn
        return c is not None and c.client is not None and not c.closed.is_set() and not self._crashed

    @property
    def stateless(self) -> bool:
        """All usable tools say they only read: episodes can share this session safely."""
        return bool(self.tools) and all(t.annotations.read_only for t in self.tools)

    # --- listing ---------------------------------------------------------------------------
    async def _load_tools(self) -> None:
        client = self._client()
        raw: list[Any] = []
        cursor: str | None = None
        with anyio.fail_after(self.call_timeout):
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                raw.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        self.all_tools = [self._convert(t) for t in raw]
        self.tools, self.excluded = self.policy.split(self.all_tools)
        for t in self.all_tools:
            if (problem := schema_problem(t.input_schema)) and t.name not in self.excluded:
                t.description = f"{t.description} (warning: {problem})".strip()
        self._by_name = {t.name: t for t in self.all_tools}

    @staticmethod
    def _convert(tool: Any) -> ToolSpec:
        a = tool.annotations
        ann = ToolAnnotations(
            title=getattr(a, "title", None) or getattr(tool, "title", None),
            read_only=getattr(a, "read_only_hint", None),
            destructive=getattr(a, "destructive_hint", None),
            idempotent=getattr(a, "idempotent_hint", None),
            open_world=getattr(a, "open_world_hint", None),
        )
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        description = (tool.description or "").strip() or (ann.title or tool.name.replace("_", " "))
        return ToolSpec(
            name=tool.name,
            description=description,
            input_schema=schema,
            parameters=to_openai_parameters(schema),
            annotations=ann,
        )

    async def list_resources(self) -> list[Any]:
        return await self._paginate("list_resources", "resources")

    async def list_prompts(self) -> list[Any]:
        return await self._paginate("list_prompts", "prompts")

    async def _paginate(self, method: str, field: str) -> list[Any]:
        client = self._client()
        caps = client.server_capabilities
        if getattr(caps, field, None) is None:
            return []
        items: list[Any] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.call_timeout):
                while True:
                    page = await getattr(client, method)(cursor=cursor)
                    items.extend(getattr(page, field))
                    cursor = page.next_cursor
                    if not cursor:
                        return items
        except (MCPError, TimeoutError):
            return items

    # --- calls -----------------------------------------------------------------------------
    def tool(self, name: str) -> ToolSpec | None:
        return self._by_name.get(name)

    def check_call(self, name: str, arguments: Any) -> str | None:
        """Why a call must not be sent (unknown tool, excluded, schema violation), or None."""
        tool = self._by_name.get(name)
        if tool is None:
            names = ", ".join(t.name for t in self.tools) or "(none)"
            return f"unknown tool {name!r}; available tools: {names}"
        if name in self.excluded:
            return f"tool {name!r} is not available: {self.excluded[name]}"
        errors = validate_arguments(tool.input_schema, arguments)
        if errors:
            return f"invalid arguments for {name!r}: " + "; ".join(errors)
        return None

    async def call(self, name: str, arguments: Any = None) -> ToolResult:
        """Run one tool call. Never raises for anything the server or the arguments do.

        This is where every ToolResult from a server is made, so it is where secrets are taken out
        (before the result is cut to its budget, so no half of one survives): a tool that echoes its
        environment (server-everything's get-env) or a header shows '***' to the model, and so to
        trajectories, tasks, reports and exports (`ServerSpec.redact`)."""
        arguments = {} if arguments is None else arguments
        problem = self.check_call(name, arguments)
        if problem:
            return ToolResult(status=CallStatus.INVALID, text=problem)
        if not self.alive:
            return ToolResult(status=CallStatus.CRASH, text=self._crash_text("the server is not running"))
        client = self._client()
        start = time.monotonic()

        def done(status: CallStatus, text: str) -> ToolResult:
            if status is CallStatus.CRASH:
                self._crashed = True  # the next reset() reconnects
            text, truncated = cut(self.spec.redact(text), self.result_budget)  # whole, then cut
            return ToolResult(
                status=status, text=text, latency_s=time.monotonic() - start, truncated=truncated
            )

        try:
            # The SDK's per-request timeout answers -32001; the outer guard covers a transport
            # that stops answering altogether.
            with anyio.fail_after(self.call_timeout + 5):
                result = await client.call_tool(name, arguments, read_timeout_seconds=self.call_timeout)
        except MCPError as e:
            if e.code == _REQUEST_TIMEOUT:
                return done(
                    CallStatus.TIMEOUT, f"the tool {name!r} did not answer within {self.call_timeout:.0f} s"
                )
            if e.code == _CONNECTION_CLOSED or not self.alive:
                return done(CallStatus.CRASH, self._crash_text(e.message))
            return done(CallStatus.PROTOCOL_ERROR, f"error from server: {e.message} (code {e.code})")
        except TimeoutError:
            return done(
                CallStatus.TIMEOUT, f"the tool {name!r} did not answer within {self.call_timeout:.0f} s"
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as e:
            return done(CallStatus.CRASH, self._crash_text(f"{type(e).__name__}: {e}"))
        except RuntimeError as e:  # e.g. structured output that breaks the tool's own output schema
            return done(CallStatus.PROTOCOL_ERROR, f"the server's result was malformed: {e}")
        return normalize_call_result(
            result, self.result_budget, latency_s=time.monotonic() - start, redact=self.spec.redact
        )

    # --- errors ----------------------------------------------------------------------------
    def _client(self) -> Client:
        if not self.alive:
            raise ServerCrashed(f"server {self.spec.name!r} is not connected", hint=self._stderr_hint())
        assert self._conn is not None and self._conn.client is not None
        return self._conn.client

    def stderr_tail(self, lines: int = 15) -> str:
        try:
            with self.stderr_path.open("rb") as f:
                f.seek(max(0, f.seek(0, 2) - 8192))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return self.spec.redact("\n".join(text.strip().splitlines()[-lines:]))

    def _stderr_hint(self, default: str = "") -> str:
        tail = self.stderr_tail()
        if tail:
            return f"the server's last stderr lines ({self.stderr_path}):\n{tail}"
        return default or f"the server wrote nothing on stderr ({self.stderr_path})"

    def _crash_text(self, detail: str) -> str:
        tail = self.stderr_tail(5)
        return f"the server stopped ({detail})" + (f"; its stderr ends with:\n{tail}" if tail else "")

    def _start_error(self, error: BaseException) -> ServerStartError:
        spec = self.spec
        leaves = list(_leaves(error))
        first = leaves[0] if leaves else error
        if isinstance(first, FileNotFoundError) and spec.transport == "stdio":
            return ServerStartError(
                f"cannot start server: command not found: {spec.command[0]!r}",
                hint="check the command line given to --server (is the program installed and on PATH?)",
            )
        if isinstance(first, PermissionError) and spec.transport == "stdio":
            return ServerStartError(f"cannot start server: {spec.command[0]!r} is not executable")
        if spec.transport != "stdio":
            names = {type(e).__name__ for e in leaves}
            detail = spec.redact("; ".join(f"{type(e).__name__}: {e}" for e in leaves))[:400]
            if any("Connect" in n for n in names):
                return ServerStartError(
                    f"cannot reach server at {spec.describe()}: connection refused or host unreachable",
                    hint="check the URL and that the server is running",
                )
            return ServerStartError(
                f"cannot talk to server at {spec.describe()}: {detail}", hint="check the URL, path and headers"
            )
        detail = spec.redact("; ".join(f"{type(e).__name__}: {e}" for e in leaves))[:400]
        return ServerStartError(
            f"server {spec.describe()!r} stopped before it finished the MCP handshake ({detail})",
            hint=self._stderr_hint("run the command by hand to see why it exits"),
        )


def run_sync(coro_fn: Any, *args: Any) -> Any:
    """Run an async function from sync code (the CLI)."""
    return anyio.run(coro_fn, *args)

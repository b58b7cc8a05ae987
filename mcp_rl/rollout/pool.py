"""Server sessions for concurrent episodes.

Episodes of one group must not see each other's state changes. So a server with any tool that
may write gets one session per concurrent episode, reset (`ServerSession.reset()`: the user's reset
command, or a restart for stdio) before a used session serves the next episode; and, where the user
gave a reset command, it runs once when the pool opens: a server that keeps its state on disk still
holds what the last episode of an earlier run wrote (the memory graph kept an entity a solvability attempt
of `generate` created, and 4 of its 22 grounded references no longer re-checked, 2026-12-07). A server whose
tools all say they only read (`readOnlyHint`) is shared by every episode: MCP sessions answer
concurrent requests, and nothing an episode does can change what another sees. `share=True/False`
overrides that choice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from mcp_rl.servers.policy import ToolPolicy
from mcp_rl.servers.session import ServerSession
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.servers.tools import ToolSpec


class PooledSession:
    """A session plus what concurrent users need to restart it once after a crash."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.generation = 0
        """Bumped by every restart, so episodes that saw the same crash restart only once."""
        self.used = False
        self._lock = anyio.Lock()

    async def restart_after_crash(self, seen_generation: int) -> None:
        async with self._lock:
            if self.generation == seen_generation:
                await self.session.restart()
                self.generation += 1

    async def reset(self) -> None:
        async with self._lock:
            await self.session.reset()
            self.generation += 1


class SessionPool:
    """`async with SessionPool(spec, policy, size=4) as pool:` then `async with pool.acquire() as ps:`."""

    def __init__(
        self,
        spec: ServerSpec,
        policy: ToolPolicy | None = None,
        size: int = 1,
        *,
        share: bool | None = None,
        stderr_dir: str | Path | None = None,
    ) -> None:
        """Every session connects with `spec.connection` (timeouts, result budget)."""
        self.spec = spec
        self.policy = policy or ToolPolicy()
        self.size = max(1, size)
        self.share = share
        self.stderr_dir = Path(stderr_dir) if stderr_dir else None
        self._all: list[PooledSession] = []
        self._free: list[PooledSession] = []
        self._available: anyio.Semaphore | None = None
        self._tg: Any = None
        self._closing: Any = None  # an anyio.Event, made inside the event loop
        self._resetting: Any = None  # an anyio.Lock, the same

    @property
    def first(self) -> ServerSession:
        return self._all[0].session

    @property
    def tools(self) -> list[ToolSpec]:
        return self.first.tools

    @property
    def session_count(self) -> int:
        return len(self._all)

    @property
    def shared(self) -> bool:
        return bool(self.share)

    def _new_session(self, k: int) -> ServerSession:
        stderr = self.stderr_dir / f"server-{k}.stderr.log" if self.stderr_dir else None
        return ServerSession(self.spec, self.policy, stderr_path=stderr)

    async def _own(self, k: int, slot: list[Any], ready: anyio.Event) -> None:
        """Enter and leave one session in this task (the SDK wants both done by the same task)."""
        try:
            async with self._new_session(k) as session:
                slot[k] = session
                ready.set()
                await self._closing.wait()
        except Exception as e:  # reported by __aenter__, which re-raises it
            slot[k] = e
            ready.set()

    async def _open(self, first: int, count: int) -> list[ServerSession]:
        slot: list[Any] = [None] * (first + count)
        events = [anyio.Event() for _ in range(count)]
        for i in range(count):
            self._tg.start_soon(self._own, first + i, slot, events[i])
        for e in events:
            await e.wait()
        opened = slot[first:]
        for item in opened:
            if isinstance(item, BaseException):
                raise item
        return opened

    async def __aenter__(self) -> SessionPool:
        self._closing = anyio.Event()
        self._resetting = anyio.Lock()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            (first,) = await self._open(0, 1)
            self._all.append(PooledSession(first))
            if self.share is None:
                self.share = first.stateless
            if not self.share and self.size > 1:
                # Started together: stdio servers take 1-2 s each to start.
                self._all.extend(PooledSession(s) for s in await self._open(1, self.size - 1))
            if not self.share and self.spec.reset_command:
                # once, before any episode: not per session, since two reset commands at once race on
                # what they restore (two re-seeding one git repository: `git add` exit 128, and every
                # attempt of a solvability pass ended ungraded, 2026-12-07)
                await self._all[0].reset()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        self._free = list(self._all)
        self._available = anyio.Semaphore(len(self._all))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        await self._tg.__aexit__(None, None, None)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[PooledSession]:
        """A session for one episode: the shared one, or a private one reset if it served before."""
        if self.share:
            yield self._all[0]
            return
        assert self._available is not None, "use the pool inside `async with`"
        async with self._available:
            ps = self._free.pop()
            try:
                if ps.used:
                    async with self._resetting:  # one reset command at a time (see __aenter__)
                        await ps.reset()
                ps.used = True
                yield ps
            finally:
                self._free.append(ps)

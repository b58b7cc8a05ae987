"""The dashboard's HTTP app: the page, its assets, JSON under /api, and server-sent events.

    GET /                                      the page (assets under /static, shipped in the package)
    GET /api/runs                              every run: server, model, state, steps, base -> best on test
    GET /api/runs/{run}                        one run's summary, masked config and prompt
    GET /api/runs/{run}/metrics                its metrics records
    GET /api/runs/{run}/charts                 its figures as SVG ({name: svg})
    GET /api/runs/{run}/tools                  per tool: calls, invalid, errors, success where used
    GET /api/runs/{run}/tasks                  per task: split, grounded, pass rate, base against current
    GET /api/runs/{run}/steps                  the training steps with trajectories on disk
    GET /api/runs/{run}/steps/{step}/groups    the GRPO groups of a step
    GET /api/runs/{run}/steps/{step}/groups/{group}   a group's attempts side by side
    GET /api/runs/{run}/tasks/{task}/base-vs-best     a val or test task: base episode beside best
    GET /api/compare?runs=a,b                  curves of several runs overlaid
    GET /api/events?run=a                      server-sent events: `change` whenever the run writes

Ids are only ever looked up (never joined into a path), so none can reach outside the runs folder.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mcp_rl.dashboard.runs import NotFound, RunsRoot, mask_secrets

COOKIE = "mcp_rl_dashboard"
ASSETS = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}
POLL_S = 1.0
"""How often the event stream looks at the run's files (a few stat calls)."""


def _asset(name: str) -> bytes:
    return (files("mcp_rl.dashboard") / "static" / name).read_bytes()


def create_app(root: RunsRoot, token: str | None = None, poll_s: float = POLL_S) -> Any:
    """The ASGI app over a runs folder; with `token`, every request must carry it (see TokenAuth)."""

    def run_of(request: Request):
        return root.run(request.path_params["run"])

    def step_of(request: Request) -> int:
        raw = request.path_params["step"]
        if not raw.isdigit():
            raise NotFound(f"no step {raw!r}")
        return int(raw)

    async def page(request: Request) -> Response:
        return Response(_asset("index.html"), media_type="text/html")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:  # a fixed list: nothing else of the package or the disk is served
            raise NotFound(f"no asset {name!r}")
        return Response(_asset(name), media_type=ASSETS[name], headers={"cache-control": "no-cache"})

    async def runs(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(root.runs))

    async def run(request: Request) -> Response:
        r = run_of(request)
        return JSONResponse(
            {"summary": r.summary(), "config": mask_secrets(r.config()), "prompt": mask_secrets(r.prompt())}
        )

    def endpoint(read: Any) -> Any:
        # Reading parquet takes a moment: off the event loop, so the event streams keep flowing.
        async def handler(request: Request) -> Response:
            return JSONResponse(await asyncio.to_thread(read, request))

        return handler

    async def compare(request: Request) -> Response:
        ids = [i for i in request.query_params.get("runs", "").split(",") if i]
        if len(ids) < 2:
            return JSONResponse({"error": "give two or more runs: ?runs=a,b"}, status_code=400)
        return JSONResponse(await asyncio.to_thread(root.compare, ids))

    async def events(request: Request) -> Response:
        r = root.run(request.query_params.get("run", ""))

        async def stream() -> AsyncIterator[bytes]:
            seen = None
            yield b"retry: 2000\n\n"
            while not await request.is_disconnected():
                now = r.version()
                if now != seen:
                    seen = now
                    yield f"event: change\ndata: {now}\n\n".encode()
                await asyncio.sleep(poll_s)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": getattr(exc, "message", str(exc))}, status_code=404)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    routes = [
        Route("/", page),
        Route("/static/{name}", asset),
        Route("/api/runs", runs),
        Route("/api/runs/{run}", run),
        Route("/api/runs/{run}/metrics", endpoint(lambda q: run_of(q).metrics())),
        Route("/api/runs/{run}/charts", endpoint(lambda q: run_of(q).charts())),
        Route("/api/runs/{run}/tools", endpoint(lambda q: run_of(q).tools())),
        Route("/api/runs/{run}/tasks", endpoint(lambda q: run_of(q).task_table())),
        Route("/api/runs/{run}/steps", endpoint(lambda q: run_of(q).step_files())),
        Route("/api/runs/{run}/steps/{step}/groups", endpoint(lambda q: run_of(q).groups(step_of(q)))),
        Route(
            "/api/runs/{run}/steps/{step}/groups/{group}",
            endpoint(lambda q: run_of(q).group(step_of(q), q.path_params["group"])),
        ),
        Route(
            "/api/runs/{run}/tasks/{task}/base-vs-best",
            endpoint(lambda q: run_of(q).base_vs_best(q.path_params["task"])),
        ),
        Route("/api/compare", compare),
        Route("/api/events", events),
    ]
    app: Any = Starlette(routes=routes, exception_handlers={NotFound: not_found, HTTPException: http_error})
    return TokenAuth(app, token) if token else app


class TokenAuth:
    """Every request needs the token: as `Authorization: Bearer <token>` (API clients), or as
    `?token=` once (the URL printed at start), which sets an HttpOnly cookie the page's own requests
    and its event stream then carry. Compared in constant time; never echoed."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self._token = app, token.encode()

    def _given(self, scope: dict[str, Any]) -> tuple[bytes, bool]:
        """(the token the request carries, whether it came in the query): query, header, then cookie."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0].encode(), True
        cookie = b""
        for key, value in scope.get("headers", []):
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                return value[7:].strip(), False
            if key == b"cookie":
                for part in value.split(b";"):
                    name, _, v = part.strip().partition(b"=")
                    if name == COOKIE.encode():
                        cookie = v
        return cookie, False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given, from_query = self._given(scope)
        if not hmac.compare_digest(given, self._token):
            await JSONResponse(
                {"error": "missing or wrong token: open the URL the dashboard printed (it carries ?token=)"},
                status_code=401,
            )(scope, receive, send)
            return
        if not from_query:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={self._token.decode()}; HttpOnly; SameSite=Strict; Path=/"
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())],
                }
            await send(message)

        await self.app(scope, receive, send_with_cookie)

"""The ASGI app: `/v1/models` and `/v1/chat/completions`, OpenAI-compatible, errors in OpenAI's shape.

Generation happens in the model's engine thread (`TransformersModel.generate` only awaits it), so the
event loop stays free: `/v1/models` answers while completions run, and concurrent completions are
batched together by the engine.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mcp_rl.errors import McpRlError
from mcp_rl.serve.auth import BearerAuth
from mcp_rl.serve.completions import (
    RequestError,
    ServedModel,
    chunk_base,
    role_chunk,
    stream_chunks,
)
from mcp_rl.serve.openai_types import ChatRequest, ModelCard, ModelList, error_body

log = logging.getLogger("mcp_rl.serve")

MAX_BODY = 16 << 20
"""Bytes; a conversation with long tool results stays far below this."""


def _error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> JSONResponse:
    kind = {401: "authentication_error", 404: "not_found_error"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return JSONResponse(error_body(message, kind, code, param), status_code=status)


def _validation_message(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return (f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg")), where)


async def _read_request(request: Request) -> ChatRequest:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise RequestError(413, f"the request body is over {MAX_BODY >> 20} MiB")
    body = await request.body()
    if len(body) > MAX_BODY:
        raise RequestError(413, f"the request body is over {MAX_BODY >> 20} MiB")
    try:
        data = json.loads(body)
    except ValueError:
        raise RequestError(400, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise RequestError(400, "the request body must be a JSON object")
    if "messages" not in data:
        raise RequestError(400, "'messages' is required", param="messages")
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        message, where = _validation_message(exc)
        raise RequestError(400, message, param=where or None) from None


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def create_app(served: ServedModel, token: str | None = None) -> Any:
    """The app for one served model; with `token`, every request must carry it as a bearer token."""

    async def list_models(request: Request) -> Response:
        card = ModelCard(id=served.name, created=served.created)
        return JSONResponse(ModelList(data=[card]).model_dump())

    async def get_model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id != served.name:
            return _error(404, f"the model {model_id!r} does not exist", code="model_not_found")
        return JSONResponse(ModelCard(id=served.name, created=served.created).model_dump())

    async def chat_completions(request: Request) -> Response:
        try:
            req = await _read_request(request)
            prepared = served.prepare(req)
            if not req.stream:
                resp = await served.run(prepared)
                return JSONResponse(resp.model_dump(exclude_none=False))
        except RequestError as e:
            return _error(e.status, e.message, code=e.code, param=e.param)
        except McpRlError as e:
            log.error("generation failed: %s", e.message)
            return _error(500, e.message, code="generation_failed")
        except Exception as e:  # a bug: the operator's log gets the traceback, the client an API error
            log.exception("generation failed")
            return _error(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")

        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        async def events() -> AsyncIterator[bytes]:
            # The role chunk goes out at once: hosts see the reply start before generation ends.
            yield _sse(role_chunk(chunk_base(prepared, served.name)))
            try:
                resp = await served.run(prepared)
            except McpRlError as e:
                log.error("generation failed: %s", e.message)
                yield _sse(error_body(e.message, "server_error", "generation_failed"))
                return
            except Exception as e:
                log.exception("generation failed")
                yield _sse(
                    error_body(f"internal error: {type(e).__name__}: {e}", "server_error", "internal_error")
                )
                return
            for chunk in stream_chunks(resp, include_usage, with_role=False):
                yield _sse(chunk)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return _error(
                404, f"no route {request.method} {request.url.path}; see /v1/models and /v1/chat/completions"
            )
        return _error(exc.status_code, str(exc.detail))

    app: Any = Starlette(
        routes=[
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        ],
        exception_handlers={HTTPException: http_error},
    )
    if token:
        app = BearerAuth(app, token)
    return app

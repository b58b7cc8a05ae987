"""Bearer-token check for every request, as ASGI middleware.

The token is compared in constant time and never logged or echoed: a rejected request learns only
that its credentials were missing or wrong.
"""

from __future__ import annotations

import hmac
import json
import os
from typing import Any

from mcp_rl.errors import ConfigError
from mcp_rl.serve.openai_types import error_body

TOKEN_ENV = "MCP_RL_SERVE_TOKEN"


def token_from_env(var: str | None) -> tuple[str | None, str | None]:
    """(token, the variable it came from): `var` when given (it must be set), else MCP_RL_SERVE_TOKEN
    when set (set but empty is refused); (None, None) when neither is."""
    if var:
        value = os.environ.get(var, "")
        if not value.strip():
            raise ConfigError(
                f"--token-env names {var}, which is not set or empty",
                hint=f"export {var}=<a long random secret> before starting the server",
            )
        return value.strip(), var
    if TOKEN_ENV not in os.environ:
        return None, None
    value = os.environ[TOKEN_ENV].strip()
    if not value:  # set but empty: almost always a failed `export X=$(...)`, not a wish for no auth
        raise ConfigError(
            f"{TOKEN_ENV} is set but empty: serving without authentication was not asked for",
            hint=f"export {TOKEN_ENV}=<a long random secret>, or unset it to serve without a token",
        )
    return value, TOKEN_ENV


class BearerAuth:
    """Rejects every HTTP request without `Authorization: Bearer <token>` with a 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    def _allowed(self, scope: dict[str, Any]) -> bool:
        got = b""
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                got = value
                break
        # Accept any capitalisation of the scheme, compare the rest exactly and in constant time.
        if got[:7].lower() == b"bearer ":
            got = b"Bearer " + got[7:].strip()
        return hmac.compare_digest(got, self._expected)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            error_body(
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                "(the OpenAI clients do this with api_key=<token>)",
                code="invalid_api_key",
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

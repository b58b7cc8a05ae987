"""`mcp-rl serve`: a tuned model behind an OpenAI-compatible chat-completions API.

served = ServedModel(model, name, system_prompt)   # completions.py: request -> reply
app = create_app(served, token=None)               # app.py: the ASGI app (starlette)
uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from mcp_rl.serve.app import create_app
from mcp_rl.serve.auth import TOKEN_ENV, token_from_env
from mcp_rl.serve.completions import RequestError, ServedModel
from mcp_rl.serve.loading import Opened, open_any, open_plain, open_tuned

__all__ = [
    "TOKEN_ENV",
    "Opened",
    "RequestError",
    "ServedModel",
    "create_app",
    "open_any",
    "open_plain",
    "open_tuned",
    "token_from_env",
]

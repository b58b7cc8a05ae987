"""Model backends behind one interface (see `base.py`).

`load_model(spec)` resolves a `--model` string (registry.py). The heavy backends import torch,
transformers or API clients, so they are loaded lazily on first attribute access.
"""

from typing import Any

from mcp_rl.models.base import ChatModel, Completion, Message, SamplingParams, TokenModel
from mcp_rl.models.builtin import BUILTIN_MODELS, DEFAULT_MODEL
from mcp_rl.models.registry import close_models, load_model, load_tiny

_LAZY = {
    "TransformersModel": "mcp_rl.models.hf_backend",
    "ApiModel": "mcp_rl.models.api_backend",
}

__all__ = [
    "BUILTIN_MODELS",
    "DEFAULT_MODEL",
    "ApiModel",
    "ChatModel",
    "Completion",
    "Message",
    "SamplingParams",
    "TokenModel",
    "TransformersModel",
    "close_models",
    "load_model",
    "load_tiny",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mcp_rl.models' has no attribute {name!r}")

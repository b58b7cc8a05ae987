"""`--model` resolution: one string names any model mcp-rl can use.

Accepted forms, tried in this order:
- `tiny` / `tiny-random`: the tiny random test model (tiny.py), built here in about a second;
- a built-in name (builtin.py), e.g. `qwen2.5-coder-0.5b-instruct`: installed from PyPI, offline;
- a path to a `.gguf` file (converted once to a cache) or to a transformers model directory;
- `openai:<model>`, or any name together with `base_url=` (an OpenAI-compatible endpoint);
- `litellm:<name>`, or `<provider>/<model>` where provider is one litellm knows (`anthropic/...`);
- a hub id `org/name`: from the local hub cache, or downloaded when online.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mcp_rl.errors import ModelError
from mcp_rl.models.base import ChatModel
from mcp_rl.models.builtin import BUILTIN_MODELS, DEFAULT_MODEL, ensure_cached, ensure_gguf_cached

TINY_NAMES = ("tiny", "tiny-random")
_API_OPTS = ("base_url", "api_key", "max_concurrency", "timeout", "max_retries")
_LOCAL_OPTS = ("dtype", "device", "threads", "max_batch", "max_context", "fast")


def _pick(opts: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if k in keys and v is not None}


def _litellm_provider(prefix: str) -> bool:
    from mcp_rl.models.api_backend import import_litellm

    try:
        litellm = import_litellm()
    except ImportError:
        return False
    providers = {str(getattr(p, "value", p)) for p in getattr(litellm, "provider_list", [])}
    return prefix in providers


def load_model(
    spec: str | None = None, *, cache_dir: str | os.PathLike[str] | None = None, **opts: Any
) -> ChatModel:
    """Resolve `spec` (default: the default built-in policy) to a ready ChatModel.

    Local options: dtype, device, threads, max_batch, max_context, fast, seed (tiny only).
    API options: base_url, api_key, max_concurrency, timeout, max_retries.
    `log` (a callable taking a str) receives progress lines for slow first-time conversions.
    """
    from mcp_rl.models.api_backend import ApiModel

    spec = (spec or DEFAULT_MODEL).strip()
    log = opts.pop("log", None)
    local = _pick(opts, _LOCAL_OPTS)
    api = _pick(opts, _API_OPTS)

    if spec in TINY_NAMES:
        return load_tiny(seed=opts.get("seed", 0), **local)
    if spec in BUILTIN_MODELS:
        return _local(ensure_cached(spec, cache_dir, log=log), name=spec, **local)
    if spec.startswith("openai:"):
        return ApiModel(spec.split(":", 1)[1], provider="openai", **api)
    if spec.startswith("litellm:"):
        return ApiModel(spec.split(":", 1)[1], provider="litellm", **api)

    # a local file or directory is loaded here even with a base_url (which is for the API models of a
    # command: `train --base-url` must not send the policy to the endpoint)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf" and (path.exists() or not api.get("base_url")):
        _check_gguf(path)  # before hashing and converting it
        return _local(ensure_gguf_cached(path, cache_dir, log=log), name=path.stem, **local)
    if path.is_dir():
        _check_model_dir(path)
        return _local(path, name=path.name, **local)
    if api.get("base_url"):
        return ApiModel(spec, provider="openai", **api)

    if "/" in spec and not spec.startswith((".", "/", "~")):
        prefix = spec.split("/", 1)[0]
        if _litellm_provider(prefix):
            return ApiModel(spec, provider="litellm", **api)
        return _hub(spec, **local)

    close = difflib.get_close_matches(spec, [*BUILTIN_MODELS, *TINY_NAMES], n=1)
    raise ModelError(
        f"unknown model {spec!r}",
        hint=(f"did you mean {close[0]!r}? " if close else "")
        + f"use a built-in name ({', '.join(BUILTIN_MODELS)}), a model directory, a .gguf file, "
        "openai:<model> (or --base-url), litellm:<name>, or a hub id org/name",
    )


def _local(path: str | os.PathLike[str], name: str, **opts: Any) -> ChatModel:
    from mcp_rl.models.hf_backend import TransformersModel

    try:
        return TransformersModel.from_pretrained(path, name=name, **opts)
    except (ValueError, OSError) as e:
        # transformers says "cannot load" as a ValueError or OSError with pages of text: keep its first line
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise ModelError(
            f"cannot load the model in {path}: {first[:300]}",
            hint="a model directory needs config.json, its weights and its tokenizer files",
        ) from None


GGUF_MAGIC = b"GGUF"
_WEIGHTS = ("*.safetensors", "pytorch_model*.bin", "model.safetensors.index.json")
_TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def check_base_url(url: str | None) -> str | None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host (`--base-url`); "" means none."""
    if not url or not url.strip():
        return None
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        # the value is not echoed: an endpoint URL may carry a key
        raise ModelError(
            "--base-url is not an http(s) URL", hint="give the endpoint's base, e.g. http://127.0.0.1:8000/v1"
        )
    return url.strip()


def check_model_name(spec: str, *, base_url: str | None = None) -> None:
    """What can be told about `--model spec` without loading it: an unknown name, a missing or broken
    .gguf file, a directory that is no model. A ModelError, in one sentence, before a command starts
    its work; `load_model` still raises for what only loading can find (and turns a library's
    traceback into a ModelError too)."""
    spec = spec.strip()
    if spec in TINY_NAMES or spec in BUILTIN_MODELS or spec.startswith(("openai:", "litellm:")):
        return
    path = Path(spec).expanduser()
    local = (path.suffix == ".gguf" and path.exists()) or path.is_dir()
    if base_url and not local:
        return  # a name the endpoint serves
    if path.suffix == ".gguf":
        _check_gguf(path)
        return
    if path.is_dir():
        _check_model_dir(path)
        return
    if "/" in spec and not spec.startswith((".", "/", "~")):
        return  # a hub id or a litellm provider/model: only the hub or the provider can tell
    load_model(spec)  # an unknown name: load_model's own message, with its suggestion


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist", hint="check the path given as the model")
    with path.open("rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise ModelError(
                f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)",
                hint="give a .gguf model file (e.g. one written by llama.cpp or `mcp-rl export --format gguf`)",
            )


def _check_model_dir(path: Path) -> None:
    config = path / "config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(
            f"{path} is not a transformers model directory (no config.json)",
            hint="give a model directory, a .gguf file or a built-in name",
        ) from None
    except (OSError, ValueError) as e:
        raise ModelError(f"{config} cannot be read as JSON ({e})", hint="the model directory is damaged") from None
    missing = []
    if not isinstance(data, dict) or not (data.get("model_type") or data.get("architectures")):
        missing.append("config.json's model_type")
    if not any(any(path.glob(p)) for p in _WEIGHTS):
        missing.append("the weights (*.safetensors or pytorch_model*.bin)")
    if not any((path / t).is_file() for t in _TOKENIZER):
        missing.append("the tokenizer (tokenizer.json)")
    if missing:
        raise ModelError(
            f"{path} is not a complete transformers model directory: missing {', '.join(missing)}",
            hint="give the directory a model was saved to (save_pretrained), a .gguf file or a built-in name",
        )


def _hub(repo_id: str, **opts: Any) -> ChatModel:
    from mcp_rl.models.hf_backend import TransformersModel

    try:  # the local hub cache first: works offline when the model was downloaded before
        return TransformersModel.from_pretrained(repo_id, name=repo_id, local_files_only=True, **opts)
    except OSError:
        pass
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ModelError(f"{repo_id} is not in the local hub cache and HF_HUB_OFFLINE=1", hint=_OFFLINE_HINT)
    try:
        return TransformersModel.from_pretrained(repo_id, name=repo_id, local_files_only=False, **opts)
    except Exception as exc:
        raise ModelError(
            f"could not download {repo_id} from the model hub ({type(exc).__name__})", hint=_OFFLINE_HINT
        ) from None


_OFFLINE_HINT = f"offline? use a built-in model (e.g. {DEFAULT_MODEL}), a local directory or a .gguf file"


def load_tiny(seed: int = 0, **opts: Any) -> ChatModel:
    """The tiny random model as a TransformersModel (fp32 unless dtype= is given)."""
    import torch

    from mcp_rl.models.hf_backend import TransformersModel
    from mcp_rl.models.tiny import tiny_model

    dtype = opts.pop("dtype", None) or torch.float32
    opts.pop("threads", None)
    device = opts.pop("device", None)
    model, tok = tiny_model(seed=seed, dtype=dtype)
    if device is not None:
        model.to(device)
    return TransformersModel(model, tok, name="tiny-random", **opts)


def close_models(*models: Any) -> None:
    """Stop the local generation workers of any loaded models (None and API models are skipped).
    A worker left running aborts the interpreter at exit ("terminate called without an active exception")."""
    for m in models:
        close = getattr(m, "close", None)
        if callable(close):
            close()

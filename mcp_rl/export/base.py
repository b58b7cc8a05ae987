"""The base model an adapter was trained on: is it here (offline), where are its weights, and what
does a user elsewhere need to know about it.

Export never downloads: a run's base must be a built-in model whose packages are installed, a local
transformers directory or .gguf file, the tiny test model, or a hub id already in the local cache.
These checks run before any model is loaded, so a wrong base fails in a second, not after a minute.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_rl.errors import ModelError
from mcp_rl.models.builtin import BUILTIN_MODELS, ensure_cached, ensure_gguf_cached, part_files
from mcp_rl.models.registry import TINY_NAMES

_API_PREFIXES = ("openai:", "litellm:")


@dataclass(frozen=True)
class BaseInfo:
    name: str
    """As the run's config records it (what `load_model` takes)."""
    kind: str
    """builtin | gguf | directory | hub | tiny"""
    description: str
    """One line for the model card."""


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or spec.endswith(".gguf") or Path(spec).expanduser().exists()


def check_base(spec: str) -> BaseInfo:
    """Fail fast (ModelError with a hint) unless the base model can be loaded here, offline."""
    spec = (spec or "").strip()
    if not spec:
        raise ModelError(
            "the run does not record its base model",
            hint="its config.json lacks 'model'; was it made by mcp-rl?",
        )
    if spec in TINY_NAMES:
        return BaseInfo(spec, "tiny", "mcp-rl's tiny random test model (built in code, seed 0)")
    if spec in BUILTIN_MODELS:
        part_files(BUILTIN_MODELS[spec])  # raises ModelNotInstalled with the exact pip command
        return BaseInfo(spec, "builtin", BUILTIN_MODELS[spec].description)
    if spec.startswith(_API_PREFIXES):
        raise ModelError(
            f"the run's base model {spec!r} is an API model: it has no local weights to export",
            hint="export works for runs that trained a local model (built-in, directory, .gguf)",
        )
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if path.suffix == ".gguf":
            if not path.is_file():
                raise ModelError(
                    f"the run's base model file {path} does not exist here",
                    hint="put the .gguf file back at that path (export needs the same base weights)",
                )
            return BaseInfo(spec, "gguf", f"the GGUF file {path.name}")
        if not (path / "config.json").is_file():
            raise ModelError(
                f"the run's base model directory {path} does not exist here (or has no config.json)",
                hint="restore the base model at that path: the adapter only fits the weights it was trained on",
            )
        return BaseInfo(spec, "directory", f"the transformers model in {path}")
    if "/" in spec:
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(spec, local_files_only=True)
        except Exception:
            raise ModelError(
                f"the run's base model {spec!r} is not available offline (not in the local hub cache)",
                hint=f"download it once while online (e.g. `hf download {spec}`), then export again",
            ) from None
        return BaseInfo(spec, "hub", f"the hub model {spec}")
    raise ModelError(
        f"the run's base model {spec!r} is not a model mcp-rl knows",
        hint=f"built-in names: {', '.join(BUILTIN_MODELS)}; or a model directory, a .gguf file or a hub id",
    )


def local_dir(base: BaseInfo) -> Path | None:
    """The transformers directory holding the exact weights the adapter was trained on (None for the
    tiny model, which lives in code). Converts a built-in or .gguf base once if not cached yet."""
    if base.kind == "builtin":
        return ensure_cached(base.name)
    if base.kind == "gguf":
        return ensure_gguf_cached(base.name)
    if base.kind == "directory":
        return Path(base.name).expanduser().resolve()
    if base.kind == "hub":
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(base.name, local_files_only=True))
    return None


def stored_dtype(directory: Path | None) -> str:
    """The dtype the base's weights are stored in (config.json), e.g. 'bfloat16'; float32 if unknown."""
    if directory is None:
        return "float32"
    try:
        cfg = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return "float32"
    value = cfg.get("dtype") or cfg.get("torch_dtype") or "float32"
    return str(value).replace("torch.", "")


def load_tokenizer(base: BaseInfo, directory: Path | None) -> Any:
    """The base's tokenizer (chat template, special tokens) without loading its weights."""
    if directory is None:  # the tiny model is built in code, tokenizer included
        from mcp_rl.models.tiny import tiny_model

        return tiny_model(seed=0)[1]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)

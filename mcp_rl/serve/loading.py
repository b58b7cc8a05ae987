"""Which model `serve` and `chat` use: a tuned one (run, checkpoint or export directory) or a plain one.

A tuned model comes with the system prompt it was trained with (the run's `prompt.json`), since its
behaviour depends on it; a plain model comes with none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_rl.errors import ModelError
from mcp_rl.models.builtin import BUILTIN_MODELS
from mcp_rl.models.registry import TINY_NAMES
from mcp_rl.tuned import EXPORT_INFO, TunedSource, find_tuned, load_tuned


@dataclass
class Opened:
    model: Any
    name: str
    """The name clients use for it (`/v1/models`)."""
    source: TunedSource | None = None

    @property
    def training_prompt(self) -> str | None:
        if self.source is None:
            return None
        return str(self.source.prompt.get("system_prompt") or "") or None


def looks_tuned(spec: str) -> bool:
    """A path that is (or was meant to be) a run, checkpoint or export, rather than a model name."""
    if spec in BUILTIN_MODELS or spec in TINY_NAMES or spec.endswith(".gguf") or ":" in spec.split("/")[0]:
        return False
    p = Path(spec).expanduser()
    if p.is_dir():
        return (
            (p / EXPORT_INFO).is_file()
            or (p / "checkpoints").is_dir()
            or (p / "adapter_config.json").is_file()
        )
    # Not there: a path-like string is a run the user expected to exist (find_tuned says so);
    # a bare 'org/name' is left to the model registry (a hub id or a litellm name).
    return spec.startswith((".", "/", "~")) or spec.startswith("runs/") or spec.count("/") > 1


def _tuned_name(source: TunedSource, path: Path) -> str:
    if source.run_dir is not None:
        return source.run_dir.name
    return path.resolve().name


def open_tuned(path: str | Path, checkpoint: str = "best", **opts: Any) -> Opened:
    return open_source(find_tuned(path, checkpoint), path, **opts)


def open_source(source: TunedSource, path: str | Path, **opts: Any) -> Opened:
    """Load what `find_tuned` found (checked first, since loading takes seconds to a minute)."""
    return Opened(model=load_tuned(source, **opts), name=_tuned_name(source, Path(path)), source=source)


def open_plain(spec: str, **opts: Any) -> Opened:
    from mcp_rl.models.registry import load_model

    model = load_model(spec, **opts)
    return Opened(model=model, name=str(getattr(model, "name", spec)))


def open_any(spec: str, checkpoint: str = "best", **opts: Any) -> Opened:
    """A run/checkpoint/export path or any model spec `load_model` takes."""
    return open_tuned(spec, checkpoint, **opts) if looks_tuned(spec) else open_plain(spec, **opts)


def require_local(opened: Opened) -> None:
    """Serving renders prompts and generates from token ids: an API model cannot do that."""
    if not all(hasattr(opened.model, a) for a in ("render", "encode", "generate", "max_context")):
        raise ModelError(
            f"{opened.name} is not a local model: mcp-rl serve runs the weights itself",
            hint="serve a run directory, an export, a built-in model name, a model directory or a .gguf file",
        )

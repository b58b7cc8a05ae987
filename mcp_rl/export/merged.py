"""The adapter folded into the base weights: a standalone transformers model.

The merge runs in float32 (the base's bf16 weights upcast exactly, `merge_and_unload` adds B·A·scale
without rounding) and the result is rounded once to the base's stored dtype. That is the same
arithmetic mcp-rl's own generation uses when it merges the active LoRA for decoding (hf_fast_decoder.py),
so the merged model is the policy the training episodes were sampled from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_rl.errors import ModelError


def merged_model(base_name: str, adapter_dir: Path) -> tuple[Any, Any]:
    """(merged float32 transformers model, tokenizer) of base + adapter."""
    import torch
    from peft import PeftModel

    from mcp_rl.models import close_models, load_model

    tm = load_model(base_name, dtype=torch.float32, fast=False)
    try:
        if not hasattr(tm, "tokenizer"):
            raise ModelError(f"{base_name} is not a local model: an adapter cannot be merged into it")
        try:
            peft_model = PeftModel.from_pretrained(tm.model, str(adapter_dir))
        except Exception as exc:  # a checkpoint that does not fit this base
            raise ModelError(
                f"the adapter in {adapter_dir} does not load onto {base_name}: {type(exc).__name__}: {exc}",
                hint="is this the run's own checkpoint? the adapter only fits the base model it was trained on",
            ) from None
        model = peft_model.merge_and_unload()
        model.eval()
        return model, tm.tokenizer
    finally:
        close_models(tm)


def write_merged(model: Any, tokenizer: Any, out: Path, dtype: str) -> list[Path]:
    """Save as safetensors in `dtype` (the base's), with the tokenizer and its chat template."""
    import torch

    model = model.to(getattr(torch, dtype))
    model.config.dtype = dtype  # what vLLM and transformers pick when no dtype is given
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return sorted(p for p in out.iterdir() if p.is_file())

"""The adapter as PEFT saves it: what `PeftModel.from_pretrained` and vLLM's `--lora-modules` take.

Only the two standard files are copied from the checkpoint (not the optimizer state, not PEFT's
placeholder README). `base_model_name_or_path` is set to the local directory holding the exact
weights the adapter was trained on, so `AutoPeftModelForCausalLM.from_pretrained(DIR)` works here;
the card says which model that is and how to get it elsewhere.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mcp_rl.errors import ModelError

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def write_peft(adapter_dir: Path, out: Path, base_location: str) -> dict[str, object]:
    """Copy the adapter into `out`; returns its config (rank, alpha, target modules)."""
    src_weights = adapter_dir / "adapter_model.safetensors"
    if not src_weights.is_file():
        found = ", ".join(p.name for p in adapter_dir.glob("adapter_model.*")) or "none"
        raise ModelError(
            f"{adapter_dir} has no adapter_model.safetensors (found: {found})",
            hint="re-save the checkpoint with a current PEFT (safetensors is its default)",
        )
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base_location
    config["inference_mode"] = True
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(src_weights, out / "adapter_model.safetensors")
    return config

"""Reload the three exports of a trained run in their target loaders and compare next-token
distributions with the in-training model (base + adapter, bf16), over the training prompt.

    mcp-rl export RUN --format peft -o EXPORTS/peft        (and --format merged, --format gguf)
    python -m bench.verify_exports RUN EXPORTS             # the GGUF row needs llama-cpp-python

Prints figures, never pass/fail (tests/test_export.py asserts the tolerances).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from mcp_rl.models import close_models
from mcp_rl.policy_prompt import opening_messages
from mcp_rl.tuned import find_tuned, load_tuned


def logprobs(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)


def compare(name: str, ref: torch.Tensor, got: torch.Tensor) -> None:
    kl = (ref.exp() * (ref - got)).sum(-1)
    top1 = (ref.argmax(-1) == got.argmax(-1)).float().mean()
    print(f"{name:30} mean KL {kl.mean():.2e}  max KL {kl.max():.2e}  top-1 agreement {top1:.3f}")


def main() -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run, exports = sys.argv[1], Path(sys.argv[2])
    src = find_tuned(run)
    tuned = load_tuned(src)
    messages = opening_messages("What is the current time in Tokyo?", src.prompt.get("server_name", ""))
    text = tuned.render(messages, src.prompt.get("tools"))
    ids = tuned.encode(text)
    ref = logprobs(tuned.model, ids)
    with tuned.adapter_disabled():
        compare("base model (no adapter)", ref, logprobs(tuned.model, ids))
    print(f"over the {len(ids)} positions of the training prompt; reference: base + adapter in bf16")

    base_dir = json.loads((exports / "peft" / "adapter_config.json").read_text())["base_model_name_or_path"]
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.bfloat16)
    compare("peft / PeftModel", ref, logprobs(PeftModel.from_pretrained(base, str(exports / "peft")), ids))
    del base
    merged = AutoModelForCausalLM.from_pretrained(str(exports / "merged"), dtype=torch.bfloat16)
    compare("merged / AutoModelForCausalLM", ref, logprobs(merged, ids))
    del merged
    close_models(tuned)

    import llama_cpp

    gguf = next((exports / "gguf").glob("*.gguf"))
    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=2048, logits_all=True, n_threads=2, verbose=False)
    if llm.tokenize(text.encode(), add_bos=False, special=True) != ids:
        print("llama.cpp tokenizes the prompt differently")
    llm.eval(ids)
    got = torch.log_softmax(torch.tensor(llm.scores[: len(ids)], dtype=torch.float32), -1)
    compare(f"gguf / llama.cpp ({gguf.name})", ref, got)
    llm.close()


if __name__ == "__main__":
    main()

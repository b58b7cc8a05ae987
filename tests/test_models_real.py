"""The built-in models from their installed PyPI packages (pytest -m models).

The first run verifies and converts each model into the cache (0.5B: about a minute), so these
are also marked slow; later runs load from the cache in seconds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import torch

from mcp_rl.models import SamplingParams, load_model
from mcp_rl.models.builtin import BUILTIN_MODELS, ensure_cached, part_files

pytestmark = [pytest.mark.models, pytest.mark.slow]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_time",
            "description": "Get the current time in a given IANA timezone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
                "required": ["timezone"],
            },
        },
    }
]
ASK = [{"role": "user", "content": "What time is it in Tokyo?"}]


def installed(name: str) -> bool:
    try:
        part_files(BUILTIN_MODELS[name])
    except Exception:
        return False
    return True


def need(name: str) -> None:
    if not installed(name):
        pytest.skip(f"{name} is not installed ({BUILTIN_MODELS[name].install})")


def test_default_model_loads_from_cache_and_calls_the_tool() -> None:
    name = "qwen2.5-coder-0.5b-instruct"
    need(name)
    ensure_cached(name)
    t = time.perf_counter()
    assert ensure_cached(name).is_dir()
    assert time.perf_counter() - t < 1.0, "a verified cache is reused without re-hashing"
    model = load_model(name)
    try:
        assert model.fast and model.template_has_tools
        assert model.decode([model.eos_token_id]) == "<|im_end|>"
        assert model.decode([model.pad_token_id]) == "<|endoftext|>"
        prompt = model.encode(model.render(ASK, TOOLS, True))
        (c,) = asyncio.run(model.generate(prompt, 1, SamplingParams(temperature=0.0, max_new_tokens=64)))
        assert c.finish_reason == "stop" and c.token_ids[-1] == model.eos_token_id
        assert "get_current_time" in c.text and "Asia/Tokyo" in c.text

        # The fast path's log-probs agree with the transformers forward the trainer will run,
        # within bf16 noise.
        samples = asyncio.run(
            model.generate(prompt, 4, SamplingParams(temperature=1.0, max_new_tokens=48, seed=0))
        )
        for s in samples:
            ids = torch.tensor([prompt + s.token_ids])
            with torch.no_grad():
                logits = model.model(ids).logits[0, len(prompt) - 1 : -1].float()
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(s.token_ids)[:, None])[:, 0]
            diff = (torch.tensor(s.logprobs) - ref).abs()
            assert diff.mean() < 0.03 and diff.max() < 0.3, (diff.mean(), diff.max())
    finally:
        model.close()


def test_smollm2_converts_into_a_fresh_cache(tmp_path: Path) -> None:
    name = "smollm2-135m-instruct"
    need(name)
    model = load_model(name, cache_dir=tmp_path)
    try:
        assert (tmp_path / "models" / name / "model.safetensors").is_file()
        assert not list((tmp_path / "models").glob(".tmp-*"))
        assert not model.template_has_tools  # its template ignores tools: they go in the system message
        text = model.render(ASK, TOOLS, True)
        assert "get_current_time" in text and '{"name": <tool name>' in text
        (c,) = asyncio.run(
            model.chat(ASK, TOOLS, sampling=SamplingParams(temperature=0.0, max_new_tokens=40))
        )
        assert c.text.strip()
    finally:
        model.close()


def test_task_writer_template_typo_is_patched() -> None:
    name = "qwen2.5-coder-1.5b-instruct"
    need(name)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ensure_cached(name)))
    text = tok.apply_chat_template(ASK, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert '{"name": <function-name>, "arguments": <args-json-object>}' in text
    assert "{{" not in text

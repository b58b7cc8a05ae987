"""The transformers backend on the tiny random model: sampling records, batching, stopping,
prefix reuse, LoRA swap, templates. All in fp32, so exact comparisons hold."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import torch

from mcp_rl.errors import ModelError
from mcp_rl.models import SamplingParams, TokenModel, load_model, load_tiny
from mcp_rl.models.hf_backend import TransformersModel
from mcp_rl.models.hf_fast_decoder import FastDecoder
from mcp_rl.models.tiny import tiny_model

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a timezone.",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        },
    }
]


def prompt(model: TransformersModel, text: str = "What time is it in Tokyo?") -> list[int]:
    return model.encode(model.render([{"role": "user", "content": text}], TOOLS, True))


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def forward_logprobs(
    model: TransformersModel, prompt_ids: list[int], sample: list[int], temperature: float = 1.0
):
    """Log-probs of `sample` after `prompt_ids` from one plain forward pass."""
    ids = torch.tensor([prompt_ids + sample])
    with torch.no_grad():
        logits = model.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return torch.log_softmax(logits / temperature, -1).gather(1, torch.tensor(sample)[:, None])[:, 0]


@pytest.fixture
def tiny() -> TransformersModel:
    model = load_tiny(seed=0)
    yield model
    model.close()


def test_tiny_is_deterministic_fast_and_a_token_model() -> None:
    tiny_model(seed=0)  # first build trains the tokenizer
    t = time.perf_counter()
    a, tok = tiny_model(seed=0)
    assert time.perf_counter() - t < 2.0
    b, _ = tiny_model(seed=0)
    c, _ = tiny_model(seed=1)
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    model = load_model("tiny")
    assert isinstance(model, TokenModel)
    assert model.decode([model.eos_token_id]) == "<|im_end|>"
    assert model.decode([model.pad_token_id]) == "<|endoftext|>"
    assert tok.padding_side == "left"


def test_sampled_logprobs_match_a_forward_pass(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    for temperature in (1.0, 0.7):
        outs = run(tiny.generate(p, 3, SamplingParams(temperature=temperature, max_new_tokens=30, seed=1)))
        assert len(outs) == 3
        for c in outs:
            assert len(c.token_ids) == len(c.logprobs) > 0
            ref = forward_logprobs(tiny, p, c.token_ids, temperature)
            assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4), (c.logprobs[:5], ref[:5])
            assert c.text == tiny.completion_text(c.token_ids)
        assert len({tuple(c.token_ids) for c in outs}) > 1, "independent samples should differ"


def test_top_p_logprobs_are_of_the_renormalised_nucleus(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    (c,) = run(tiny.generate(p, 1, SamplingParams(temperature=1.0, top_p=0.5, max_new_tokens=20, seed=2)))
    full = forward_logprobs(tiny, p, c.token_ids)
    got = torch.tensor(c.logprobs)
    # Renormalising over a nucleus holding >= 50% of the mass raises each log-prob by at most log 2.
    assert (got >= full - 1e-5).all() and (got <= full + torch.log(torch.tensor(2.0)) + 1e-5).all()
    assert (got > full + 1e-4).any()


def test_seed_reproduces_and_greedy_matches_plain_generate(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    sp = SamplingParams(temperature=1.0, max_new_tokens=16, seed=7)
    a = run(tiny.generate(p, 4, sp))
    b = run(tiny.generate(p, 4, sp))
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    (g,) = run(tiny.generate(p, 1, GREEDY))
    with torch.no_grad():
        ref = tiny.model.generate(
            torch.tensor([p]),
            max_new_tokens=24,
            do_sample=False,
            eos_token_id=tiny.eos_token_id,
            pad_token_id=0,
        )
    assert g.token_ids == ref[0, len(p) :].tolist()[: len(g.token_ids)]


def test_concurrent_requests_batch_and_equal_unbatched(tiny: TransformersModel) -> None:
    prompts = [
        prompt(tiny, q) for q in ("What time is it?", "List the items.", "hi", "Convert 9:00 to UTC please")
    ]
    alone = [run(tiny.generate(p, 1, GREEDY))[0].token_ids for p in prompts]
    engine = tiny._get_engine()
    steps0 = engine.steps

    async def together():
        return await asyncio.gather(*(tiny.generate(p, 2, GREEDY) for p in prompts))

    batched = run(together())
    for solo, pair in zip(alone, batched, strict=True):
        assert [c.token_ids for c in pair] == [solo, solo]
    # 4 requests x 2 rows of 24 tokens shared decoding steps instead of running one after another.
    assert engine.steps - steps0 <= 2 * 24


def test_episodes_of_one_task_share_a_single_prefill(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    solo = run(tiny.generate(p, 1, GREEDY))[0]
    fresh = load_tiny(seed=0)
    try:
        engine = fresh._get_engine()

        async def episodes():
            return await asyncio.gather(*(fresh.generate(p, 1, GREEDY) for _ in range(6)))

        outs = run(episodes())
        assert all(o[0].token_ids == solo.token_ids for o in outs)
        assert all(
            torch.allclose(torch.tensor(o[0].logprobs), torch.tensor(solo.logprobs), atol=1e-5) for o in outs
        )
        # One pass over the prompt; the other five joined the batch at its last token.
        assert engine.prefill_tokens == len(p)
        assert engine.reused_tokens == 5 * (len(p) - 1)
    finally:
        fresh.close()


def test_stop_token_and_max_new_tokens(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    (free,) = run(tiny.generate(p, 1, SamplingParams(temperature=0.0, max_new_tokens=10)))
    assert free.finish_reason == "length" and len(free.token_ids) == 10
    # Make the 4th greedy token a stop token: generation must end there, stop token included.
    stop = free.token_ids[3]
    first = free.token_ids.index(stop)
    model = load_tiny(seed=0)
    model.stop_token_ids.add(stop)
    try:
        (c,) = run(model.generate(p, 1, SamplingParams(temperature=0.0, max_new_tokens=10)))
    finally:
        model.close()
    assert c.finish_reason == "stop"
    assert c.token_ids == free.token_ids[: first + 1]
    assert c.text == model.decode(free.token_ids[:first])


def test_prefix_cache_reuses_earlier_turns(tiny: TransformersModel) -> None:
    p = prompt(tiny)
    (first,) = run(tiny.generate(p, 1, GREEDY))
    follow = (
        p + first.token_ids + tiny.encode("\n<|im_start|>user\nand now?<|im_end|>\n<|im_start|>assistant\n")
    )
    engine = tiny._get_engine()
    reused0 = engine.reused_tokens
    (second,) = run(tiny.generate(follow, 1, GREEDY))
    assert engine.reused_tokens - reused0 >= len(p) + len(first.token_ids) - 1
    fresh = load_tiny(seed=0)
    try:
        (again,) = run(fresh.generate(follow, 1, GREEDY))
    finally:
        fresh.close()
    assert again.token_ids == second.token_ids


def test_fast_path_equals_fallback_generate() -> None:
    fast, slow = load_tiny(seed=3), load_tiny(seed=3, fast=False)
    try:
        assert fast.fast and not slow.fast
        p = prompt(fast)
        a = run(fast.generate(p, 2, GREEDY))
        b = run(slow.generate(p, 2, GREEDY))
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        assert torch.allclose(torch.tensor(a[0].logprobs), torch.tensor(b[0].logprobs), atol=1e-4)
    finally:
        fast.close()
        slow.close()


def test_lora_save_load_swap_and_disable(tmp_path: Path) -> None:
    model = load_tiny(seed=0)
    p = prompt(model)
    base = run(model.generate(p, 1, GREEDY))[0].token_ids
    model.attach_lora(r=4, alpha=8)
    assert run(model.generate(p, 1, GREEDY))[0].token_ids == base, "a fresh LoRA (B=0) changes nothing"
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.3)
    tuned = run(model.generate(p, 1, GREEDY))[0].token_ids
    assert tuned != base, "generation must follow in-place changes to the LoRA"
    with model.adapter_disabled():
        assert run(model.generate(p, 1, GREEDY))[0].token_ids == base
    assert run(model.generate(p, 1, GREEDY))[0].token_ids == tuned

    # Fast-path logits (LoRA merged) agree with the PEFT forward.
    decoder = FastDecoder(model.model, slots=1, max_context=512)
    with torch.no_grad():
        peft_logits = model.model(torch.tensor([p])).logits[0, -1].float()
    assert torch.allclose(decoder.prefill(0, p, 0), peft_logits, atol=1e-4)

    saved = model.save_adapter(tmp_path / "adapter")
    other = load_tiny(seed=0)
    other.load_adapter(saved)
    with torch.no_grad():
        assert torch.equal(other.model(torch.tensor([p])).logits, model.model(torch.tensor([p])).logits)
    assert run(other.generate(p, 1, GREEDY))[0].token_ids == tuned

    # Same-shaped adapter: values copied in place, so an optimizer's parameters stay valid.
    params = [id(x) for x in model.model.parameters() if x.requires_grad]
    with torch.no_grad():
        for name, param in model.model.named_parameters():
            if "lora_B" in name:
                param.zero_()
    assert run(model.generate(p, 1, GREEDY))[0].token_ids == base
    model.load_adapter(saved)
    assert [id(x) for x in model.model.parameters() if x.requires_grad] == params
    assert run(model.generate(p, 1, GREEDY))[0].token_ids == tuned
    assert all(x.requires_grad for n, x in model.model.named_parameters() if "lora_" in n)

    # A differently shaped adapter replaces the old one without reloading the base model.
    small = load_tiny(seed=0)
    small.attach_lora(r=2, alpha=4)
    small_dir = small.save_adapter(tmp_path / "small")
    base_weight = model.base_model.model.embed_tokens.weight
    model.load_adapter(small_dir)
    assert model.base_model.model.embed_tokens.weight is base_weight
    assert run(model.generate(p, 1, GREEDY))[0].token_ids == base
    for m in (model, other, small):
        m.close()


def test_optimizer_step_is_seen_by_generation() -> None:
    model = load_tiny(seed=0)
    model.attach_lora(r=4, alpha=8)
    p = prompt(model)
    before = run(model.generate(p, 1, GREEDY))[0].token_ids
    params = [x for x in model.model.parameters() if x.requires_grad]
    opt = torch.optim.AdamW(params, lr=0.5)
    loss = model.model(torch.tensor([p])).logits[0, -1, before[0]]  # push the first token down
    loss.backward()
    opt.step()
    after = run(model.generate(p, 1, GREEDY))
    ref = forward_logprobs(model, p, after[0].token_ids)
    assert torch.allclose(torch.tensor(after[0].logprobs), ref, atol=1e-4)
    model.close()


def test_template_without_tools_gets_them_in_the_system_message() -> None:
    model, tok = tiny_model(seed=0)
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    plain = TransformersModel(model, tok, name="no-tools-template")
    assert not plain.template_has_tools and load_tiny().template_has_tools
    msgs = [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}],
        },
        {"role": "tool", "content": "12:00"},
    ]
    text = plain.render(msgs, TOOLS, True)
    assert text.startswith("<|im_start|>system\n# Tools")
    assert '{"name": "get_time", "description": "Current time in a timezone."' in text
    assert '{"name": "get_time", "arguments": {"tz": "UTC"}}' in text  # the earlier call, as JSON text
    assert text.endswith("<|im_start|>assistant\n")


def test_clear_errors_for_impossible_requests(tiny: TransformersModel) -> None:
    with pytest.raises(ModelError, match="context"):
        run(tiny.generate([1] * (tiny.max_context + 5), 1, GREEDY))
    with pytest.raises(ModelError, match="slots"):
        run(tiny.generate([1, 2, 3], tiny.max_batch + 1, GREEDY))
    with pytest.raises(ModelError, match="outside the vocabulary"):
        run(tiny.generate([1, 10**6], 1, GREEDY))
    # The engine is still healthy afterwards.
    assert run(tiny.generate(prompt(tiny), 1, GREEDY))[0].token_ids


def test_a_failing_step_fails_its_callers_and_the_engine_recovers(tiny: TransformersModel) -> None:
    engine = tiny._get_engine()
    real = engine.decoder.prefill
    engine.decoder.prefill = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))
    try:
        with pytest.raises(ModelError, match="boom"):
            run(tiny.generate(prompt(tiny), 2, GREEDY))
    finally:
        engine.decoder.prefill = real
    assert all(not s.busy for s in engine.slots)
    assert len(run(tiny.generate(prompt(tiny), 2, GREEDY))) == 2


def test_cancelled_generation_does_not_wedge_the_engine(tiny: TransformersModel) -> None:
    p = prompt(tiny)

    async def go():
        task = asyncio.create_task(tiny.generate(p, 2, SamplingParams(max_new_tokens=2000)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await asyncio.wait_for(tiny.generate(p, 1, GREEDY), timeout=30)

    assert run(go())[0].token_ids


def test_event_loop_keeps_running_during_generation(tiny: TransformersModel) -> None:
    p = prompt(tiny)

    async def go():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        t = asyncio.create_task(ticker())
        await tiny.generate(p, 8, SamplingParams(max_new_tokens=200, seed=0))
        t.cancel()
        return ticks

    assert run(go()) > 5


def test_local_directory_loads_through_the_registry(tmp_path: Path) -> None:
    model, tok = tiny_model(seed=5)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    loaded = load_model(str(tmp_path / "m"), dtype=torch.float32)
    ref = load_tiny(seed=5)
    try:
        p = prompt(ref)
        assert run(loaded.generate(p, 1, GREEDY))[0].token_ids == run(ref.generate(p, 1, GREEDY))[0].token_ids
    finally:
        loaded.close()
        ref.close()


def test_dropped_model_stops_its_worker_thread() -> None:
    import gc

    model = load_tiny(seed=0)
    run(model.generate(prompt(model), 1, GREEDY))
    thread = model._engine._thread
    assert thread.is_alive()
    del model
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_fast_decoder_matches_the_transformers_forward() -> None:
    model, _ = tiny_model(seed=2)
    torch.manual_seed(0)
    seq = torch.randint(0, 500, (120,)).tolist()
    with torch.no_grad():
        ref = model(torch.tensor([seq])).logits[0].float()
    dec = FastDecoder(model, slots=4, max_context=512, initial_capacity=16)  # forces cache growth
    assert torch.allclose(dec.prefill(3, seq[:100], 0, chunk=32), ref[99], atol=1e-4)  # chunked
    dec.copy_prefix(3, 1, 100)
    dec.copy_prefix(3, 2, 50)
    for pos in range(100, 110):
        # Slots 1 and 3 continue the sequence; slot 2 is at another length: rows are independent,
        # and the slots are not adjacent (the gather path).
        out = dec.decode([1, 2, 3], [seq[pos], seq[50 + pos - 100], seq[pos]], [pos, 50 + pos - 100, pos])
        assert torch.allclose(out[0], ref[pos], atol=1e-4) and torch.allclose(out[2], ref[pos], atol=1e-4)
        assert torch.allclose(out[1], ref[50 + pos - 100], atol=1e-4)


def test_the_fused_weights_are_the_plain_models_own_memory_and_a_lora_keeps_its_base() -> None:
    model, _ = tiny_model(seed=2)
    seq = torch.randint(0, 500, (40,), generator=torch.Generator().manual_seed(0)).tolist()
    with torch.no_grad():
        ref = model(torch.tensor([seq])).logits[0].float()
    dec = FastDecoder(model, slots=1, max_context=128)
    first = model.model.layers[0]
    # one copy: q|k|v and gate|up are rows of the fused weights, and the module forward is unchanged
    q_rows = first.self_attn.q_proj.weight.shape[0]
    assert first.self_attn.k_proj.weight.data_ptr() == dec.layers[0].w_qkv[q_rows:].data_ptr()
    assert first.mlp.gate_proj.weight.data_ptr() == dec.layers[0].w_gu.data_ptr()
    with torch.no_grad():
        assert torch.allclose(model(torch.tensor([seq])).logits[0].float(), ref, atol=1e-5)
    # a LoRA's layer keeps its own base weight: the fused one has the adapter merged in
    m = load_tiny(seed=0)
    m.attach_lora(r=4, alpha=8)
    run(m.generate(prompt(m), 1, GREEDY))
    lm = m.model.get_base_model()
    q = lm.model.layers[0].self_attn.q_proj
    fused = m._engine.decoder.layers[0].w_qkv  # type: ignore[union-attr]
    assert q.get_base_layer().weight.data_ptr() != fused.data_ptr()
    m.close()

"""Token masks with real models: the ids at sampled positions are exactly what the model sampled,
and rendering the finished conversation through the chat template gives back the text of the ids.

The tiny random model runs everywhere in seconds; the real default policy is marked `models`.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from mcp_rl.models.base import Completion, SamplingParams
from mcp_rl.rollout import RolloutConfig, SessionPool, run_group, verify_trace
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.trajectory import Trajectory
from tests.conftest import INVENTORY

pytestmark = pytest.mark.timeout(600)


class Spy:
    """Wraps a real model, records every completion it returns; optionally scripts the first turn
    (a fake reply) so that the real model then samples after a real tool result."""

    def __init__(self, model: Any, first_reply: str | None = None) -> None:
        self.model = model
        self.first_reply = first_reply
        self.name = model.name
        self.eos_token_id = model.eos_token_id
        self.pad_token_id = model.pad_token_id
        self.samples: list[Completion] = []

    def render(self, messages, tools, add_generation_prompt):
        return self.model.render(messages, tools, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.model.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.model.decode(ids)

    async def generate(self, prompt_ids: list[int], n: int, sampling: SamplingParams) -> list[Completion]:
        if self.first_reply is not None and self.decode(prompt_ids).count("<|im_start|>assistant") == 1:
            ids = [*self.encode(self.first_reply), self.eos_token_id]
            out = [Completion(text=self.first_reply, token_ids=ids, logprobs=[0.0] * len(ids))] * n
        else:
            out = await self.model.generate(prompt_ids, n, sampling)
        self.samples.extend(out)
        return out

    async def chat(self, *a: Any, **k: Any) -> list[Completion]:
        raise NotImplementedError


def run(model: Any, n: int, **cfg: Any) -> list[Trajectory]:
    async def main() -> list[Trajectory]:
        async with SessionPool(ServerSpec.parse(INVENTORY), size=n) as pool:
            return await run_group(
                model, pool, "How many units of ITM-001 are in stock?", n=n, config=RolloutConfig(**cfg)
            )

    return anyio.run(main)


def assert_masks(spy: Spy, trajs: list[Trajectory]) -> None:
    sampled_all = []
    for t in trajs:
        problems = verify_trace(spy, t.messages, t.metadata["tools"], t.token_ids, t.sampled_mask)
        assert problems == [], problems
        assert len(t.token_ids) == len(t.sampled_mask) == len(t.logprobs)
        sampled = [i for i, m in zip(t.token_ids, t.sampled_mask, strict=True) if m]
        assert len(sampled) == t.num_sampled_tokens > 0
        sampled_all.append(sampled)
        # The ids of the first turn's prompt are the template's rendering of system + user.
        first = spy.encode(spy.render(t.messages[:2], t.metadata["tools"], True))
        assert t.token_ids[: len(first)] == first and not any(t.sampled_mask[: len(first)])
        # Log-probs are where the mask is: real samples have negative or zero log-probs.
        assert all(lp <= 0.0 for lp in t.logprobs)
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.sampled_mask, strict=True) if not m)
    # Every completion the model returned is in some trajectory, unchanged, at masked positions.
    # (A sample that stopped on the pad token has the template's end-of-turn token there instead.)
    flat = [i for s in sampled_all for i in s]
    for c in spy.samples:
        ids = list(c.token_ids)
        if c.finish_reason == "stop" and ids and ids[-1] == spy.pad_token_id:
            ids[-1] = spy.eos_token_id
        assert _contains(flat, ids), "a sampled completion is missing from the masked ids"


def _contains(seq: list[int], sub: list[int]) -> bool:
    if not sub:
        return True
    return any(seq[i : i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


@pytest.fixture(scope="module")
def tiny() -> Any:
    from mcp_rl.models.registry import load_model

    return load_model("tiny")


def test_tiny_model_masks(tiny: Any) -> None:
    spy = Spy(tiny)
    trajs = run(spy, n=3, max_turns=2, max_new_tokens=24, seed=1)
    assert len(trajs) == 3
    assert_masks(spy, trajs)


def test_tiny_model_masks_after_a_real_tool_result(tiny: Any) -> None:
    # Turn 1 is a scripted call; turn 2 is sampled by the real (random) model after the result.
    spy = Spy(tiny, first_reply=json.dumps({"name": "get_item", "arguments": {"item_id": "ITM-001"}}))
    trajs = run(spy, n=2, max_turns=2, max_new_tokens=16, seed=2)
    for t in trajs:
        assert t.tool_calls[0].status.value == "ok" and t.turns == 2
        assert "<tool_response>" in spy.decode(t.token_ids)
    assert_masks(spy, trajs)
    # 16 tokens of noise rarely end with eos: the cut turns get the template's end token, masked.
    assert any(c.finish_reason == "length" for c in spy.samples)


def test_a_stop_on_the_pad_token_is_trained_as_the_end_of_the_turn(tiny: Any) -> None:
    """Qwen models sometimes stop on <|endoftext|> instead of <|im_end|>. That decision must stay in
    the trace as a sampled token (it used to be dropped, so stopping never got a gradient), and the
    trace must still be exactly what the template renders."""
    from mcp_rl.rollout.tokens import TokenTrace

    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "How many?"}]
    trace = TokenTrace(tiny, None)
    trace.extend_to(messages, add_generation_prompt=True)
    body = tiny.encode("There are 3.")
    ids = [*body, tiny.pad_token_id]
    lps = [-0.5] * len(ids)
    content = trace.add_sample(Completion(text="There are 3.", token_ids=ids, logprobs=lps, finish_reason="stop"))
    assert content == "There are 3."
    assert trace.token_ids[-1] == tiny.eos_token_id != tiny.pad_token_id
    assert trace.sampled_mask[-len(ids) :] == [1] * len(ids)  # the stop is a sampled token
    messages.append({"role": "assistant", "content": content})
    trace.extend_to(messages, add_generation_prompt=False)
    assert verify_trace(tiny, messages, None, trace.token_ids, trace.sampled_mask) == []


@pytest.mark.models
@pytest.mark.slow
def test_default_model_masks_on_the_inventory_server() -> None:
    from mcp_rl.models.registry import load_model

    spy = Spy(load_model("qwen2.5-coder-0.5b-instruct"))
    trajs = run(spy, n=2, max_turns=3, max_new_tokens=96, temperature=0.7, seed=0)
    assert len(trajs) == 2
    assert_masks(spy, trajs)
    # The 0.5B model calls a tool for this task (FIELD_NOTES: it always does).
    assert any(t.tool_calls for t in trajs)

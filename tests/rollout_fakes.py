"""A scripted fake TokenModel for agent-loop tests that need exact model outputs.

Only the sampling is fake: it renders and tokenizes with a real tokenizer and chat template (the
tiny model's byte-level BPE and Qwen-shaped template), so the token bookkeeping it drives is the
real thing. The reply to a prompt is chosen by how many assistant turns the prompt already holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from mcp_rl.models.base import Completion, Message, SamplingParams
from mcp_rl.models.tiny import tiny_tokenizer

Script = list[str] | Callable[[str, int], str]


class FakeScriptedModel:
    """`replies[k]` is the text sampled for the (k+1)-th assistant turn of every episode.

    A reply longer than `max_new_tokens` is cut and finishes with 'length', as a real model would.
    Each sampled token gets log-prob -0.5 so tests can tell sampled positions apart.
    """

    name = "fake-scripted"

    def __init__(self, replies: Script, delay_s: float = 0.0) -> None:
        self.tok = tiny_tokenizer()
        self.replies = replies
        self.delay_s = delay_s
        self.eos_token_id = self.tok.eos_token_id
        self.pad_token_id = self.tok.pad_token_id
        self.prompts: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def render(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        return self.tok.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _reply(self, prompt: str) -> str:
        turn = prompt.count("<|im_start|>assistant") - 1
        if callable(self.replies):
            return self.replies(prompt, turn)
        return self.replies[min(turn, len(self.replies) - 1)]

    async def generate(self, prompt_ids: list[int], n: int, sampling: SamplingParams) -> list[Completion]:
        prompt = self.decode(prompt_ids)
        self.prompts.append(prompt)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await anyio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        out = []
        for _ in range(n):
            ids = [*self.encode(self._reply(prompt)), self.eos_token_id]
            finish = "stop"
            if len(ids) > sampling.max_new_tokens:
                ids, finish = ids[: sampling.max_new_tokens], "length"
            body = ids[:-1] if finish == "stop" else ids
            out.append(
                Completion(
                    text=self.decode(body), token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason=finish
                )
            )
        return out

    async def chat(
        self, messages: list[Message], tools: Any = None, n: int = 1, sampling: Any = None
    ) -> list[Completion]:
        ids = self.encode(self.render(messages, tools, True))
        return await self.generate(ids, n, sampling or SamplingParams())

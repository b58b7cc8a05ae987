"""The one model interface every backend implements.

A backend turns chat messages (+ tool definitions) into n sampled completions. Backends that
run the weights themselves (transformers, later vLLM) also expose token ids and log-probs so the
trainer can compute policy-gradient losses on exactly what was sampled; API backends leave those empty.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

FinishReason = Literal["stop", "length"]


class SamplingParams(BaseModel):
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = None


class Completion(BaseModel):
    """One sample. For token backends, `token_ids` are the sampled ids (the stop token included when
    the model produced it) and `logprobs[i]` is the sampling log-prob of `token_ids[i]`."""

    text: str
    token_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    finish_reason: FinishReason = "stop"


Message = dict[str, Any]
"""An OpenAI-style chat message: {"role": ..., "content": ...} (+ "tool_call_id"/"name" for tool results)."""


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a conversation, n times."""

    name: str

    async def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[Completion]: ...


@runtime_checkable
class TokenModel(ChatModel, Protocol):
    """A ChatModel whose weights run here: it renders prompts to token ids and samples from ids.

    The agent loop builds each episode's token sequence incrementally (previous ids + the ids of
    the newly rendered suffix) and samples from ids, so the ids the trainer sees are exactly the
    ones that were sampled, never a re-tokenisation of decoded text.
    """

    eos_token_id: int
    pad_token_id: int

    def render(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        """The chat template applied to messages (tools in the template if it supports them,
        else described in the system message)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Tokenize rendered chat text (special tokens recognized, none added)."""
        ...

    def decode(self, ids: list[int]) -> str: ...

    async def generate(self, prompt_ids: list[int], n: int, sampling: SamplingParams) -> list[Completion]:
        """Sample n completions of a prompt given as ids. Concurrent calls are batched together."""
        ...


@runtime_checkable
class GenerationEngine(Protocol):
    """What a token backend hands its sampling to: the continuous-batching engine
    (`hf_batch_engine.BatchEngine`, the fast path) or the plain-`generate` fallback
    (`hf_generate_fallback.GenerateEngine`). `submit` returns a future of the completions and a
    handle for `cancel`."""

    def submit(self, prompt: list[int], n: int, sampling: SamplingParams) -> tuple[Any, Any]: ...

    def cancel(self, req: Any) -> None: ...

    def clear_cache(self) -> None:
        """Forget cached prefixes (after the weights changed)."""
        ...

    def close(self, wait: bool = True) -> None: ...


@runtime_checkable
class TrainablePolicy(TokenModel, Protocol):
    """A TokenModel the trainer can put a LoRA on, switch off, save and restore (the transformers
    backend is one). `model` is the (PEFT-wrapped) torch module GRPO differentiates."""

    model: Any

    def attach_lora(
        self, r: int = 16, alpha: int = 32, target_modules: str | list[str] = "all-linear", dropout: float = 0.0
    ) -> None: ...

    def adapter_disabled(self) -> AbstractContextManager[None]:
        """The base model, adapter off, inside the block."""
        ...

    def save_adapter(self, directory: str | os.PathLike[str]) -> Path: ...

    def load_adapter(self, directory: str | os.PathLike[str]) -> None: ...

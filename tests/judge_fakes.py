"""A fake judge for tests: a ChatModel that answers from a script instead of a model.

It exists to exercise the parser and the repair loop on every kind of malformed output, which a real
model produces only by chance. It is a fake and named as one; it never stands in for a real judge
outside tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from mcp_rl.models.base import Completion, Message, SamplingParams

Step = str | BaseException | None | Callable[[list[Message]], str]


class FakeScriptedJudge:
    """Answers call k with `script[k]` (the last entry repeats):
    a string -> that text; an exception -> raised; None -> no completion at all;
    a callable -> called with the messages, returns the text."""

    def __init__(
        self, script: Sequence[Step], name: str = "fake-scripted-judge", delay_s: float = 0.0
    ) -> None:
        if not script:
            raise ValueError("a scripted judge needs at least one step")
        self.name = name
        self.cost_free = True  # never priced as an API model
        self.script = list(script)
        self.delay_s = delay_s
        self.calls: list[list[Message]] = []
        self.sampling: list[SamplingParams | None] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[Completion]:
        step = self.script[min(len(self.calls), len(self.script) - 1)]
        self.calls.append([dict(m) for m in messages])
        self.sampling.append(sampling)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await anyio.sleep(self.delay_s)
            if isinstance(step, BaseException):
                raise step
            if step is None:
                return []
            text = step(messages) if callable(step) else step
            return [Completion(text=text) for _ in range(n)]
        finally:
            self.in_flight -= 1

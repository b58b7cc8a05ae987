"""One agent turn, written once for training episodes (`loop.run_episode`) and `mcp-rl chat`.

A turn: fit the next reply into the context, generate it, parse it (`toolcalls`), run its calls
(`execute.run_calls`, so the session's ToolPolicy applies), restart the server after a crash
(at most `max_restarts` times per conversation), and append the assistant message and one `tool`
message per call. A reply with no call attempt is the answer and ends nothing by itself: the
caller decides what an answer, a full context or a lost server means for it.

Token models generate from a `TokenTrace` (the ids the model saw, never re-derived from text);
other models get the messages and the tools through `chat`, and the assistant message carries
OpenAI-style `tool_calls`, which API models need to accept the tool messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_rl.errors import McpRlError
from mcp_rl.models.base import ChatModel, Completion, Message, SamplingParams, TokenModel
from mcp_rl.rollout.execute import run_calls
from mcp_rl.rollout.pool import PooledSession
from mcp_rl.rollout.tokens import TokenTrace
from mcp_rl.servers.results import CallStatus
from mcp_rl.toolcalls import ParsedCall, parse_message
from mcp_rl.trajectory import ToolCallRecord

RESTART_NOTE = "\n(The server was restarted: changes made before the crash are lost.)"


class TurnLimits(Protocol):
    """The settings a turn reads (`RolloutConfig` has them all)."""

    max_new_tokens: int
    max_context_tokens: int
    min_new_tokens: int
    max_calls_per_turn: int
    max_restarts: int


@dataclass
class Turn:
    """What one turn did."""

    content: str
    """The assistant message as it went into the conversation."""
    completion: Completion
    calls: list[ToolCallRecord]
    """One record per call attempt; empty when the message is the answer."""
    final: bool
    """No call attempt: the message is the answer."""
    server_lost: bool
    """The server crashed and could not be restarted."""
    generate_s: float
    tools_s: float


def api_tool_calls(calls: list[ParsedCall], ids: list[str]) -> list[dict[str, Any]]:
    """OpenAI-style `tool_calls` for API models, which need them to accept the tool messages."""
    return [
        {
            "id": cid,
            "type": "function",
            "function": {"name": c.name or "invalid", "arguments": json.dumps(c.arguments or {})},
        }
        for c, cid in zip(calls, ids, strict=True)
    ]


class Agent:
    """A model working one live session, one turn at a time. Counts the turns and the server
    restarts of one conversation (an episode, or a whole chat)."""

    def __init__(
        self,
        model: ChatModel,
        ps: PooledSession,
        limits: TurnLimits,
        on_call: Callable[[ToolCallRecord], None] | None = None,
    ) -> None:
        self.model = model
        self.ps = ps
        self.limits = limits
        self.on_call = on_call
        self.tools = [t.openai() for t in ps.session.tools]
        self.tool_names = [t.name for t in ps.session.tools]
        self.turns = 0
        """Assistant messages generated so far."""
        self.restarts = 0
        # The model's own window (positions it can attend to) caps the configured budget.
        self.context_limit = min(
            limits.max_context_tokens, getattr(model, "max_context", None) or limits.max_context_tokens
        )

    def _room(self, messages: list[Message], trace: TokenTrace) -> int | None:
        """Put the generation prompt on `trace`; the tokens left for the reply, or None (and the
        prompt taken off again) when fewer than `min_new_tokens` are left."""
        trace.extend_to(messages, add_generation_prompt=False)
        before_prompt = trace.mark()
        trace.extend_to(messages, add_generation_prompt=True)
        room = self.context_limit - len(trace)
        if room < self.limits.min_new_tokens:
            trace.rewind(before_prompt)  # the conversation ends where it stands
            return None
        return room

    async def turn(
        self,
        messages: list[Message],
        sampling: Callable[[int], SamplingParams],
        trace: TokenTrace | None = None,
        record_turn: int | None = None,
    ) -> Turn | None:
        """Take one turn on `messages` (appended to in place); None when the context is full.

        `sampling(max_new_tokens)` gives the sampling for this turn (it may read `self.turns`,
        the turns before this one). `trace` is required for a TokenModel. `record_turn` numbers
        the call records (default: this conversation's turn count)."""
        max_new = self.limits.max_new_tokens
        if trace is not None:
            room = self._room(messages, trace)
            if room is None:
                return None
            max_new = min(max_new, room)
        params = sampling(max_new)
        g0 = time.monotonic()
        if trace is not None:
            assert isinstance(self.model, TokenModel)
            (completion,) = await self.model.generate(trace.token_ids, 1, params)
            content = trace.add_sample(completion)
        else:
            (completion,) = await self.model.chat(messages, self.tools, 1, params)
            content = completion.text
        generate_s = time.monotonic() - g0
        self.turns += 1
        assistant: Message = {"role": "assistant", "content": content}
        messages.append(assistant)
        parsed = parse_message(content, self.tool_names)
        if parsed.is_final:
            return Turn(content, completion, [], True, False, generate_s, 0.0)

        ids = [f"call_{self.turns}_{k}" for k in range(len(parsed.calls))]
        if trace is None:
            assistant["tool_calls"] = api_tool_calls(parsed.calls, ids)
        seen_generation = self.ps.generation
        c0 = time.monotonic()
        turn = self.turns if record_turn is None else record_turn
        new = await run_calls(self.ps, parsed.calls, turn, self.limits.max_calls_per_turn)
        tools_s = time.monotonic() - c0
        crashed = any(r.status is CallStatus.CRASH for r in new)
        restarted = crashed and await self._restart(seen_generation)
        for rec, cid in zip(new, ids, strict=True):
            if rec.status is CallStatus.CRASH and restarted:
                rec.result_text += RESTART_NOTE
            messages.append(
                {"role": "tool", "tool_call_id": cid, "name": rec.name, "content": rec.result_text}
            )
            if self.on_call is not None:
                self.on_call(rec)
        return Turn(content, completion, new, False, crashed and not restarted, generate_s, tools_s)

    async def _restart(self, seen_generation: int) -> bool:
        """Restart the server after a crash, if restarts are left; whether it is back."""
        if self.restarts >= self.limits.max_restarts:
            return False
        try:
            await self.ps.restart_after_crash(seen_generation)
        except McpRlError:
            return False
        self.restarts += 1
        return True

"""A conversation with a model working a live MCP server: the training agent loop, kept open.

Each user message runs turns exactly as an episode does in training (`mcp_rl.rollout`): the model
sees the same system prompt and tool list, its replies are parsed by the same parser, calls are
checked and run by the same code (`rollout.execute.run_calls`, with the session's ToolPolicy, so
excluded tools stay excluded), and results come back as `tool` messages. A reply with no tool call
is the answer; the conversation is kept for the next user message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from mcp_rl.errors import McpRlError
from mcp_rl.models.base import ChatModel, Message, SamplingParams, TokenModel
from mcp_rl.prompts import system_prompt
from mcp_rl.rollout.execute import run_calls
from mcp_rl.rollout.loop import RolloutConfig, api_tool_calls
from mcp_rl.rollout.pool import PooledSession
from mcp_rl.servers.results import CallStatus
from mcp_rl.servers.session import ServerSession
from mcp_rl.toolcalls import parse_message
from mcp_rl.trajectory import ToolCallRecord


class Reply(BaseModel):
    """What one user message led to."""

    answer: str | None
    """None when the turn limit or the context ended the exchange first."""
    calls: list[ToolCallRecord] = []
    end: str = "answer"
    """answer | max_turns | context | server_error"""
    truncated: bool = False
    """The answer was cut by the per-message token limit."""


def chat_system_prompt(session: ServerSession, recorded: dict[str, Any] | None = None) -> tuple[str, bool]:
    """The system prompt for this server, and whether it is the one the run recorded in training.

    The recorded prompt is used when the live server is the one the run trained on; otherwise the
    prompt is built the way training builds it, from the live server's name and instructions."""
    recorded = recorded or {}
    text = str(recorded.get("system_prompt") or "")
    if text and recorded.get("server_name", session.server_name) == session.server_name:
        return text, True
    return system_prompt(session.server_name, session.instructions), False


class Chat:
    """`await chat.send(text)` for each user message; `chat.messages` is the whole conversation."""

    def __init__(
        self,
        model: ChatModel,
        session: ServerSession,
        system: str,
        config: RolloutConfig | None = None,
        on_call: Callable[[ToolCallRecord], None] | None = None,
    ) -> None:
        self.model = model
        self.ps = PooledSession(session)
        self.config = config or RolloutConfig(temperature=0.0)
        self.on_call = on_call
        self.tools = [t.openai() for t in session.tools]
        self.tool_names = [t.name for t in session.tools]
        self.system = system
        self.messages: list[Message] = []
        self.reset()
        self._turns = 0
        self._restarts = 0

    def reset(self) -> None:
        """Forget the conversation (the server's state is not touched)."""
        self.messages = [{"role": "system", "content": self.system}]

    def _sampling(self, max_new: int) -> SamplingParams:
        c = self.config
        seed = None if c.seed is None else (c.seed + self._turns) % 2**31
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, max_new_tokens=max_new, seed=seed)

    async def _generate(self) -> tuple[str, str] | None:
        """(text, finish_reason) of the next assistant message; None when the context is full."""
        c = self.config
        if isinstance(self.model, TokenModel):
            prompt = self.model.encode(self.model.render(self.messages, self.tools, True))
            limit = min(
                c.max_context_tokens, getattr(self.model, "max_context", None) or c.max_context_tokens
            )
            room = limit - len(prompt)
            if room < c.min_new_tokens:
                return None
            (out,) = await self.model.generate(prompt, 1, self._sampling(min(c.max_new_tokens, room)))
        else:
            (out,) = await self.model.chat(self.messages, self.tools, 1, self._sampling(c.max_new_tokens))
        self._turns += 1
        return out.text, out.finish_reason

    async def send(self, text: str) -> Reply:
        self.messages.append({"role": "user", "content": text})
        records: list[ToolCallRecord] = []
        for turn in range(1, self.config.max_turns + 1):
            generated = await self._generate()
            if generated is None:
                return Reply(answer=None, calls=records, end="context")
            content, finish = generated
            assistant: Message = {"role": "assistant", "content": content}
            self.messages.append(assistant)
            parsed = parse_message(content, self.tool_names)
            if parsed.is_final:
                return Reply(answer=content.strip(), calls=records, truncated=finish == "length")
            ids = [f"call_{self._turns}_{k}" for k in range(len(parsed.calls))]
            if not isinstance(self.model, TokenModel):
                assistant["tool_calls"] = api_tool_calls(parsed.calls, ids)
            seen = self.ps.generation
            new = await run_calls(self.ps, parsed.calls, turn, self.config.max_calls_per_turn)
            crashed = any(r.status is CallStatus.CRASH for r in new)
            restarted = False
            if crashed and self._restarts < self.config.max_restarts:
                try:
                    await self.ps.restart_after_crash(seen)
                    self._restarts += 1
                    restarted = True
                except McpRlError:
                    restarted = False
            for rec, cid in zip(new, ids, strict=True):
                if rec.status is CallStatus.CRASH and restarted:
                    rec.result_text += "\n(The server was restarted: changes made before the crash are lost.)"
                self.messages.append(
                    {"role": "tool", "tool_call_id": cid, "name": rec.name, "content": rec.result_text}
                )
                if self.on_call is not None:
                    self.on_call(rec)
            records.extend(new)
            if crashed and not restarted:
                return Reply(answer=None, calls=records, end="server_error")
        return Reply(answer=None, calls=records, end="max_turns")

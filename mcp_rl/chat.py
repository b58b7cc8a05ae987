"""A conversation with a model working a live MCP server: the training agent loop, kept open.

Each user message runs turns of the same `rollout.turn.Agent` an episode runs in training: the model
sees the same system prompt and tool list, its replies are parsed by the same parser, calls are
checked and run by the same code (with the session's ToolPolicy, so excluded tools stay excluded),
the server is restarted after a crash the same way, and results come back as `tool` messages. A reply with no tool call
is the answer; the conversation is kept for the next user message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from mcp_rl.models.base import ChatModel, Message, SamplingParams, TokenModel
from mcp_rl.policy_prompt import system_prompt
from mcp_rl.rollout.loop import RolloutConfig
from mcp_rl.rollout.pool import PooledSession
from mcp_rl.rollout.tokens import TokenTrace
from mcp_rl.rollout.turn import Agent
from mcp_rl.servers.session import ServerSession
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
        self.config = config or RolloutConfig(temperature=0.0)
        # One agent for the whole chat: its turns number the calls and its restarts are counted
        # across messages, as an episode's are.
        self.agent = Agent(model, PooledSession(session), self.config, on_call)
        self.tools = self.agent.tools
        self.tool_names = self.agent.tool_names
        self.system = system
        self.messages: list[Message] = []
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (the server's state is not touched)."""
        self.messages = [{"role": "system", "content": self.system}]

    def _sampling(self, max_new: int) -> SamplingParams:
        c = self.config
        seed = None if c.seed is None else (c.seed + self.agent.turns) % 2**31
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, max_new_tokens=max_new, seed=seed)

    async def send(self, text: str) -> Reply:
        self.messages.append({"role": "user", "content": text})
        records: list[ToolCallRecord] = []
        for turn in range(1, self.config.max_turns + 1):
            # The conversation is rendered whole each turn (a fresh trace): nothing is trained on
            # a chat, so a template that rewrites earlier turns, or a /reset, is fine here.
            trace = TokenTrace(self.model, self.tools) if isinstance(self.model, TokenModel) else None
            done = await self.agent.turn(self.messages, self._sampling, trace, record_turn=turn)
            if done is None:
                return Reply(answer=None, calls=records, end="context")
            if done.final:
                truncated = done.completion.finish_reason == "length"
                return Reply(answer=done.content.strip(), calls=records, truncated=truncated)
            records.extend(done.calls)
            if done.server_lost:
                return Reply(answer=None, calls=records, end="server_error")
        return Reply(answer=None, calls=records, end="max_turns")

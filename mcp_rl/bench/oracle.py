"""The oracle: a model that replays BFCL's ground-truth calls through the same MCP path a policy
takes (its replies are parsed, validated against the served schemas and run on the live server).

It reads where the conversation stands from the messages alone: the user turn is the number of
user messages so far, and the step within it the number of assistant messages since the last one.
Each ground-truth call goes out as its own message, in order (a `cd` must land before the `mv`
after it), in Qwen's native `<tool_call>` form; after the turn's last call it answers "Done."
"""

from __future__ import annotations

import json
from typing import Any

from mcp_rl.bench.bfcl_data import BfclEntry
from mcp_rl.bench.bfcl_server import positional_names, tool_schemas
from mcp_rl.bench.calls import parse_call
from mcp_rl.models.base import Completion, Message, SamplingParams


class OracleModel:
    """A ChatModel for one entry (`chat` only: it has no tokens)."""

    name = "oracle"

    def __init__(self, entry: BfclEntry) -> None:
        owner = {t["name"]: t["class"] for t in tool_schemas(entry.involved_classes)}
        self.turns = [
            [parse_call(c, lambda m: positional_names(owner[m], m)) for c in turn] for turn in entry.ground_truth
        ]

    def reply(self, messages: list[Message]) -> str:
        turn = sum(1 for m in messages if m.get("role") == "user") - 1
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        step = sum(1 for m in messages[last_user:] if m.get("role") == "assistant")
        calls = self.turns[turn] if 0 <= turn < len(self.turns) else []
        if step >= len(calls):
            return "Done."
        name, arguments = calls[step]
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    async def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[Completion]:
        text = self.reply(messages)
        return [Completion(text=text) for _ in range(n)]

    def steps_needed(self) -> int:
        """Assistant messages the longest turn needs (its calls, then the answer)."""
        return max((len(t) for t in self.turns), default=0) + 1

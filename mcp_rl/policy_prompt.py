"""The opening messages of an episode: a system prompt naming the server and the answer
convention, then the task as the user's message. Tool definitions are not written here: they go
through the model's chat template (`TokenModel.render(..., tools)`), which places them the way
the model was trained to read them.

Answer convention: a message with no tool call is the final answer. We chose this over an extra
`complete_task` tool because it is what every OpenAI-compatible client treats as the answer (a
trained adapter then works unchanged behind any such client), it needs no tool the server does not
have, and a small model that never learned the extra tool would otherwise loop until the turn limit.
"""

from __future__ import annotations

from typing import Any

_MAX_INSTRUCTIONS = 1500

ANSWER_CONVENTION = (
    "A reply with no tool call is the final answer; a reply with tool calls gets their results back "
    "as tool messages, and the episode goes on."
)


def system_prompt(server_name: str = "", instructions: str | None = None) -> str:
    who = f'the "{server_name}" server' if server_name else "an MCP server"
    parts = [f"You complete the user's task by calling the tools of {who}."]
    if instructions and instructions.strip():
        text = instructions.strip()
        if len(text) > _MAX_INSTRUCTIONS:
            text = text[:_MAX_INSTRUCTIONS] + " ..."
        parts.append(f"About the server: {text}")
    parts.append(
        "Call a tool whenever you need information or an action; each result comes back to you. "
        "Use only the tools listed, with arguments that match their parameters. When you have what "
        "you need, reply with the final answer in plain text and no tool call: that reply ends the task."
    )
    return "\n\n".join(parts)


def opening_messages(
    task: str, server_name: str = "", instructions: str | None = None
) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": system_prompt(server_name, instructions)},
        {"role": "user", "content": task},
    ]

"""Turn trajectories into the text a judge reads.

The messages every trajectory of a group shares (system prompt, the user's task) are rendered
once as context; each trajectory then shows only what comes after them, so a group of N costs
one copy of the prefix instead of N. The shared run stops at the first message the policy wrote,
so each trajectory always shows all of its own actions.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_rl.trajectory import Trajectory


def message_text(msg: dict[str, Any]) -> str:
    """The readable text of an OpenAI-style message (string content or a list of parts)."""
    content = msg.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(str(p.get("text", f"[{p.get('type', 'part')}]")))
            else:
                parts.append(str(p))
        return "\n".join(parts)
    return str(content)


def clip(text: str, budget: int) -> str:
    """Keep the head of long text (tool outputs can be huge) and say how much was cut."""
    if budget <= 0 or len(text) <= budget:
        return text
    return text[:budget] + f" ...[{len(text) - budget} more characters cut]"


def _canon(msg: dict[str, Any]) -> str:
    return json.dumps({"role": msg.get("role"), "content": message_text(msg)}, sort_keys=True)


def shared_prefix_len(trajectories: list[Trajectory]) -> int:
    """Number of leading messages identical in every trajectory, stopping before any policy turn."""
    if not trajectories:
        return 0
    n = 0
    first = trajectories[0].messages
    while n < len(first):
        msg = first[n]
        if msg.get("role") in ("assistant", "tool"):
            break
        if any(len(t.messages) <= n or _canon(t.messages[n]) != _canon(msg) for t in trajectories[1:]):
            break
        n += 1
    return n


def _render_call(call: dict[str, Any]) -> str:
    fn = call.get("function", call)
    args = fn.get("arguments", "")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{fn.get('name', '?')}({args})"


def _compact(text: str) -> str:
    """Pretty-printed JSON results cost the judge many tokens for nothing: print them on one line."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            return json.dumps(json.loads(stripped), ensure_ascii=False)
        except ValueError:
            pass
    return stripped


def render_message(msg: dict[str, Any], budget: int) -> str:
    role = msg.get("role", "?")
    text = clip(_compact(message_text(msg)), budget)
    if role == "tool":
        name = msg.get("name") or "tool"
        return f"[tool result from {name}] {text}"
    if role == "assistant":
        lines = [f"[assistant] {text}"] if text else []
        lines += [f"[assistant calls] {_render_call(c)}" for c in msg.get("tool_calls") or []]
        return "\n".join(lines) or "[assistant] (empty)"
    return f"[{role}] {text}"


def render_context(messages: list[dict[str, Any]], budget: int, task_text: str = "") -> str:
    """The shared start; a user message that is just the task says so instead of repeating it."""
    lines = []
    for m in messages:
        if task_text and m.get("role") == "user" and message_text(m).strip() == task_text.strip():
            lines.append("[user] (the task above)")
        else:
            lines.append(render_message(m, budget))
    return "\n".join(lines)


def render_trajectory(traj: Trajectory, skip: int, budget: int) -> str:
    """What a judge sees of one trajectory: its own messages (after the shared `skip`), then how it ended."""
    own = traj.messages[skip:]
    answer = traj.final_answer.strip() if traj.final_answer else ""
    last = own[-1] if own else None
    if (
        last
        and last.get("role") == "assistant"
        and not last.get("tool_calls")
        and message_text(last).strip() == answer
    ):
        own = own[:-1]  # shown once, below, as the final answer
    lines = [render_message(m, budget) for m in own]
    if not traj.messages and traj.tool_calls:
        # Hand-made or older records with no message log: show the calls themselves.
        for c in traj.tool_calls:
            lines.append(f"[assistant calls] {c.name}({json.dumps(c.arguments, ensure_ascii=False)})")
            lines.append(f"[tool result from {c.name}] ({c.status}) {clip(c.result_text, budget)}")
    invalid = sum(1 for c in traj.tool_calls if not c.valid)
    errors = sum(1 for c in traj.tool_calls if c.valid and c.status != "ok")
    lines.append(
        f"(episode ended: {traj.end}; {len(traj.tool_calls)} tool calls, {invalid} invalid, {errors} failed)"
    )
    lines.append(f"FINAL ANSWER: {clip(answer, budget)}" if answer else "FINAL ANSWER: (none given)")
    return "\n".join(lines)


def render_tools(tools: list[dict[str, Any]] | None) -> str:
    """One line per tool: name(params): description. Accepts OpenAI tool dicts or ToolSpec dumps."""
    if not tools:
        return ""
    lines = []
    for t in tools:
        fn = t.get("function", t)
        params = fn.get("parameters") or fn.get("input_schema") or {}
        names = ", ".join((params.get("properties") or {}).keys())
        desc = " ".join(str(fn.get("description", "")).split())[:200]
        lines.append(f"- {fn.get('name', '?')}({names}): {desc}")
    return "\n".join(lines)

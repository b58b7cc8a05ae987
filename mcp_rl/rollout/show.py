"""Print trajectories for people: each turn, each call with its outcome, the final answer."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mcp_rl.servers.results import CallStatus
from mcp_rl.trajectory import ToolCallRecord, Trajectory

_STATUS_STYLE = {
    CallStatus.OK: "green",
    CallStatus.INVALID: "magenta",
    CallStatus.TOOL_ERROR: "yellow",
    CallStatus.PROTOCOL_ERROR: "yellow",
    CallStatus.TIMEOUT: "red",
    CallStatus.CRASH: "bold red",
}
_END_STYLE = {
    "answer": "green",
    "max_turns": "yellow",
    "context": "yellow",
    "server_error": "red",
    "error": "red",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clip(text: str, limit: int) -> str:
    # Control characters (random or cut-off samples hold some) would garble the terminal.
    text = _CONTROL.sub("?", text.strip())
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more chars]"


def _call_line(rec: ToolCallRecord) -> Text:
    args = json.dumps(rec.arguments, ensure_ascii=False) if rec.arguments is not None else "?"
    line = Text("  -> ", style="dim")
    line.append(f"{rec.name or '(no name)'}", style="bold cyan")
    line.append(f"({_clip(args, 200)})")
    line.append(f"  [{rec.status.value}]", style=_STATUS_STYLE.get(rec.status, "white"))
    if rec.valid:
        line.append(f" {rec.latency_s * 1000:.0f} ms", style="dim")
    return line


def trajectory_panel(t: Trajectory, index: int | None = None, max_chars: int = 600) -> Panel:
    """One episode: assistant turns in order, the calls each made, what came back."""
    parts: list[Any] = []
    by_turn: dict[int, list[ToolCallRecord]] = {}
    for rec in t.tool_calls:
        by_turn.setdefault(rec.turn, []).append(rec)
    turn = 0
    for m in t.messages:
        if m.get("role") != "assistant":
            continue
        turn += 1
        header = Text(f"turn {turn}", style="bold")
        parts.append(header)
        content = m.get("content") or ""
        calls = by_turn.get(turn, [])
        if calls:
            parts.append(Text(_clip(content, max_chars), style="dim"))
            for rec in calls:
                parts.append(_call_line(rec))
                style = "" if rec.status is CallStatus.OK else _STATUS_STYLE.get(rec.status, "")
                parts.append(
                    Text("     " + _clip(rec.result_text, max_chars).replace("\n", "\n     "), style=style)
                )
        else:
            label = (
                "final answer (cut at the token limit): "
                if t.metadata.get("answer_truncated")
                else "final answer: "
            )
            parts.append(Text(label, style="bold green") + Text(_clip(content, max_chars * 2)))
    if not parts:
        parts.append(Text("(no turns)", style="dim"))
    if t.metadata.get("error"):
        parts.append(Text(f"error: {t.metadata['error']}", style="red"))
    invalid = sum(not r.valid for r in t.tool_calls)
    title = f"episode {index}" if index is not None else t.id
    subtitle = (
        f"end: [{_END_STYLE.get(t.end, 'white')}]{t.end}[/]  turns {t.turns}  calls {len(t.tool_calls)}"
        f" ({invalid} invalid)  sampled tokens {t.num_sampled_tokens}  {t.timings.get('total_s', 0.0):.1f} s"
    )
    return Panel(Group(*parts), title=title, subtitle=subtitle, title_align="left", subtitle_align="left")


def summary_table(trajs: list[Trajectory]) -> Table:
    table = Table(title="Episodes", show_lines=False)
    for col in ("#", "end", "turns", "calls ok/invalid/failed", "answer"):
        table.add_column(col, overflow="fold")
    for k, t in enumerate(trajs):
        ok = sum(r.status is CallStatus.OK for r in t.tool_calls)
        invalid = sum(not r.valid for r in t.tool_calls)
        failed = len(t.tool_calls) - ok - invalid
        answer = _clip(t.final_answer or "-", 120)
        table.add_row(
            str(k),
            f"[{_END_STYLE.get(t.end, 'white')}]{t.end}[/]",
            str(t.turns),
            f"{ok}/{invalid}/{failed}",
            answer,
        )
    return table


def print_trajectories(console: Console, trajs: list[Trajectory]) -> None:
    if trajs:
        console.print(Panel(trajs[0].task_text, title="task", title_align="left"))
    for k, t in enumerate(trajs):
        console.print(trajectory_panel(t, k))
    if len(trajs) > 1:
        console.print(summary_table(trajs))

"""Checks every candidate task passes before it is kept; each failure has a short reason for the report."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError

from mcp_rl.task import Task
from scenario_gen.dedup import Similarity, near_duplicates
from scenario_gen.language import matches_language

MIN_CHARS = 12
MAX_CHARS = 1200

# "Use the get_item tool to ...", "by calling `filter_items`", "(tool: search_items)"
_LEAD_INS = r"(?:(?:please\s+)?(?:use|using|call|calling|with|via|through|run|running|invoke|by\s+calling)\s+(?:the\s+)?)"
_TAILS = r"(?:\s+(?:tool|function|endpoint|api|command))?"


def distinctive(name: str) -> bool:
    """A tool name a user would never write by accident: snake_case, kebab-case or camelCase.
    A tool called `search` is not leaked by the word "search"."""
    return bool(re.search(r"[_\-.]|[a-z][A-Z]", name))


def leaked_names(text: str, tool_names: list[str]) -> list[str]:
    found = []
    for name in tool_names:
        if not distinctive(name):
            continue
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            found.append(name)
    return found


def strip_tool_mentions(text: str, names: list[str]) -> str:
    """Remove phrases like "using the get_item tool" around leaked names; what remains may still name them."""
    out = text
    for name in names:
        n = re.escape(name)
        # "Use the X tool to list ..." -> "List ..."
        out = re.sub(
            rf"(^|(?<=[.!?]\s)){_LEAD_INS}`?{n}`?{_TAILS}\s+(?:to|and)\s+", r"\1", out, flags=re.IGNORECASE
        )
        out = re.sub(rf"\s*[,(]?\s*{_LEAD_INS}`?{n}`?{_TAILS}\s*[,)]?", " ", out, flags=re.IGNORECASE)
        out = re.sub(rf"\s*\((?:tool|function)?:?\s*`?{n}`?\)", "", out, flags=re.IGNORECASE)
    out = re.sub(r"\s{2,}", " ", out).strip()
    out = re.sub(r"\s+([?.!,])", r"\1", out)
    out = re.sub(r"([.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), out)
    return out[:1].upper() + out[1:] if out else out


@dataclass
class Verdict:
    kept: list[Task] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    """A few dropped texts per reason, for the report."""

    def drop(self, reason: str, text: str) -> None:
        self.dropped[reason] += 1
        bucket = self.examples.setdefault(reason, [])
        if len(bucket) < 3:
            bucket.append(text[:160])


def check_task(task: Task, tool_names: list[str], language: str) -> str | None:
    """Why a task must be dropped (None when it passes). Leaked tool names are handled separately."""
    try:
        Task.model_validate(task.model_dump())
    except ValidationError as e:
        return f"schema: {e.errors()[0].get('msg', 'invalid')}"
    text = task.text.strip()
    if len(text) < MIN_CHARS:
        return "empty or too short"
    if len(text) > MAX_CHARS:
        return "too long"
    if not re.search(r"[^\W\d_]{2,}", text):
        return "no words"
    if not matches_language(text, language):
        return "wrong language"
    unknown = [t for t in task.tools_expected if t not in tool_names]
    if unknown and task.source == "grounded":
        return "references an unknown tool"
    if task.source == "grounded" and not (task.reference_calls and task.reference_answer):
        return "grounded without reference"
    return None


def drop_near_duplicates(
    tasks: list[Task], verdict: Verdict, similarity: Similarity | None = None
) -> list[Task]:
    """Keep the first of each group of near-duplicates (callers put preferred tasks first). Two grounded
    tasks with the same calls and the same answer are duplicates whatever their wording."""
    keyed: dict[tuple[str, str], int] = {}
    survivors: list[Task] = []
    for t in tasks:
        if t.source == "grounded" and t.reference_calls:
            key = (
                repr([(c.tool, sorted(c.arguments.items())) for c in t.reference_calls]),
                t.reference_answer or "",
            )
            if key in keyed:
                verdict.drop("duplicate", t.text)
                continue
            keyed[key] = len(survivors)
        survivors.append(t)
    dupes = near_duplicates([t.text for t in survivors], similarity)
    kept = []
    for i, t in enumerate(survivors):
        if i in dupes:
            verdict.drop("duplicate", t.text)
        else:
            kept.append(t)
    return kept

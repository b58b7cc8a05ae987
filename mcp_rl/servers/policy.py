"""Which tools the model may use: allow/deny globs, and each tool's class (`tool_class.classify`).

- read: always used;
- write: used (training resets the server between episodes) unless the server annotated it
  destructive, which takes --allow-destructive as before;
- irreversible (delete, purge, send, transfer, shell ...): off unless --allow-tools names it (a
  pattern with more than wildcards in it), or --allow-destructive and the server itself annotated
  it destructive. Either way a warning is logged, once per tool.
"""

from __future__ import annotations

import fnmatch
import logging

from pydantic import BaseModel, Field

from mcp_rl.servers.tool_class import classify
from mcp_rl.servers.tools import ToolSpec

log = logging.getLogger("mcp_rl.servers.policy")
_warned: set[str] = set()
"""Warnings already logged in this process: a pool opens many sessions on one server."""


def _names(pattern: str, name: str) -> bool:
    """Whether a glob the user wrote names this tool: it matches and is more than wildcards
    (`delete_*` names delete_item; `*` names nothing)."""
    literal = pattern.replace("*", "").replace("?", "").strip("[]!")
    return bool(literal) and fnmatch.fnmatchcase(name, pattern)


class ToolPolicy(BaseModel):
    allow: list[str] = Field(default_factory=list)
    """Glob patterns; when given, only matching tools are used."""
    deny: list[str] = Field(default_factory=list)
    allow_destructive: bool = False
    resettable: bool = False
    """The server has a reset command, so what a write changes is undone between episodes. Set by
    `ServerSession` from its spec; a stdio restart is not enough (file- and database-backed servers
    keep their state across restarts)."""

    def named(self, tool: ToolSpec) -> bool:
        """Whether --allow-tools names this tool (not just matches it with `*`)."""
        return any(_names(p, tool.name) for p in self.allow)

    def decide(self, tool: ToolSpec) -> str | None:
        """None when the tool may be used, else the reason it is excluded."""
        name = tool.name
        if any(fnmatch.fnmatchcase(name, p) for p in self.deny):
            return "denied by --deny-tools"
        if self.allow and not any(fnmatch.fnmatchcase(name, p) for p in self.allow):
            return "not matched by --allow-tools"
        cls = classify(tool)
        if cls.kind == "read" or self.named(tool):
            return None
        annotated = tool.annotations.is_destructive
        if annotated and self.allow_destructive:
            return None
        if cls.kind == "irreversible":
            how = (
                "pass --allow-destructive or name it in --allow-tools"
                if annotated
                else "name it in --allow-tools"
            )
            return f"irreversible: {cls.reason} ({how} to include it)"
        if annotated:
            return f"annotated destructive: {cls.reason} (use --allow-destructive to include it)"
        if tool.annotations.destructive is not False and not (self.allow_destructive or self.resettable):
            # The spec's default for a tool that does not say otherwise: its writes may not be additive.
            return (
                f"may write, and no annotation says the write is harmless: {cls.reason} (give the server a "
                "resetCommand, or pass --allow-destructive, to include it)"
            )
        return None

    def warning(self, tool: ToolSpec) -> str | None:
        """What to tell the user about a tool this policy lets through: irreversible ones only."""
        if self.decide(tool) is not None:
            return None
        cls = classify(tool)
        if cls.kind != "irreversible":
            return None
        why = "--allow-tools names it" if self.named(tool) else "--allow-destructive is on"
        return (
            f"tool {tool.name!r} is used though irreversible, because {why} ({cls.reason}): "
            "training calls it many times, and no reset undoes it"
        )

    def split(self, tools: list[ToolSpec]) -> tuple[list[ToolSpec], dict[str, str]]:
        """The tools used, and {name: reason} for the rest; logs each irreversible tool let through."""
        allowed, excluded = [], {}
        for t in tools:
            reason = self.decide(t)
            if reason is None:
                allowed.append(t)
                if (w := self.warning(t)) and w not in _warned:
                    _warned.add(w)
                    log.warning(w)
            else:
                excluded[t.name] = reason
        return allowed, excluded

"""Which tools the model may use: allow/deny globs, and destructive tools off unless allowed."""

from __future__ import annotations

import fnmatch
import re

from pydantic import BaseModel, Field

from mcp_rl.servers.tools import ToolSpec

# Most servers send no annotations. A tool with no destructiveHint whose name says it destroys things is
# treated as destructive: training calls tools thousands of times, so err on the safe side.
_DESTRUCTIVE_NAME = re.compile(
    r"(^|[_\-.])(delete|remove|drop|destroy|erase|purge|wipe|truncate|kill|terminate|rm|unlink|reset|overwrite)"
    r"([_\-.]|$)",
    re.IGNORECASE,
)


class ToolPolicy(BaseModel):
    allow: list[str] = Field(default_factory=list)
    """Glob patterns; when given, only matching tools are used."""
    deny: list[str] = Field(default_factory=list)
    allow_destructive: bool = False

    def decide(self, tool: ToolSpec) -> str | None:
        """None when the tool may be used, else the reason it is excluded."""
        name = tool.name
        if any(fnmatch.fnmatchcase(name, p) for p in self.deny):
            return "denied by --deny-tools"
        if self.allow and not any(fnmatch.fnmatchcase(name, p) for p in self.allow):
            return "not matched by --allow-tools"
        if not self.allow_destructive:
            if tool.annotations.is_destructive:
                return "annotated destructive (use --allow-destructive to include)"
            a = tool.annotations
            if a.destructive is None and not a.read_only and _DESTRUCTIVE_NAME.search(name):
                return "name suggests a destructive tool and no annotation says otherwise (use --allow-destructive)"
        return None

    def split(self, tools: list[ToolSpec]) -> tuple[list[ToolSpec], dict[str, str]]:
        allowed, excluded = [], {}
        for t in tools:
            reason = self.decide(t)
            if reason is None:
                allowed.append(t)
            else:
                excluded[t.name] = reason
        return allowed, excluded

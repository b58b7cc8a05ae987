"""Written tasks: an LLM reads the tools and writes requests a user would make.

Requests come in small batches (a 1.5B local model keeps a short JSON list right far more often than a
long one), each batch steered towards the tools least covered so far and written in a different style.
Earlier requests are deliberately not shown: a small model copies what it is shown, so repeats are
removed afterwards by the near-duplicate filter instead. A batch that yields too few usable items is
followed by another that asks for the rest; a reply that cannot be parsed is retried with the reason.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.structured import ask_items
from mcp_rl.task import Task
from scenario_gen import writer_prompts

_WORD_DIFFICULTY = {
    "trivial": 1,
    "easy": 1,
    "simple": 1,
    "medium": 3,
    "moderate": 3,
    "hard": 4,
    "difficult": 4,
    "expert": 5,
}
_TEXT_KEYS = ("task", "text", "request", "question", "prompt", "query", "user_request", "description")
_TOOL_KEYS = ("tools", "tools_expected", "tool", "tools_used", "expected_tools")


_METADATA = re.compile(
    r"\s*([\(\[]?\s*(difficulty|tools?)\s*[:=][^)\]]*[\)\]]?|[\(\[](easy|medium|hard|difficult|simple)[\)\]])\s*$",
    re.IGNORECASE,
)


class WrittenItem(BaseModel):
    """One task as the writer returns it. Lenient about names and shapes, strict about content."""

    task: str = Field(min_length=1)
    difficulty: int = Field(default=2, ge=1, le=5)
    tools: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"task": v}
        if not isinstance(v, dict):
            return v
        out = dict(v)
        if "task" not in out or not isinstance(out.get("task"), str):
            text = next((out[k] for k in _TEXT_KEYS if isinstance(out.get(k), str) and out[k].strip()), None)
            if text is not None:
                out["task"] = text
        tools = next((out[k] for k in _TOOL_KEYS if k in out), [])
        out["tools"] = [tools] if isinstance(tools, str) else tools
        return out

    @field_validator("difficulty", mode="before")
    @classmethod
    def _difficulty(cls, v: Any) -> Any:
        if isinstance(v, str):
            s = v.strip().lower()
            if s in _WORD_DIFFICULTY:
                return _WORD_DIFFICULTY[s]
            digits = "".join(c for c in s if c.isdigit())[:1]
            return int(digits) if digits else 2
        if isinstance(v, float):
            v = round(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return min(5, max(1, v))
        return 2

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return []
        return [str(x.get("name", "")) if isinstance(x, dict) else str(x) for x in v if x]

    @field_validator("task")
    @classmethod
    def _task(cls, v: str) -> str:
        # the item's own metadata copied into its text: "... (Difficulty: 2, Tools: None)"
        v = _METADATA.sub("", v)
        v = v.strip().strip('"').strip()
        if len(v) < 8:
            raise ValueError("the task text is empty or too short")
        return v


def task_id(text: str, prefix: str = "w") -> str:
    return f"{prefix}-" + hashlib.sha1(text.strip().lower().encode()).hexdigest()[:12]


class WriterStats(BaseModel):
    calls: int = 0
    items: int = 0
    problems: list[str] = []


class TaskWriter:
    def __init__(
        self,
        model: ChatModel,
        tools: list[ToolSpec],
        *,
        instructions: str = "",
        server_instructions: str = "",
        resources: list[str] | None = None,
        known_values: dict[str, list[str]] | None = None,
        language: str = "en",
        seed: int = 0,
        batch_size: int = 5,
        tokens_per_task: int = 70,
    ) -> None:
        self.model = model
        self.tools = tools
        self.tool_names = [t.name for t in tools]
        self.instructions = instructions
        self.server_instructions = server_instructions
        self.resources = resources or []
        self.known_values = known_values or {}
        self.language = language
        self.seed = seed
        self.rng = random.Random(seed)
        self.batch_size = batch_size
        self.tokens_per_task = tokens_per_task
        self.coverage: Counter[str] = Counter()
        self._pending: Counter[str] = Counter()
        self.stats = WriterStats()
        self._round = 0

    def _focus(self) -> list[str]:
        """The least covered tools (ties broken at random) for the next batch to aim at."""
        names = list(self.tool_names)
        self.rng.shuffle(names)
        names.sort(key=lambda n: self.coverage[n] + self._pending[n])
        focus = names[: max(1, min(3, len(names)))]
        # batches written at the same time aim at different tools
        self._pending.update(focus)
        return focus

    async def write(self, count: int, on_batch: Callable[[list[Task]], None] | None = None) -> list[Task]:
        """Up to `count` candidate tasks (not yet validated or de-duplicated); one batch per call."""
        out: list[Task] = []
        want = min(self.batch_size, count)
        difficulties = [self.rng.choice([1, 2, 2, 3, 3, 4, 5]) for _ in range(want)]
        focus = self._focus()
        styles = self.rng.sample(writer_prompts.REQUEST_STYLES, 2)
        messages = writer_prompts.written_tasks(
            self.tools, want, focus=focus, styles=styles, instructions=self.instructions,
            server_instructions=self.server_instructions, resources=self.resources,
            known_values=self.known_values, language=self.language, difficulties=difficulties,
        )  # fmt: skip
        sampling = SamplingParams(
            temperature=0.8,
            top_p=0.95,
            # room for the asked items and little more: a reply that rambles is cut early
            max_new_tokens=60 + self.tokens_per_task * want,
            seed=self.seed * 1000 + self._round,
        )
        self._round += 1
        got = await ask_items(
            self.model, messages, WrittenItem, want=want, attempts=3, sampling=sampling,
            format_hint="Form: " + writer_prompts.written_example(self.tools),
        )  # fmt: skip
        self._pending.subtract(focus)
        self.stats.calls += got.calls
        self.stats.problems += got.problems
        for item in got.items:
            tools = [t for t in item.tools if t in self.tool_names]
            self.coverage.update(tools)
            out.append(
                Task(
                    id=task_id(item.task),
                    text=item.task,
                    difficulty=item.difficulty,
                    source="written",
                    tools_expected=list(dict.fromkeys(tools)),
                    language=self.language,
                )
            )
        self.stats.items += len(out)
        if on_batch:
            on_batch(out)
        return out

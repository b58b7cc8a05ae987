"""Exploring a live server with real calls, to find facts that grounded tasks can ask about.

Rounds of calls: first tools that need nothing (or only values the schema itself suggests), then
tools that need ids and names the first results revealed, then LLM-proposed arguments for tools that
still never succeeded. Each step remembers which earlier steps supplied its argument values, so a
chain (search -> get by id) can be replayed as a grounded task's reference calls.

Safety: exploration sees only the tools the training policy allows, and uses the same class of
each (`mcp_rl.servers.classify`). Reads (lookups, computations) are explored freely. Writes are
explored only on a server that can be reset (a reset command, or a stdio server with
--allow-destructive); the server is reset before and after each write so no later result depends
on it. Irreversible tools are never explored. A crash, timeout or error costs a step, never the run.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, RootModel, model_validator

from mcp_rl.answer_rule import result_data
from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.servers.tool_class import classify
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.structured import ask_items
from scenario_gen import writer_prompts
from scenario_gen.argsynth import ArgProposal, schema_errors, synthesize
from scenario_gen.values import ValuePool, launch_paths


class ExplorableSession(Protocol):
    """What exploration needs from a server session (`mcp_rl.servers.ServerSession` fits)."""

    tools: list[ToolSpec]
    spec: Any

    async def call(self, name: str, arguments: Any = None) -> ToolResult: ...
    async def restart(self) -> None: ...
    async def reset(self) -> None: ...


@dataclass
class Step:
    index: int
    tool: str
    arguments: dict[str, Any]
    status: CallStatus
    result_text: str
    sources: list[int] = field(default_factory=list)
    origin: str = "schema"
    wrote: bool = False
    """The tool may change state: replaying it needs a reset first."""

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.OK


class ExploreStats(BaseModel):
    calls: int = 0
    ok: int = 0
    statuses: dict[str, int] = {}
    restarts: int = 0
    resets: int = 0
    llm_proposals: int = 0
    llm_proposals_used: int = 0
    invalid_proposals: int = 0
    """Proposals that broke the tool's schema (never sent)."""
    skipped_tools: dict[str, str] = {}
    """Tool -> why it was not explored (its class, or what went wrong on it)."""
    explored_tools: dict[str, str] = {}
    """Tool -> why it may be explored (its class's reason)."""
    aborted: str | None = None
    """Why exploration stopped early (the server could not be restarted), if it did."""


@dataclass
class ExploreResult:
    steps: list[Step]
    pool: ValuePool
    stats: ExploreStats

    def chain(self, step: Step, max_len: int = 3) -> list[Step]:
        """The steps that led to `step` (those whose results supplied its arguments), oldest first."""
        seen: dict[int, Step] = {step.index: step}
        frontier = [step]
        while frontier and len(seen) < max_len:
            nxt: list[Step] = []
            for s in frontier:
                for i in s.sources:
                    if i not in seen and len(seen) < max_len:
                        seen[i] = self.steps[i]
                        nxt.append(self.steps[i])
            frontier = nxt
        return [seen[i] for i in sorted(seen)]


class _Args(RootModel[dict[str, Any]]):
    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, v: Any) -> Any:
        # {"arguments": {...}} or {"name": ..., "arguments": {...}} -> the inner object
        if isinstance(v, dict) and isinstance(v.get("arguments"), dict) and len(v) <= 2:
            return v["arguments"]
        # {"param": "timezone", "value": "Asia/Tokyo"} -> {"timezone": "Asia/Tokyo"}
        if isinstance(v, dict) and set(v) == {"param", "value"} and isinstance(v["param"], str):
            return {v["param"]: v["value"]}
        return v


class Explorer:
    def __init__(
        self,
        session: ExplorableSession,
        *,
        model: ChatModel | None = None,
        allow_destructive: bool = False,
        max_calls: int = 60,
        per_tool: int = 6,
        seed: int = 0,
        on_step: Callable[[Step, ExploreStats], None] | None = None,
        instructions: str = "",
    ) -> None:
        """`instructions`: the user's word on what the server is for (`--instructions`); the LLM round
        reads it with the server's own instructions, to propose values the user cares about."""
        self.session = session
        self.instructions = instructions
        self.model = model
        self.allow_destructive = allow_destructive
        self.max_calls = max_calls
        self.per_tool = per_tool
        self.rng = random.Random(seed)
        self.seed = seed
        self.on_step = on_step
        self.steps: list[Step] = []
        self.pool = ValuePool()
        spec = getattr(session, "spec", None)
        if spec is not None and spec.transport == "stdio":
            self.pool.launch_paths = launch_paths(spec.command, spec.cwd)
        self.stats = ExploreStats()
        self._tried: set[tuple[str, str]] = set()
        self._per_tool: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._kinds_failed: dict[str, set[str]] = {}
        self._kinds_ok: dict[str, set[str]] = {}

    def _resettable(self) -> bool:
        """A reset command restores any server; restarting a stdio server only forgets what it
        held in memory, so that counts only with the user's --allow-destructive."""
        spec = self.session.spec
        if getattr(spec, "reset_command", None):
            return True
        return self.allow_destructive and getattr(spec, "transport", "") == "stdio"

    def _plan(self) -> tuple[list[ToolSpec], list[ToolSpec]]:
        reads, writes = [], []
        st = self.stats
        # tools the training policy excluded are never in session.tools; say why they are not explored
        for name, why in (getattr(self.session, "excluded", None) or {}).items():
            st.skipped_tools[name] = f"excluded from training: {why}"
        for t in self.session.tools:
            cls = classify(t)
            if cls.kind == "read":
                reads.append(t)
                st.explored_tools[t.name] = cls.reason
            elif cls.kind == "irreversible":
                st.skipped_tools[t.name] = f"never explored, irreversible: {cls.reason}"
            elif not self._resettable():
                how = "give a reset command"
                if not self.allow_destructive:
                    how += ", or --allow-destructive on stdio"
                st.skipped_tools[t.name] = f"writes, and the server cannot be reset ({how}): {cls.reason}"
            else:
                writes.append(t)
                st.explored_tools[t.name] = f"{cls.reason}; the server is reset around each call"
        return reads, writes

    def _budget_left(self) -> bool:
        return self.stats.calls < self.max_calls and self.stats.aborted is None

    @staticmethod
    def _key(tool: ToolSpec, proposal: ArgProposal) -> tuple[str, str]:
        return tool.name, repr(sorted(proposal.arguments.items(), key=lambda kv: kv[0]))

    async def _call(self, tool: ToolSpec, proposal: ArgProposal, wrote: bool = False) -> Step | None:
        key = self._key(tool, proposal)
        if key in self._tried or not self._budget_left() or tool.name in self.stats.skipped_tools:
            return None
        self._tried.add(key)
        if schema_errors(tool.input_schema, proposal.arguments):
            self.stats.invalid_proposals += 1
            return None  # the session would refuse it anyway: no call, no step
        self._per_tool[tool.name] += 1
        result = await self.session.call(tool.name, proposal.arguments)
        st = self.stats
        st.calls += 1
        st.statuses[result.status.value] = st.statuses.get(result.status.value, 0) + 1
        step = Step(
            len(self.steps), tool.name, proposal.arguments, result.status, result.text,
            proposal.sources, proposal.origin, wrote,
        )  # fmt: skip
        self.steps.append(step)
        kinds = self.pool.kinds_in(proposal.arguments)
        (self._kinds_ok if step.ok else self._kinds_failed).setdefault(tool.name, set()).update(kinds)
        if step.ok:
            st.ok += 1
            data = result_data(result.text)  # plain-text listings and records teach values too
            if data is not None and not wrote:
                self.pool.add_result(data, step.index, proposal.arguments, tool=tool.name)
            self.pool.add_accepted(proposal.arguments)
        else:
            self._failures[tool.name] += 1
            await self._after_failure(tool, result)
        if self.on_step:
            self.on_step(step, st)
        return step

    def _wrong_kind(self, tool: ToolSpec, proposal: ArgProposal) -> bool:
        """The proposal names an entry of a kind this tool has only failed on, while another kind is
        still untried or worked. Measured on the npm filesystem server (2026-12-05): of 57 calls, 22
        failed, 19 of them reading a directory or listing a file, and the file-reading tools never
        reached the CSV files one level down, so no task asked about a file's contents."""
        bad = self._kinds_failed.get(tool.name, set()) - self._kinds_ok.get(tool.name, set())
        return bool(bad & self.pool.kinds_in(proposal.arguments)) and not self.pool.kinds() <= bad

    async def _after_failure(self, tool: ToolSpec, result: ToolResult) -> None:
        if result.status is CallStatus.CRASH:
            crashes = sum(1 for s in self.steps if s.tool == tool.name and s.status is CallStatus.CRASH)
            if crashes >= 2:
                self.stats.skipped_tools[tool.name] = f"the server crashed {crashes} times on it"
            try:
                await self.session.restart()
                self.stats.restarts += 1
            except Exception as e:  # the server will not come back: keep what was found so far
                self.stats.aborted = (
                    f"the server crashed and could not be restarted: {str(e).splitlines()[0][:200]}"
                )
        elif result.status is CallStatus.TIMEOUT and self._failures[tool.name] >= 2:
            self.stats.skipped_tools[tool.name] = "timed out twice"

    async def _round(
        self, tools: list[ToolSpec], k: int, need_sources: bool, allow_weak: bool = False
    ) -> None:
        for tool in tools:
            if not self._budget_left():
                return
            room = self.per_tool - self._per_tool[tool.name]
            if room <= 0 or tool.name in self.stats.skipped_tools:
                continue
            if self._failures[tool.name] >= 2 and not any(s.ok for s in self.steps if s.tool == tool.name):
                continue  # the values tried so far do not fit it; leave it to the LLM round
            done = 0
            tried = sum(1 for s in self.steps if s.tool == tool.name)
            proposals = synthesize(
                tool.parameters, self.pool, self.rng, k=min(k, room) + tried + 2, context=tool.description or ""
            )
            for proposal in proposals:
                if done >= min(k, room) or self._key(tool, proposal) in self._tried:
                    continue
                if need_sources and not proposal.sources:
                    continue
                if proposal.weak and not allow_weak and not need_sources:
                    continue  # a made-up placeholder: tried last, after the LLM's proposals
                if self._wrong_kind(tool, proposal):
                    continue
                await self._call(tool, proposal)
                done += 1

    async def _llm_round(self, tools: list[ToolSpec]) -> None:
        if self.model is None:
            return
        for tool in tools:
            # tools with few successes get new values from the LLM (a model knows city names, time zones,
            # common words); tools with plenty from the schema and the pool do not need it
            if not self._budget_left() or sum(s.ok for s in self.steps if s.tool == tool.name) >= 3:
                continue
            if tool.name in self.stats.skipped_tools or not (tool.parameters.get("properties") or {}):
                continue
            messages = writer_prompts.propose_arguments(
                tool, self.pool.sample_names(8), self._recent_results(tool),
                server_instructions=getattr(self.session, "instructions", None) or "",
                instructions=self.instructions, results=self._other_results(tool),
            )  # fmt: skip

            def accept(item: _Args, tool: ToolSpec = tool) -> str | None:
                errs = schema_errors(tool.input_schema, item.root)
                return f"arguments break the schema: {errs[0]}" if errs else None

            got = await ask_items(
                self.model, messages, _Args, want=3, attempts=2, accept=accept,
                sampling=SamplingParams(temperature=0.7, max_new_tokens=300, seed=self.seed),
                format_hint="Form: " + writer_prompts.arguments_example(tool),
            )  # fmt: skip
            self.stats.llm_proposals += len(got.items)
            for item in got.items:
                sources = self._sources_of(item.root)
                step = await self._call(tool, ArgProposal(item.root, sources, "llm"))
                if step is not None and step.ok:
                    self.stats.llm_proposals_used += 1

    def _sources_of(self, arguments: dict[str, Any]) -> list[int]:
        """Earlier steps whose results held the string values these arguments use, at any depth (the
        names in `names: [...]`, the label of an object in a list)."""
        wanted: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, str):
                wanted.add(node)
            elif isinstance(node, dict):
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(arguments)
        out: set[int] = set()
        for vals in self.pool.by_key.values():
            out.update(s.step for s in vals if isinstance(s.value, str) and s.value in wanted)
        return sorted(out)[:2]

    def _other_results(self, tool: ToolSpec, limit: int = 4) -> list[str]:
        """A few OK results of other tools, so the model can propose values the server holds."""
        seen: set[str] = set()
        out: list[str] = []
        for s in self.steps:
            if s.ok and not s.wrote and s.tool != tool.name and s.tool not in seen:
                seen.add(s.tool)
                out.append(f"{s.tool}({s.arguments}) -> {s.result_text.strip()[:200]}")
        return out[:limit]

    def _recent_results(self, tool: ToolSpec) -> list[str]:
        return [
            f"{s.arguments} -> {s.status.value}: {s.result_text[:160]}"
            for s in self.steps
            if s.tool == tool.name
        ][-4:]

    async def _write_round(self, tools: list[ToolSpec]) -> None:
        for tool in tools:
            for proposal in synthesize(tool.parameters, self.pool, self.rng, k=2, context=tool.description or ""):
                if not self._budget_left():
                    return
                # Reset around every write: later reads and replays must see the original state.
                await self._reset()
                await self._call(tool, proposal, wrote=True)
        if tools:
            await self._reset()

    async def _reset(self) -> None:
        try:
            await self.session.reset()
            self.stats.resets += 1
        except Exception as e:
            self.stats.aborted = f"the server could not be reset: {str(e).splitlines()[0][:200]}"

    async def run(self) -> ExploreResult:
        reads, writes = self._plan()
        # a server of few tools gets more calls per tool from the same budget: the npm memory server's
        # three reads stopped at 6 each and 15 of 60 calls were spent (2026-12-07); half the budget
        # left after the writes' two calls each is shared among the reads
        if reads:
            spare = (self.max_calls - 2 * len(writes)) // (2 * len(reads))
            self.per_tool = max(self.per_tool, min(12, spare))
        # Tools needing no arguments first: their results feed the others.
        reads.sort(key=lambda t: len(t.parameters.get("required", []) or []))
        await self._round(reads, k=2, need_sources=False)
        for _ in range(3):
            await self._round(reads, k=2, need_sources=True)
        await self._llm_round(reads)
        await self._round(reads, k=2, need_sources=True)
        # more combinations of the schema's own values; placeholders only for tools with no success yet
        failing = [t for t in reads if not any(s.ok for s in self.steps if s.tool == t.name)]
        await self._round([t for t in reads if t not in failing], k=3, need_sources=False)
        await self._round(failing, k=1, need_sources=False, allow_weak=True)
        await self._write_round(writes)
        return ExploreResult(self.steps, self.pool, self.stats)

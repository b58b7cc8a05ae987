"""What a generation run produced and lost: counts, coverage, difficulty, drops and why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mcp_rl.task import Task
from scenario_gen.explorer import ExploreStats
from scenario_gen.split import SplitReport


class GenReport(BaseModel):
    requested: int = 0
    kept: int = 0
    grounded: int = 0
    written: int = 0
    train: int = 0
    val: int = 0
    test: int = 0
    state_dependent: int = 0
    candidates_written: int = 0
    candidates_grounded: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    drop_examples: dict[str, list[str]] = Field(default_factory=dict)
    rewritten: int = 0
    """Tasks that named a tool and were rewritten instead of dropped."""
    verification: dict[str, int] = Field(default_factory=dict)
    """Grounded tasks re-run before keeping: stable / changed (time or state) / failed."""
    self_contained: dict[str, int] = Field(default_factory=dict)
    """Written tasks through the self-contained check: checked / passed / unchecked (no readable verdict:
    kept); the rest were dropped, by reason in `dropped`."""
    coverage: dict[str, dict[str, int]] = Field(default_factory=dict)
    """tool -> {"written": n, "grounded": n}"""
    uncovered_tools: list[str] = Field(default_factory=list)
    difficulty: dict[int, int] = Field(default_factory=dict)
    exploration: ExploreStats = Field(default_factory=ExploreStats)
    llm_calls: int = 0
    llm_problems: dict[str, int] = Field(default_factory=dict)
    similarity: str = ""
    timings: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    split: SplitReport | None = None
    """How the split went: per split counts, components, the keys too common to identify a task."""
    chain_share: float | None = None
    """Of the grounded tasks, the share whose reference is a chain of 2 or more calls (None: none)."""
    grounded_tools: list[str] = Field(default_factory=list)
    """The tools some grounded task's reference calls use, in the server's order."""
    resumed: int = 0
    """Tasks taken from the journal of an earlier run of the same generation that stopped."""

    def drop(self, reason: str, n: int = 1, example: str | None = None) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n
        if example:
            ex = self.drop_examples.setdefault(reason, [])
            if len(ex) < 3:
                ex.append(example[:160])

    def drop_all(self, counts: Mapping[str, int], examples: Mapping[str, list[str]]) -> None:
        """Drops counted elsewhere (the grounded writer's), with their last few examples."""
        for reason, n in counts.items():
            self.drop(reason, n)
            for example in examples.get(reason, [])[-3:]:
                self.drop(reason, 0, example=example)

    def summarize(self, tasks: list[Task], tool_names: list[str]) -> None:
        self.kept = len(tasks)
        self.grounded = sum(t.source == "grounded" for t in tasks)
        self.written = self.kept - self.grounded
        self.train = sum(t.split == "train" for t in tasks)
        self.val = sum(t.split == "val" for t in tasks)
        self.test = sum(t.split == "test" for t in tasks)
        self.state_dependent = sum(t.answer_depends_on_state for t in tasks)
        cov: dict[str, Counter[str]] = {n: Counter() for n in tool_names}
        for t in tasks:
            for name in t.tools_expected:
                cov.setdefault(name, Counter())[t.source] += 1
        self.coverage = {n: {"written": c["written"], "grounded": c["grounded"]} for n, c in cov.items()}
        self.uncovered_tools = [n for n in tool_names if not sum(cov[n].values())]
        self.difficulty = dict(sorted(Counter(t.difficulty for t in tasks).items()))
        self.chain_share, self.grounded_tools = grounded_chains(tasks, tool_names)


def grounded_chains(tasks: list[Task], tool_names: list[str]) -> tuple[float | None, list[str]]:
    """(share of grounded tasks with 2+ reference calls, tools their reference calls cover)."""
    grounded = [t for t in tasks if t.source == "grounded"]
    used = {c.tool for t in grounded for c in t.reference_calls}
    share = sum(len(t.reference_calls) >= 2 for t in grounded) / len(grounded) if grounded else None
    return share, [n for n in tool_names if n in used] + sorted(used - set(tool_names))


def _problem_kind(problem: str) -> str:
    return problem.split(":")[0][:60]


def count_problems(problems: list[str]) -> dict[str, int]:
    return dict(Counter(_problem_kind(p) for p in problems).most_common(8))


def render(report: GenReport, console: Console) -> None:
    r = report
    head = Table(title="Task set", show_header=False, box=None, pad_edge=False)
    head.add_row("kept", f"{r.kept} of {r.requested} asked ({r.grounded} grounded, {r.written} written)")
    head.add_row("split", f"{r.train} train / {r.val} val / {r.test} test")
    if r.resumed:
        head.add_row("resumed", f"{r.resumed} tasks made by an earlier run that stopped (its journal)")
    if r.split is not None:
        s = r.split
        grounded = " / ".join(str(s.counts.get(k, {}).get("grounded", 0)) for k in ("train", "val", "test"))
        head.add_row(
            "split by",
            f"{s.components} groups sharing no call or entity (largest {s.largest_component}); "
            f"grounded {grounded}",
        )
        if s.ignored_keys:
            keys = ", ".join(f"{k} ({n})" for k, n in s.ignored_keys.items())
            head.add_row("too common to split by", escape(keys))  # a key may hold [...]
    if r.grounded:
        v = r.verification
        head.add_row(
            "grounded re-run",
            f"{v.get('stable', 0)} same answer, {v.get('changed', 0)} changed (time/state), "
            f"{v.get('failed', 0)} failed (dropped); {r.state_dependent} graded by re-running calls",
        )
    e = r.exploration
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(e.statuses.items()))
    head.add_row("exploration", f"{e.calls} calls ({statuses or 'none'}); restarts {e.restarts}")
    if e.aborted:
        head.add_row("[red]exploration stopped[/]", e.aborted)
    head.add_row("LLM", f"{r.llm_calls} calls" + (f"; problems: {r.llm_problems}" if r.llm_problems else ""))
    head.add_row("near-duplicates by", r.similarity or "-")
    if r.rewritten:
        head.add_row("rewritten", f"{r.rewritten} tasks named a tool and were reworded")
    if r.timings:
        head.add_row("time", ", ".join(f"{k} {v:.0f}s" for k, v in r.timings.items()))
    console.print(head)

    cov = Table(title="Tool coverage")
    cov.add_column("tool")
    cov.add_column("written", justify="right")
    cov.add_column("grounded", justify="right")
    for name, c in r.coverage.items():
        style = "red" if name in r.uncovered_tools else None
        cov.add_row(name, str(c["written"]), str(c["grounded"]), style=style)
    console.print(cov)

    hist = Table(title="Difficulty")
    hist.add_column("level", justify="right")
    hist.add_column("tasks", justify="right")
    hist.add_column("")
    top = max(r.difficulty.values(), default=1)
    for level in range(1, 6):
        n = r.difficulty.get(level, 0)
        hist.add_row(str(level), str(n), "█" * round(20 * n / top) if n else "")
    console.print(hist)

    if r.dropped:
        drops = Table(title="Dropped")
        drops.add_column("reason")
        drops.add_column("n", justify="right")
        drops.add_column("e.g.")
        for reason, n in sorted(r.dropped.items(), key=lambda kv: -kv[1]):
            drops.add_row(reason, str(n), (r.drop_examples.get(reason) or [""])[0])
        console.print(drops)
    if e.explored_tools or e.skipped_tools:
        # what exploration called and what it left alone, each with the reason (the tool's class)
        tools = Table(title="Exploration by tool")
        tools.add_column("tool")
        tools.add_column("explored")
        tools.add_column("why")
        for name, why in e.explored_tools.items():
            if name not in e.skipped_tools:
                tools.add_row(escape(name), "yes", escape(why))
        for name, why in e.skipped_tools.items():
            tools.add_row(
                escape(name), "stopped" if name in e.explored_tools else "no", escape(why), style="yellow"
            )
        console.print(tools)
    for w in r.warnings:
        console.print(f"[yellow]warning:[/] {w}")

"""The quality figures of a task set, printed at the end of `mcp-rl generate` and at the start of
`mcp-rl train` (a generated set, or one loaded from a file: the same figures, minus the drops).

    figures = quality_figures(tasks, allowed_tools, report)   # report: None for a loaded file
    for line in quality_lines(figures): print(line)

Grounded share: tasks with a reference answer from real calls, the only ones checked success can
grade. Chain share: tasks whose reference takes two calls or more. Self-contained share: written tasks
that passed the check of `scenario_gen.self_contained`, of all it checked. Tool coverage: tools some
task expects, of the tools allowed. Then the difficulty histogram, the solvability marks, and the
drops by reason. Below a grounded share of a third, a warning says what to do.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from mcp_rl.task import Task
from scenario_gen.gen_report import GenReport
from scenario_gen.self_contained import ABSENT_DATA, MODEL_SAYS, OWN_DATA, UNLISTED

GROUNDED_FLOOR = 1 / 3
"""Below this share of grounded tasks, checked success (the headline figure) rests on too few tasks."""

_SELF_CONTAINED_DROPS = (OWN_DATA, ABSENT_DATA, UNLISTED, MODEL_SAYS)


class QualityFigures(BaseModel):
    tasks: int = 0
    grounded: int = 0
    chained: int = 0
    """Tasks with two reference calls or more."""
    written: int = 0
    self_contained_checked: int | None = None
    """Written tasks the self-contained check saw (None: not checked, or not known for this file)."""
    self_contained_passed: int | None = None
    self_contained_unchecked: int = 0
    """Kept without a verdict: the model's reply could not be read."""
    tools_allowed: list[str] = Field(default_factory=list)
    tools_used: list[str] = Field(default_factory=list)
    difficulty: dict[int, int] = Field(default_factory=dict)
    solved: dict[str, int] = Field(default_factory=dict)
    """Solvability marks (`notes["solved"]`): always / sometimes / unknown; unattempted tasks absent."""
    dropped: dict[str, int] | None = None
    """Drops by reason; None for a loaded file (its drops were not recorded in it)."""
    not_explored: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)

    @property
    def grounded_share(self) -> float | None:
        return self.grounded / self.tasks if self.tasks else None

    @property
    def chain_share(self) -> float | None:
        return self.chained / self.tasks if self.tasks else None

    @property
    def self_contained_share(self) -> float | None:
        checked, passed = self.self_contained_checked, self.self_contained_passed
        return passed / checked if checked and passed is not None else None

    @property
    def coverage(self) -> float | None:
        return len(self.tools_used) / len(self.tools_allowed) if self.tools_allowed else None


def _self_contained(tasks: list[Task], report: GenReport | None) -> tuple[int | None, int | None, int]:
    """(checked, passed, unchecked): from the report when there is one, else from the tasks' marks."""
    if report is not None and report.self_contained.get("checked"):
        sc = report.self_contained
        checked = sc["checked"]
        dropped = sum(n for reason, n in report.dropped.items() if reason in _SELF_CONTAINED_DROPS)
        return checked, checked - dropped, sc.get("unchecked", 0)
    marks = [
        t.notes["self_contained"] for t in tasks if t.source == "written" and "self_contained" in t.notes
    ]
    if not marks:
        return None, None, 0
    return len(marks), len(marks), marks.count("unchecked")


def _floor_warning(f: QualityFigures) -> str | None:
    share = f.grounded_share
    if share is None or share >= GROUNDED_FLOOR:
        return None
    lines = [
        f"only {f.grounded} of {f.tasks} tasks ({share:.0%}) are grounded, below a third: checked success,"
        " the figure training is judged by, can only grade grounded tasks. To get more:",
        "  - steer the writer to what the server holds: --instructions 'questions about ...'",
        "  - allow the tools that read its data: --allow-tools NAME (repeatable globs)",
        '  - for tools that write, give a resettable server (a --config entry with "resetCommand")'
        " and --allow-destructive",
    ]
    if f.not_explored:
        lines.append("  - see why these tools were not explored: " + "; ".join(
            f"{k} ({v})" for k, v in list(f.not_explored.items())[:5]
        ))  # fmt: skip
    return "\n".join(lines)


def quality_figures(
    tasks: list[Task], allowed_tools: list[str], report: GenReport | None = None
) -> QualityFigures:
    """The figures of `tasks` against the tools the policy may call; `report` adds what generation
    saw (drops, the self-contained check's denominator, tools not explored)."""
    used = {name for t in tasks for name in t.tools_expected}
    checked, passed, unchecked = _self_contained(tasks, report)
    f = QualityFigures(
        tasks=len(tasks),
        grounded=sum(t.source == "grounded" for t in tasks),
        chained=sum(len(t.reference_calls) >= 2 for t in tasks),
        written=sum(t.source == "written" for t in tasks),
        self_contained_checked=checked,
        self_contained_passed=passed,
        self_contained_unchecked=unchecked,
        tools_allowed=list(allowed_tools),
        tools_used=[n for n in allowed_tools if n in used],
        difficulty=dict(sorted(Counter(t.difficulty for t in tasks).items())),
        solved=dict(Counter(str(t.notes["solved"]) for t in tasks if "solved" in t.notes)),
        dropped=dict(report.dropped) if report is not None else None,
        not_explored=dict(report.exploration.skipped_tools) if report is not None else {},
    )
    if not tasks:
        f.warnings.append("no tasks: nothing can be trained or measured")
    elif (w := _floor_warning(f)) is not None:
        f.warnings.append(w)
    return f


def _share(part: int | None, whole: int | None, share: float | None) -> str:
    return "not measured" if share is None else f"{share:.0%} ({part} of {whole})"


def quality_lines(f: QualityFigures) -> list[str]:
    """The figures as plain lines (a console and the trainer's log print the same)."""
    sc = _share(f.self_contained_passed, f.self_contained_checked, f.self_contained_share)
    if f.self_contained_checked is None:
        sc = "not checked" if f.written else "no written tasks"
    elif f.dropped is None:
        sc += ", of those kept (drops are not in a task file)"
    if f.self_contained_unchecked:
        sc += f"; {f.self_contained_unchecked} kept without a readable verdict"
    unused = [n for n in f.tools_allowed if n not in f.tools_used]
    top = max(f.difficulty.values(), default=1)
    bars = [
        f"{lvl}: {f.difficulty.get(lvl, 0)} {'#' * round(10 * f.difficulty.get(lvl, 0) / top)}"
        for lvl in range(1, 6)
    ]
    lines = [
        f"Task set quality ({f.tasks} tasks)",
        f"  grounded            {_share(f.grounded, f.tasks, f.grounded_share)}",
        f"  chained (2+ calls)  {_share(f.chained, f.tasks, f.chain_share)}",
        f"  self-contained      {sc}",
        f"  tool coverage       {_share(len(f.tools_used), len(f.tools_allowed), f.coverage)}"
        + (f"; unused: {', '.join(unused[:8])}" + (" ..." if len(unused) > 8 else "") if unused else ""),
        "  difficulty          " + "  ".join(b.rstrip() for b in bars),
    ]
    if f.solved:
        marks = ", ".join(f"{n} {k}" for k, n in sorted(f.solved.items()))
        lines.append(f"  solvability         {sum(f.solved.values())} attempted, solved: {marks}")
    if f.dropped is None:
        lines.append("  dropped             not known (a loaded task file)")
    elif f.dropped:
        by = sorted(f.dropped.items(), key=lambda kv: -kv[1])
        lines.append("  dropped             " + "; ".join(f"{reason} ({n})" for reason, n in by))
    else:
        lines.append("  dropped             none")
    lines += [f"warning: {w}" for w in f.warnings]
    return lines

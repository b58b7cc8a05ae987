"""Deterministic checks on one trajectory: did its calls parse, pass the schema, run without error;
did it end with an answer; for grounded tasks, is the answer right and were the expected tools used.

Reading of `ToolCallRecord` (set by the agent loop): a call *parsed* when it has a tool name and
an arguments object; it is *schema-valid* when `valid` (parsed, a known allowed tool, arguments
pass the schema); it ran *without error* when its status is OK. Rates are None when the
trajectory made no calls: "no calls" is neither good nor bad tool use by itself, and the expected-
tools check is what catches a trajectory that should have called something.
"""

from __future__ import annotations

from pydantic import BaseModel

from judges.answers import AnswerMatch, answer_matches
from mcp_rl.servers.results import CallStatus
from mcp_rl.trajectory import Trajectory
from scenario_gen.task import Task


class CheckResult(BaseModel):
    n_calls: int = 0
    parse_rate: float | None = None
    schema_valid_rate: float | None = None
    no_error_rate: float | None = None
    """Share of all calls (invalid ones included) that ran and came back OK."""
    answered: bool = False
    answer_correct: bool | None = None
    """None when the task has no reference answer."""
    answer_match: AnswerMatch | None = None
    expected_tools_used: float | None = None
    """Share of `task.tools_expected` called at least once validly; None when the task names none."""

    def components(self) -> dict[str, float]:
        """The checks as reward components (only those that apply), all in [0, 1]."""
        out: dict[str, float] = {"answered": float(self.answered)}
        for name in ("parse_rate", "schema_valid_rate", "no_error_rate", "expected_tools_used"):
            value = getattr(self, name)
            if value is not None:
                out[name] = float(value)
        if self.answer_correct is not None:
            out["answer_correct"] = float(self.answer_correct)
        return out


def run_checks(
    traj: Trajectory, task: Task | None = None, reference_answer: str | None = None
) -> CheckResult:
    """All checks for one trajectory. `reference_answer` overrides the task's (e.g. a fresh one after
    re-running the reference calls against the live server)."""
    calls = traj.tool_calls
    n = len(calls)
    res = CheckResult(n_calls=n)
    if n:
        res.parse_rate = sum(1 for c in calls if c.name and c.arguments is not None) / n
        res.schema_valid_rate = sum(1 for c in calls if c.valid) / n
        res.no_error_rate = sum(1 for c in calls if c.valid and c.status == CallStatus.OK) / n
    res.answered = bool(traj.final_answer and traj.final_answer.strip())
    reference = (
        reference_answer if reference_answer is not None else (task.reference_answer if task else None)
    )
    if reference is not None and reference.strip():
        res.answer_match = answer_matches(traj.final_answer, reference)
        res.answer_correct = res.answer_match.correct
    if task and task.tools_expected:
        used = {c.name for c in calls if c.valid}
        expected = set(task.tools_expected)
        res.expected_tools_used = len(expected & used) / len(expected)
    return res

"""Deterministic checks on one trajectory: did its calls parse, pass the schema, run without error;
did it end with an answer; for grounded tasks, is the answer right and were the expected tools used.

Reading of `ToolCallRecord` (set by the agent loop): a call *parsed* when it has a tool name and
an arguments object; it is *schema-valid* when `valid` (parsed, a known allowed tool, arguments
pass the schema); it ran *without error* when its status is OK. Rates are None when the
trajectory made no calls: "no calls" is neither good nor bad tool use by itself, and the expected-
tools check is what catches a trajectory that should have called something.

Faithfulness (rules in `judges.faithful`): a final answer that is mostly a pasted tool result counts
as no answer (`answered` False; for a grounded task `answer_correct` False); `answer_faithful` says
whether every value the answer states comes from the task or an OK result; `arguments_faithful`
whether every argument value comes from the task or an earlier turn's results; `needed_calls_ok`
(grounded tasks) whether the episode made a valid call that came back OK with a result the reference
answer can be read out of (by whichever tool). The last is logged, not weighted:
it is there for success and for reading runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import BaseModel

from judges.answers import AnswerMatch, answer_matches
from judges.faithful import invented_arguments, pasted_result, reference_supported, unsupported_values
from mcp_rl.servers.results import CallStatus
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory


class CheckResult(BaseModel):
    n_calls: int = 0
    parse_rate: float | None = None
    schema_valid_rate: float | None = None
    no_error_rate: float | None = None
    """Share of all calls (invalid ones included) that ran and came back OK."""
    answered: bool = False
    """A final answer was given, and it is not a pasted tool result."""
    pasted: bool = False
    pasted_reason: str = ""
    answer_correct: bool | None = None
    """None when the task has no reference answer."""
    answer_match: AnswerMatch | None = None
    expected_tools_used: float | None = None
    """Share of `task.tools_expected` called at least once validly; None when the task names none."""
    answer_faithful: bool | None = None
    """Every value the answer states comes from the task or an OK result; None without an answer."""
    unsupported_values: list[str] = []
    arguments_faithful: bool | None = None
    """No argument value was invented; None when there were no calls."""
    invented_arguments: list[str] = []
    needed_calls_ok: bool | None = None
    """A valid call came back OK with a result the reference answer can come from (whichever tool
    made it); None when the task has no reference answer."""
    used_tools: bool | None = None
    """Some valid call came back OK; None when the task expects no tool. Not a reward component: the
    reward's gate reads it (an answer to a task that needs tools, given without one, is not earned)."""

    extra: dict[str, float] = {}
    """Scores of the reward components registered with `reward_component` that applied."""

    def components(self) -> dict[str, float]:
        """The checks as reward components (only those that apply), all in [0, 1]."""
        out = {name: float(v) for name in FIELD_COMPONENTS if (v := getattr(self, name)) is not None}
        return {**out, **self.extra}


FIELD_COMPONENTS = (
    "answered", "parse_rate", "schema_valid_rate", "no_error_rate", "expected_tools_used",
    "answer_correct", "answer_faithful", "arguments_faithful", "needed_calls_ok",
)  # fmt: skip
"""The checks above that are reward components as they stand (0/1 for the yes/no ones)."""

# --- more reward components: one function each, plus a weight in `RewardWeights` -----------------
RewardComponent = Callable[[Trajectory, "Task | None", CheckResult], float | None]
"""(trajectory, task, the checks above) -> a score in [0, 1], or None when it does not apply."""
REWARD_COMPONENTS: dict[str, RewardComponent] = {}


def reward_component(name: str) -> Callable[[RewardComponent], RewardComponent]:
    """Register a reward component under `name`: a new check is this function plus a weight
    (`RewardWeights(**{name: w})`; without one it is logged with every trajectory, not weighted)."""
    if name in FIELD_COMPONENTS:
        raise ValueError(f"{name!r} is a built-in check already")

    def register(fn: RewardComponent) -> RewardComponent:
        REWARD_COMPONENTS[name] = fn
        return fn

    return register


@reward_component("distinct_calls")
def distinct_calls(traj: Trajectory, task: Task | None, checks: CheckResult) -> float | None:
    """The share of calls that are not a repeat of an earlier call (same tool, same arguments): a
    repeat fetches nothing new. 1 call then an answer scores 1; the loop the base models fall into
    (the same call four times, no answer: every base episode of the 2026-12-03 runs) scores 0.25.
    Without it a loop and one call then a wrong answer score alike, and a group of them teaches nothing."""
    calls = traj.tool_calls
    if not calls:
        return None
    seen = {(c.name, json.dumps(c.arguments, sort_keys=True, default=str)) for c in calls}
    return len(seen) / len(calls)


@reward_component("tagged_calls")
def tagged_calls(traj: Trajectory, task: Task | None, checks: CheckResult) -> float | None:
    """The share of calls written in `<tool_call>` tags, the form llama.cpp's server, vLLM's `hermes`
    parser and Ollama's Qwen templates turn into `tool_calls` (other forms reach only `mcp-rl serve`).
    Weight 0 by default (logged): measured 2026-12-05, the default 0.5B policy wrote 0 of 80 sampled
    first-turn calls in tags, 40 with Qwen's template alone and 40 with a system line asking for them
    (`docs/results.md`). A weight gives no group a difference to learn from while nobody samples the
    form, and it lowers every episode that calls against those that do not."""
    calls = traj.tool_calls
    if not calls:
        return None
    return sum(c.tagged for c in calls) / len(calls)


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
    task_text = task.text if task else traj.task_text
    ok_calls = [c for c in calls if c.valid and c.status == CallStatus.OK]
    ok_results = [c.result_text for c in ok_calls if c.result_text]
    answer = traj.final_answer if traj.final_answer and traj.final_answer.strip() else None
    if answer is not None:
        reason = pasted_result(answer, ok_results)
        res.pasted, res.pasted_reason = reason is not None, reason or ""
    res.answered = answer is not None and not res.pasted
    if res.answered and answer is not None:
        res.unsupported_values = unsupported_values(answer, task_text, ok_results)
        res.answer_faithful = not res.unsupported_values
    if n:
        res.invented_arguments = invented_arguments(calls, task_text)
        res.arguments_faithful = not res.invented_arguments
    reference = (
        reference_answer if reference_answer is not None else (task.reference_answer if task else None)
    )
    if reference is not None and reference.strip():
        complete = bool(task and task.answer_rule and task.answer_rule.kind == "names")
        res.answer_match = answer_matches(traj.final_answer, reference, complete=complete, context=task_text)
        res.answer_correct = res.answer_match.correct and not res.pasted
        # The calls a task needs are those its answer can come from: some valid call came back OK
        # with the reference answer in (or countable from) its result. Not necessarily the tools the
        # writer expected: another path to the same result counts (the labelled set has one that
        # used filter_items and get_item where the writer expected search_items).
        res.needed_calls_ok = bool(ok_calls) and reference_supported(reference, ok_results)
    if task and task.tools_expected:
        res.used_tools = bool(ok_calls)
        used = {c.name for c in calls if c.valid}
        expected = set(task.tools_expected)
        res.expected_tools_used = len(expected & used) / len(expected)
    scores = {name: fn(traj, task, res) for name, fn in REWARD_COMPONENTS.items()}
    res.extra = {name: float(v) for name, v in scores.items() if v is not None}
    return res

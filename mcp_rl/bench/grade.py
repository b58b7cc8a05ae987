"""Two verdicts on one BFCL episode: BFCL's own multi-turn checker (the figure), and our strict
tool-use checks (`judges.checks.run_checks`) per user turn (for the agreement report).

BFCL's checker re-executes the model's calls, turn by turn, on fresh instances of the backends and
compares their state and responses with the ground truth's. It keeps its instances in a module-level
dict keyed by model name and entry id, so each grading uses a name of its own and removes them after.

Our strict verdict on an entry: in every turn that has ground-truth calls, the episode called each
tool the ground truth calls (`expected_tools_used` = 1), every call was valid and came back OK, no
argument was invented (`arguments_faithful`), and the turn ended in an answer. It needs ground-truth
calls to name the expected tools: an entry with a turn that has none (the miss_func and miss_param
categories' "should not act" turns) is not comparable, and gets None.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from judges.checks import run_checks
from mcp_rl.bench.bfcl_data import BfclEntry, require_bfcl
from mcp_rl.bench.bfcl_server import positional_names, tool_schemas
from mcp_rl.bench.calls import call_string, parse_call
from mcp_rl.servers.results import CallStatus
from mcp_rl.task import Task
from mcp_rl.trajectory import ToolCallRecord, Trajectory


class TurnRecord(BaseModel):
    """What the model did in one user turn: its steps (the calls of each assistant message that
    reached the server) and how the turn ended."""

    text: str
    steps: list[list[ToolCallRecord]] = []
    answer: str | None = None
    end: str = "answer"
    """answer, max_turns (the per-turn step limit), context, server_error"""


class Verdict(BaseModel):
    valid: bool
    error_type: str = ""
    error_message: str = ""


def decoded(turns: list[TurnRecord]) -> list[list[list[str]]]:
    """The calls in BFCL's decoded form: per turn, per step, the call strings (only calls the server
    ran: an invalid one never touched the state our server and BFCL's re-execution share)."""
    out = []
    for t in turns:
        steps = [[call_string(c.name, c.arguments) for c in step if c.valid and c.name] for step in t.steps]
        out.append([s for s in steps if s])
    return out


def bfcl_verdict(entry: BfclEntry, turns: list[TurnRecord]) -> Verdict:
    """BFCL's checker on the episode. A conversation cut short (a turn that hit its step limit or the
    context, a lost server) fails whole, as BFCL's force-termination does."""
    require_bfcl()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    cut = next((t for t in turns if t.end != "answer"), None)
    if cut is not None or len(turns) != len(entry.ground_truth):
        why = cut.end if cut else f"{len(turns)} of {len(entry.ground_truth)} turns"
        return Verdict(valid=False, error_type="multi_turn:force_terminated", error_message=f"conversation cut short ({why})")
    name = f"mcprl_{uuid.uuid4().hex[:12]}"
    try:
        result: dict[str, Any] = multi_turn_checker(decoded(turns), entry.ground_truth, entry.raw, entry.category, name)
    finally:
        # Its instances live in the module's globals under names that start with the model name.
        for key in [k for k in vars(multi_turn_utils) if k.startswith(name)]:
            del vars(multi_turn_utils)[key]
    return Verdict(
        valid=bool(result.get("valid")),
        error_type=str(result.get("error_type", "")),
        error_message=str(result.get("error_message", "")),
    )


def _expected_tools(entry: BfclEntry, turn: int) -> list[str]:
    owner = {t["name"]: t["class"] for t in tool_schemas(entry.involved_classes)}
    return sorted({parse_call(c, lambda m: positional_names(owner[m], m))[0] for c in entry.ground_truth[turn]})


def strict_verdict(entry: BfclEntry, turns: list[TurnRecord]) -> tuple[bool | None, str]:
    """(our strict verdict, the first reason it failed); (None, why) when not comparable.
    Faithfulness reads the whole conversation so far (a name learned in turn 0 may be used in turn 2);
    the expected tools, validity and errors read the turn's own calls."""
    if any(not gt for gt in entry.ground_truth):
        return None, "a turn has no ground-truth calls: our checks have no expected tools for it"
    so_far: list[ToolCallRecord] = []
    for i in range(len(entry.ground_truth)):
        if i >= len(turns):
            return False, f"turn {i}: not reached"
        t = turns[i]
        calls = [c for step in t.steps for c in step]
        so_far += calls
        text = "\n".join(x.text for x in turns[: i + 1])
        task = Task(id=f"{entry.id}-turn{i}", text=text, tools_expected=_expected_tools(entry, i))
        own = run_checks(Trajectory(id=task.id, task_id=task.id, task_text=text, tool_calls=calls, final_answer=t.answer), task)
        whole = run_checks(Trajectory(id=task.id, task_id=task.id, task_text=text, tool_calls=so_far), task)
        if t.end != "answer" or not t.answer:
            return False, f"turn {i}: no answer ({t.end})"
        if own.expected_tools_used is not None and own.expected_tools_used < 1:
            return False, f"turn {i}: did not call every expected tool ({', '.join(task.tools_expected)})"
        if any(not c.valid or c.status is not CallStatus.OK for c in calls):
            return False, f"turn {i}: an invalid call or a tool error"
        if whole.arguments_faithful is False:
            return False, f"turn {i}: invented arguments ({', '.join(whole.invented_arguments[:3])})"
    return True, ""

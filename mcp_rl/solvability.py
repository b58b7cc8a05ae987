"""The solvability pass: on by default in `mcp-rl generate` and in the trainer's own generation.

A checker model (the writer model unless `--check-with` names another) attempts each task against the
live server. Tasks it never solves are dropped (no one can learn from a task no one can do, and it
may be wrong). Each attempted task is marked in `notes`: `solve_rate` (the checker's share of solved
attempts) and `solved` ("always", "sometimes", or "unknown" when no attempt could be graded). With a
policy model as well, each task also gets the policy's solve rate: tasks it always or never solves
give GRPO no signal (every episode in the group scores the same), which the trainer can use to sample
them less.

Grounded tasks are checked against their reference answer, refreshed by re-running the reference
calls when it depends on time or state; other tasks by the checker's own binary verdict, which fails
when the task speaks of words that neither the tools, nor exploration's results, nor the attempt's
results mention (`scenario_gen.self_contained.unsupported_terms`): the 1.5B writer's verdict accepted
every written task of a memory-graph set, false premises included (2026-12-07).

Cost, measured (2026-12-03, the offline 1.5B writer on one thread of 2 shared cores, load average
6-7): 4 written stats_lab tasks, 1 attempt of at most 3 turns each, took 540 s (about 40 CPU-seconds
a task); the self-contained verdicts of the same 4 tasks took 175 s. A pass over all 48 tasks of a
set would cost far more than a few minutes, so the default attempts only written tasks, once each,
for at most 3 turns, and an attempt that ran out of turns after an OK call is asked once more, with no
tools, for its answer: grounded tasks were already verified by re-running their calls
(`--check-grounded` attempts them too). Budget about half a minute per written task on a quiet
machine, or `--no-solvability`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_rl.models.base import ChatModel, SamplingParams
from mcp_rl.servers.results import CallStatus
from mcp_rl.servers.tool_class import classify
from mcp_rl.task import Task
from mcp_rl.toolcalls import parse_message
from mcp_rl.trajectory import Trajectory
from scenario_gen.grounded import verify
from scenario_gen.self_contained import said, unsupported_terms


class SolvabilitySettings(BaseModel):
    """How generation checks that tasks can be solved; each field is a `generate` and `train` option."""

    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    enabled: bool = Field(default=True, json_schema_extra={"cli": "--solvability/--no-solvability"})
    """Attempt each generated task with a checker model and drop those no attempt solves."""
    check_with: str | None = Field(default=None, json_schema_extra={"cli": "--check-with"})
    """The checker model (default: the task writer)."""
    attempts: int = Field(default=1, ge=1, le=4, json_schema_extra={"cli": "--check-attempts"})
    """Attempts per task in the solvability check."""
    max_turns: int = Field(default=3, ge=1, le=8, json_schema_extra={"cli": "--check-turns"})
    """Assistant messages per attempt in the solvability check."""
    grounded: bool = Field(default=False, json_schema_extra={"cli": "--check-grounded/--no-check-grounded"})
    """Attempt grounded tasks too (their references were already verified by re-running their calls)."""


async def _solve_rates(
    model: ChatModel,
    pool: Any,
    tasks: list[Task],
    attempts: int,
    judge: ChatModel,
    max_turns: int,
    on_episode: Callable[[Trajectory], None] | None = None,
    on_graded: Callable[[], None] | None = None,
    why: dict[str, str] | None = None,
    seen: str = "",
) -> list[float | None]:
    """Each task's share of solved attempts (None: none could be graded). A written task whose judged
    success rests on words no tool or result mentions fails, its reason put in `why`."""
    from judges.success import decide_success
    from mcp_rl.rollout.loop import RolloutConfig, run_tasks

    # one attempt: greedy, so it measures the model rather than one sample's luck
    rollout = RolloutConfig(
        temperature=0.0 if attempts == 1 else 0.7, max_turns=max_turns, max_new_tokens=200
    )
    groups = await run_tasks(model, pool, list(tasks), n=attempts, config=rollout, on_episode=on_episode)
    rates: list[float | None] = []
    why = {} if why is None else why
    reads = {t.name for t in pool.tools if classify(t).kind == "read"}
    for task, trajs in zip(tasks, groups, strict=True):
        trajs = [await _last_word(model, t) for t in trajs]
        reference = task.reference_answer
        if task.answer_depends_on_state and task.reference_calls:
            outcome = await verify(pool.first, task)
            reference = outcome.fresh_answer or reference
        outcomes = []
        for t in trajs:
            outcome = _outcome(await decide_success(t, task, judge, references=[reference]), t)
            if (
                outcome
                and not reference
                and (_read_some(t) or seen.strip())
                and (unknown := unsupported_terms(task.text, f"{seen} {_seen(t, reads)}"))
            ):
                outcome = False  # a judged success at a task that speaks of what the server never said
                why[task.id] = f"{UNSUPPORTED}: {', '.join(repr(w) for w in unknown[:3])}"
            outcomes.append(outcome)
            if on_graded is not None:
                on_graded()
        known = [v for v in outcomes if v is not None]
        rates.append(sum(known) / len(known) if known else None)
    return rates


UNSUPPORTED = "speaks of what no tool, exploration result or result of its attempt mentions"
"""A drop's kind; the words follow a colon (drops are counted by kind, the words go with the example)."""
NOT_SOLVED = "no attempt solved it"


def _read_some(traj: Trajectory) -> bool:
    """The attempt got a result. With neither that nor exploration's results, the tools' words alone
    are too few to say what the server holds (an inventory's "tents" are in no tool description).
    With exploration's, an attempt that called nothing is checked too: "Planning a trip to a nearby
    organization." was judged solved by prose that called no tool (memory graph, 2026-12-07)."""
    return any(c.status is CallStatus.OK for c in traj.tool_calls)


def _seen(traj: Trajectory, reads: set[str]) -> str:
    """What an attempt learned of the server: the offered tools' own words and what its calls returned.
    A read's result, less its arguments: they echo the task ("Planning a trip to a nearby
    organization." was kept after a search for its own words, 2026-12-07), and a search result may
    echo its query. A write's whole result: it names what the task asked to store."""
    tools = json.dumps(traj.metadata.get("tools", []))
    results = " ".join(
        said(c.result_text, c.arguments) if c.name in reads else c.result_text
        for c in traj.tool_calls
        if c.status is CallStatus.OK
    )
    return f"{tools} {results}"


LAST_WORD = (
    "You have no tool calls left. Answer my request now, in one short message, from the tool results "
    "above. Do not call a tool."
)


async def _last_word(model: ChatModel, traj: Trajectory) -> Trajectory:
    """An attempt that ran out of turns after an OK call gets one more message, with no tools offered,
    asking for the answer; the attempt is then graded on that answer.

    Why: the 1.5B writer, greedy, makes the right call and repeats it until the turn limit (measured
    2026-12-04 on the npm filesystem server: 23 of 24 written tasks ungradable, so the pass checked
    almost nothing). An attempt that still calls a tool, or made no OK call, stays unanswered."""
    if traj.end != "max_turns" or not any(c.status is CallStatus.OK for c in traj.tool_calls):
        return traj
    messages = [*traj.messages, {"role": "user", "content": LAST_WORD}]
    (completion,) = await model.chat(messages, None, 1, SamplingParams(temperature=0.0, max_new_tokens=200))
    text = completion.text.strip()
    names = [t.get("function", {}).get("name", "") for t in traj.metadata.get("tools", [])]
    if not text or not parse_message(text, names or [c.name for c in traj.tool_calls]).is_final:
        return traj
    messages.append({"role": "assistant", "content": text})
    metadata = {**traj.metadata, "answer_asked_for": True}
    return traj.model_copy(
        update={"messages": messages, "final_answer": text, "end": "answer", "metadata": metadata}
    )


def _outcome(verdict: Any, traj: Any) -> bool | None:
    """An attempt's say on whether the task can be solved. Two kinds of failed attempt say nothing
    about the task, only about the checker, and are not graded (None), not failures:
    - one that never answered, even when asked for its answer (`_last_word`), after an OK call: it ran
      out of turns, or the server or context ended it. Measured
      2026-12-04 on the npm filesystem server: this rule missing, all 24 written tasks of a 48-task
      generation were dropped. The three the report names, re-run by hand ("Read the content of the
      'README.md' file and display it in the console." among them), show why: the 1.5B writer, greedy,
      made the right call, got an OK result and repeated the same call until the turn limit;
    - one that answered from its own head, calling no tool (a value no tool returned: the faithfulness
      gate): the 1.5B writer answered "the mean of 4, 8 and 15" with mental arithmetic, which strict
      grading fails, and the task was dropped."""
    if verdict.success is not False:
        return verdict.success
    if not (traj.final_answer or "").strip() or traj.end != "answer":
        # ... unless every call it made failed: the task led it only into errors. Measured
        # 2026-12-05 on the npm filesystem server: "Read the contents of the file 'bills' and check if it
        # is an image" ('bills' is a directory) and "List all directories ... not allowed by the server"
        # were kept as "unknown" after attempts whose every call was a tool error.
        failed_only = traj.tool_calls and not any(c.status is CallStatus.OK for c in traj.tool_calls)
        return False if failed_only else None
    if traj.tool_calls:
        return False
    skipped_tools = verdict.answered_without_tools or (
        verdict.gates.get("answered") and verdict.gates.get("answer_faithful") is False
    )
    return None if skipped_tools else False


def _mark(rate: float | None) -> str:
    return (
        "unknown" if rate is None else ("always" if rate == 1.0 else "never" if rate == 0.0 else "sometimes")
    )


async def check_solvability(
    tasks: list[Task],
    pool: Any,
    checker: ChatModel,
    *,
    attempts: int = 2,
    policy: ChatModel | None = None,
    max_turns: int = 6,
    grounded: bool = True,
    say: Callable[[str], None] | None = None,
    dropped: Callable[[Task, str], None] | None = None,
    seen: str = "",
) -> list[Task]:
    """Tasks the checker solved at least once (or could not be judged), marked in `notes`; tasks not
    attempted (grounded ones, with `grounded=False`) pass through unmarked, in their place.

    `pool` is a `mcp_rl.rollout.pool.SessionPool` on the same server. `say` hears one line per finished
    attempt: the pass took 20-40 minutes of a git generation (2026-12-05), silent until then. `dropped`
    hears each dropped task with the reason. `seen` is what exploration's calls returned: a word of a
    task is the server's when the tools, exploration or the attempt's results mention it."""
    tried = [t for t in tasks if grounded or t.source != "grounded"]
    if not tried:
        return list(tasks)
    total = len(tried) * attempts * (2 if policy is not None else 1)
    done = 0
    if say is not None:
        say(f"solvability: attempting {len(tried)} tasks ({total} attempts)")

    graded = 0

    def attempted(_traj: Trajectory) -> None:
        nonlocal done
        done += 1
        if say is not None:
            say(f"solvability: {done} of {total} attempts done")

    def judged() -> None:
        # grading is one or two more model calls per attempt: 30 silent minutes after "24 of 24
        # attempts done" in a filesystem generation (2026-12-07, three generations on 2 cores)
        nonlocal graded
        graded += 1
        if say is not None:
            say(f"solvability: {graded} of {total} attempts graded")

    why: dict[str, str] = {}
    rates = await _solve_rates(
        checker, pool, tried, attempts, checker, max_turns, attempted, judged, why, seen
    )
    policy_rates = (
        await _solve_rates(policy, pool, tried, attempts, checker, max_turns, attempted, judged)
        if policy is not None
        else None
    )
    marked: dict[str, Task | None] = {}
    for i, (task, rate) in enumerate(zip(tried, rates, strict=True)):
        if rate == 0.0:
            marked[task.id] = None
            if dropped is not None:
                dropped(task, why.get(task.id, NOT_SOLVED))
            continue
        notes = {**task.notes, "checker_solve_rate": rate, "solve_rate": rate, "solved": _mark(rate)}
        if policy_rates is not None:
            p = policy_rates[i]
            notes["policy_solve_rate"] = p
            notes["grpo_signal"] = _mark(p).replace("sometimes", "mixed")
        marked[task.id] = task.model_copy(update={"notes": notes})
    out = [marked.get(t.id, t) for t in tasks]  # a dropped task's entry is None
    return [t for t in out if t is not None]

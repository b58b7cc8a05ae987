"""Tool-use success as a careful reader would count it: checked success needs the right answer and the
calls behind it, judged success is reported apart and needs an answer, intervals count tasks, nothing
measured reads "not measured", and an improvement must be more than one task flipping."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from judges.regrade import episode_references, reference_from_episode
from judges.success import checked_success, judged_success, success_rate, task_success
from mcp_rl.evaluate import decide_all, improvement, summarize
from mcp_rl.figures import rate_text
from mcp_rl.servers.results import CallStatus
from mcp_rl.task import AnswerRule, ReferenceCall, Task
from mcp_rl.train_config import TrainConfig
from mcp_rl.trajectory import ToolCallRecord, Trajectory
from scenario_gen.io import load_tasks
from tests.judge_fakes import FakeScriptedJudge

REPO = Path(__file__).resolve().parents[1]


def _episode(task: Task, answer: str | None, calls: list[ToolCallRecord] | None = None, k: int = 0) -> Trajectory:
    return Trajectory(
        id=f"{task.id}-{k}", task_id=task.id, group_id=task.id, task_text=task.text, final_answer=answer,
        tool_calls=calls or [], end="answer" if answer else "max_turns",
    )  # fmt: skip


def _call(name: str, arguments: dict, result: str, turn: int = 1) -> ToolCallRecord:
    return ToolCallRecord(
        turn=turn, name=name, arguments=arguments, valid=True, status=CallStatus.OK, result_text=result
    )


def test_a_constant_answer_without_calls_is_never_a_tool_use_success():
    # On main, the constant answer "No." passed the grounded yes/no tasks of time-48 with no call at all.
    tasks = [t for t in load_tasks(REPO / "examples" / "tasks" / "time-48.jsonl") if t.grounded]
    assert len(tasks) >= 14
    outcomes = [checked_success(_episode(t, "No."), t, [t.reference_answer]) for t in tasks]
    assert not any(o.success for o in outcomes)
    # where "No." is the right answer, the episode is logged as answered without tools
    right = [t for t in tasks if t.reference_answer.strip().lower() == "no"]
    assert right, "time-48 has yes/no tasks whose answer is no"
    flagged = [o for t, o in zip(tasks, outcomes, strict=True) if t in right]
    assert all(o.answered_without_tools for o in flagged)


def test_the_right_answer_with_the_call_behind_it_is_a_success():
    task = Task(
        id="g1", text="How many product categories does the shop have?", source="grounded",
        reference_answer="6", tools_expected=["list_categories"],
    )  # fmt: skip
    result = json.dumps(["tents", "sleeping bags", "backpacks", "stoves", "lights", "clothing"])
    good = _episode(task, "The shop has 6 product categories.", [_call("list_categories", {}, result)])
    ok = checked_success(good, task, [task.reference_answer])
    assert ok.success is True and ok.method == "checked"
    pasted = _episode(task, f"```json\n{result}\n```", [_call("list_categories", {}, result)])
    assert checked_success(pasted, task, [task.reference_answer]).success is False


def test_judged_success_needs_an_answer_and_never_asks_the_judge_without_one():
    task = Task(id="w1", text="Suggest a tent for a family of six.")
    judge = FakeScriptedJudge(['{"explanation": "fine", "success": true}'])
    silent = anyio.run(judged_success, _episode(task, None), task, judge, None)
    assert silent.success is False and silent.method == "judged" and judge.calls == []
    search = _call("search_items", {"query": "tent"}, '[{"id": "ITM-003", "name": "Basecamp 6P Cabin Tent"}]')
    answered = anyio.run(
        judged_success, _episode(task, "The Basecamp 6P Cabin Tent (ITM-003).", [search]), task, judge, None
    )
    assert answered.success is True and len(judge.calls) == 1
    # the success verdict has a prompt of its own, not the reward's RULER prompt
    assert "strict grader" in judge.calls[0][0]["content"]
    unknown = anyio.run(judged_success, _episode(task, "The Basecamp."), task, None, None)
    assert unknown.success is None and unknown.method == "unknown"
    # an answer stating values no tool returned fails its gate before any judge is asked
    invented = anyio.run(judged_success, _episode(task, "The Basecamp 6P, at $249."), task, judge, None)
    assert invented.success is False and invented.gates["answer_faithful"] is False and len(judge.calls) == 1


def test_checked_and_judged_success_are_reported_apart():
    grounded = Task(id="g", text="How many categories?", source="grounded", reference_answer="6",
                    tools_expected=["list_categories"])  # fmt: skip
    written = Task(id="w", text="Suggest a tent for a family.")
    tasks = {"g": grounded, "w": written}
    result = json.dumps(["a", "b", "c", "d", "e", "f"])
    search = _call("search_items", {"query": "tent"}, '[{"id": "ITM-003", "name": "Basecamp 6P Cabin Tent"}]')
    trajs = [
        _episode(grounded, "There are 6 categories.", [_call("list_categories", {}, result)]),
        _episode(written, "The Basecamp 6P Cabin Tent.", [search]),
    ]
    judge = FakeScriptedJudge(['{"explanation": "fine", "success": true}'])
    anyio.run(decide_all, trajs, tasks, judge, None)
    s = summarize(trajs)
    # On main both were one "success" of 2/2; now checked is 1/1 and judged 1/1, side by side.
    assert (s["success"], s["success_n"]) == (1.0, 1)
    assert (s["judged"], s["judged_n"]) == (1.0, 1)
    # with no judge, judged success is absent ("not measured"), not 0
    trajs2 = [_episode(grounded, "There are 6 categories.", [_call("list_categories", {}, result)]),
              _episode(written, "The Basecamp 6P Cabin Tent.", [search], k=1)]  # fmt: skip
    anyio.run(decide_all, trajs2, tasks, None, None)
    s2 = summarize(trajs2)
    assert s2["judged"] is None and s2["judged_n"] == 0 and rate_text(s2, "judged") == "not measured"


def test_nothing_measured_reads_not_measured_never_zero():
    empty = success_rate([])
    assert empty.rate is None and str(empty) == "not measured"
    assert success_rate([None, None]).rate is None
    s = summarize([])
    assert s["success"] is None and rate_text(s) == "not measured"


def test_several_episodes_of_one_task_count_as_one_task():
    # 3 tasks x 4 greedy-identical episodes: the interval is over 3 tasks, not 12 episodes.
    outcomes = [(f"t{i}", i < 2) for i in range(3) for _ in range(4)]
    rate, _ = task_success(outcomes)
    assert rate.n == 3 and rate.episodes == 12 and rate.successes == 2
    naive = success_rate(ok for _, ok in outcomes)
    assert rate.high - rate.low > naive.high - naive.low  # wider: three observations, not twelve
    # a task whose episodes disagree scores the mean of them
    rate2, per_task2 = task_success([("a", True), ("a", False), ("b", True), ("b", None)])
    assert per_task2 == {"a": 0.5, "b": 1.0} and rate2.n == 2 and rate2.successes == 1.5


def test_an_improvement_is_more_than_one_task_flipping():
    base = {f"t{i}": 0.0 for i in range(12)}
    one_more = {**base, "t0": 1.0}
    better, why = improvement(one_more, base, min_improvement=0.05)
    assert not better and "+1" in why  # on main, +1 task of 12 (8%) beat the 0.02 margin
    two_more = {**base, "t0": 1.0, "t1": 1.0}
    assert improvement(two_more, base, 0.05)[0]
    # two gained but two lost is no gain at all
    swapped = {**base, "t0": 1.0, "t1": 1.0}
    prior = {**base, "t2": 1.0, "t3": 1.0}
    assert not improvement(swapped, prior, 0.05)[0]
    # +2 against noise of 3 newly solved and 1 lost: 2 is not above sqrt(4)
    noisy_new = {**base, "t0": 1.0, "t1": 1.0, "t2": 1.0}
    noisy_old = {**base, "t3": 1.0}
    assert not improvement(noisy_new, noisy_old, 0.05)[0]
    # a margin larger than two tasks is respected
    assert not improvement(two_more, base, min_improvement=0.25)[0]


def _clock_task() -> Task:
    return Task(
        id="clock", text="What time is it in Tokyo right now?", source="grounded",
        tools_expected=["get_current_time"], reference_answer="09:00", answer_depends_on_state=True,
        reference_calls=[ReferenceCall(tool="get_current_time", arguments={"timezone": "Asia/Tokyo"},
                                       result_text='{"datetime": "2026-12-03T09:00:00+09:00"}')],
        answer_rule=AnswerRule(kind="field", call_index=0, path=["datetime"], transform="time_hhmm"),
    )  # fmt: skip


def test_a_moving_answer_is_graded_against_the_world_the_episode_saw():
    # The episode read 20:14 from its own call; a refresh a minute later (the old way: once after every
    # episode of the batch had ended) says 20:15 and would grade the right answer wrong.
    task = _clock_task()
    call = _call("get_current_time", {"timezone": "Asia/Tokyo"}, '{"datetime": "2026-12-03T20:14:59+09:00"}')
    assert reference_from_episode(task, [call]) == "20:14"
    episode = _episode(task, "It is 20:14 in Tokyo.", [call])
    refs = episode_references(task, episode.tool_calls, {"reference": "20:15"})
    assert refs == ["20:14", "20:15"]
    assert checked_success(episode, task, refs).success is True
    assert checked_success(episode, task, ["20:15"]).success is False  # what the old grading did
    # no own call and no probe: the reference is stale, the episode is not gradable (not a guess)
    assert episode_references(task, [], None) == []
    none_left = checked_success(_episode(task, "20:14"), task, [])
    assert none_left.success is None and none_left.method == "unknown"


def test_default_test_split_is_big_enough_for_a_gain_to_show():
    cfg = TrainConfig()
    test_tasks = round(cfg.n_tasks * cfg.test_fraction)
    assert test_tasks >= 24  # main held out 6 tasks: no interval on 6 tasks can show a gain
    # a gain from 10% to 50% of those tasks shows as intervals that do not overlap
    base, best = success_rate([True] * 3 + [False] * 26), success_rate([True] * 15 + [False] * 14)
    assert base.high < best.low


@pytest.mark.parametrize(("val", "test"), [(0.5, 0.45), (0.0, 0.3), (0.2, 0.0)])
def test_held_out_fractions_must_leave_tasks_to_train_on(val, test):
    with pytest.raises(ValueError):
        TrainConfig(val_fraction=val, test_fraction=test)

"""Reward combination and gates, success with its interval, and the judge pipeline end to end
(with the fake scripted judge where a judge is needed)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from judges import (
    CheckResult,
    JudgeConfig,
    RewardConfig,
    RewardWeights,
    Ruler,
    combine,
    decide_success,
    judge_trajectories,
    judge_verdict,
    run_checks,
    success_rate,
    wilson_interval,
)
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory, load_trajectories
from tests.judge_fakes import FakeScriptedJudge

DATA = Path(__file__).resolve().parents[1] / "bench" / "data"


def load_set():
    tasks = {
        t.id: t for t in (Task.model_validate_json(line) for line in (DATA / "judge_tasks.jsonl").open())
    }
    return load_trajectories(DATA / "judge_labeled.jsonl"), tasks


def test_combine_weighted_mean_over_components_that_apply():
    c = CheckResult(n_calls=2, parse_rate=1.0, schema_valid_rate=1.0, no_error_rate=0.5, answered=True)
    comps = combine(c, 0.6)
    # ruler 1.0*0.6 + schema 0.25*1 + no_error 0.1*0.5 over weights 1.35
    assert comps["reward"] == pytest.approx((0.6 + 0.25 + 0.05) / 1.35)
    assert comps["gate"] == 1.0 and comps["ruler"] == 0.6 and comps["parse_rate"] == 1.0
    only_ruler = combine(
        CheckResult(answered=True), 0.3, RewardConfig(weights=RewardWeights(schema_valid_rate=0))
    )
    assert only_ruler["reward"] == pytest.approx(0.3)


def test_gates_no_answer_and_wrong_answer():
    no_answer = combine(CheckResult(n_calls=1, parse_rate=1, schema_valid_rate=1, no_error_rate=1), 1.0)
    assert no_answer["gate"] == 0.25 and no_answer["reward"] == pytest.approx(0.25)
    # the old rule, still there by name: a wrong answer scored as an answer, capped
    old = RewardConfig(wrong_answer_as_none=False, wrong_answer_cap=0.3)
    wrong = combine(CheckResult(answered=True, answer_correct=False), 1.0, old)
    assert wrong["reward"] == pytest.approx(0.3)  # the judge's 1.0 is capped by the reference check
    zero = combine(CheckResult(answered=False), None, RewardConfig(no_answer_factor=0.0))
    assert zero["reward"] == 0.0


# An episode of a grounded task: the right tool, called validly, came back OK; then one of three endings.
TIME_TASK = Task(
    id="tz", text="What time is it in Tokyo at 09:30 UTC?", source="grounded", reference_answer="18:30",
    tools_expected=["convert_time"],
)  # fmt: skip
RESULT = '{"source": {"time": "09:30"}, "target": {"timezone": "Asia/Tokyo", "time": "18:30"}}'


def _episode(answer, calls=1):
    from mcp_rl.servers.results import CallStatus
    from mcp_rl.trajectory import ToolCallRecord

    args = {"source_timezone": "Etc/UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}
    recs = [
        ToolCallRecord(turn=i, name="convert_time", arguments=args, status=CallStatus.OK, result_text=RESULT)
        for i in range(calls)
    ]
    return Trajectory(id=f"e{calls}{answer}", task_id="tz", tool_calls=recs, final_answer=answer)


def _reward(traj, task=TIME_TASK, config=None):
    return combine(run_checks(traj, task), None, config)["reward"]


def test_a_wrong_answer_scores_exactly_what_no_answer_would():
    right = _reward(_episode("In Tokyo it is 18:30."))
    wrong = _reward(_episode("In Tokyo it is 09:30."))
    none = _reward(_episode(None))
    assert right > 0.9
    assert wrong == pytest.approx(none) and wrong < 0.3
    # negative control: the old rule paid the confident wrong answer twice what stopping got
    old = RewardConfig(wrong_answer_as_none=False, wrong_answer_cap=0.5)
    assert _reward(_episode("In Tokyo it is 09:30."), config=old) > 1.5 * _reward(_episode(None), config=old)


def test_an_answer_without_any_tool_call_is_not_earned():
    """The exploit the time run learned (docs/results.md): with --judge none, an answer that calls
    nothing and states nothing passed every check that applied and beat an episode that used the
    tool; now it scores below it, on a written task as on a grounded one."""
    written = TIME_TASK.model_copy(update={"source": "written", "reference_answer": None})
    idle = Trajectory(id="idle", task_id="tz", final_answer="That reply ends the task.")
    looping = _episode(None, calls=4)
    assert run_checks(idle, written).used_tools is False and run_checks(looping, written).used_tools
    assert _reward(idle, written) < _reward(looping, written)
    assert _reward(idle) < _reward(looping)
    allowed = RewardConfig(answer_without_tools=True)  # negative control: the old reward
    assert _reward(idle, written, allowed) > _reward(looping, written, allowed)
    # a task that expects no tool: answering without one is fine
    chat = written.model_copy(update={"tools_expected": []})
    assert run_checks(idle, chat).used_tools is None and combine(run_checks(idle, chat), None)["gate"] == 1.0


def test_checks_alone_rank_the_labeled_set_sensibly():
    trajs, tasks = load_set()
    rewards = {t.id: combine(run_checks(t, tasks[t.task_id]), None)["reward"] for t in trajs}
    # Every trajectory labeled a success beats every one labeled a failure of the same task.
    for t in trajs:
        for u in trajs:
            if t.task_id == u.task_id and t.metadata["label_success"] and not u.metadata["label_success"]:
                assert rewards[t.id] > rewards[u.id], (t.id, u.id)


def test_reference_success_on_the_labeled_set_matches_labels():
    trajs, tasks = load_set()

    async def all_success():
        return [await decide_success(t, tasks[t.task_id]) for t in trajs]

    results = anyio.run(all_success)
    assert all(r.method == "checked" for r in results)
    assert [r.success for r in results] == [t.metadata["label_success"] for t in trajs]


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    rate = success_rate([True, False, None, True])
    assert (rate.successes, rate.n, rate.unknown) == (2, 3, 1) and "2/3" in str(rate)


def test_judge_verdict_parses_and_repairs():
    trajs, _ = load_set()
    t = trajs[0]
    judge = FakeScriptedJudge(["definitely a success", '{"explanation": "right", "success": "yes"}'])
    v = anyio.run(judge_verdict, judge, t, None)
    assert v.success is True and v.explanation == "right" and len(judge.calls) == 2
    assert "true or false" in judge.calls[1][-1]["content"]
    broken = anyio.run(judge_verdict, FakeScriptedJudge([RuntimeError("down")]), t, None)
    assert broken.success is None and "RuntimeError: down" in broken.reason


def test_success_falls_back_to_judge_then_unknown():
    trajs, _ = load_set()
    ungrounded = Task(id="task-A", text=trajs[0].task_text)

    async def go():
        by_judge = await decide_success(trajs[0], ungrounded, FakeScriptedJudge(['{"success": false}']))
        unknown = await decide_success(trajs[0], ungrounded, None)
        return by_judge, unknown

    by_judge, unknown = anyio.run(go)
    assert by_judge.method == "judged" and by_judge.success is False
    assert unknown.method == "unknown" and unknown.success is None


def test_pipeline_stores_components_and_reports_unscored_groups():
    trajs, tasks = load_set()

    def judge_fn(messages):
        user = messages[1]["content"]
        if "Basecamp" in user:  # group A: the judge keeps failing
            return "I cannot decide."
        n = user.count("\n### t")
        return json.dumps(
            {"scores": [{"id": f"t{i}", "explanation": f"e{i}", "score": 0.5} for i in range(1, n + 1)]}
        )

    judge = FakeScriptedJudge([judge_fn])
    report = anyio.run(judge_trajectories, trajs, tasks, Ruler(judge, JudgeConfig(max_retries=1)))
    assert report.unscored == 1 and list(report.unscored_reasons) == ["grp-A"]
    assert report.usage.calls == 2 + 1 + 1
    for t in trajs:
        assert t.reward is not None and t.reward == t.reward_components["reward"]
        assert "answer_correct" in t.reward_components
        if t.group_id == "grp-A":
            assert "ruler" not in t.reward_components and t.reward_components["ruler_unscored"] == 1.0
            assert "unscored" in t.metadata["judge_unscored"]
        else:
            assert t.reward_components["ruler"] == 0.5 and t.judge_explanation.startswith("e")


def test_pipeline_drops_a_stale_reference():
    trajs, tasks = load_set()
    # the episodes of task-A have no usable reference left (it went stale): nothing grades their answer
    stale = {t.id: [] for t in trajs if t.task_id == "task-A"}
    anyio.run(judge_trajectories, trajs, tasks, None, None, None, stale)
    a1 = next(t for t in trajs if t.id == "A1")
    b1 = next(t for t in trajs if t.id == "B1")
    assert "answer_correct" not in a1.reward_components and b1.reward_components["answer_correct"] == 1.0


def test_judges_never_imports_the_trainer():
    import subprocess
    import sys

    code = "import sys, judges; print(sorted(m for m in sys.modules if m.startswith(('mcp_rl.train', 'mcp_rl.grpo', 'torch'))))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_faithfulness_is_weighted_and_needed_calls_are_logged_only():
    faithful = CheckResult(
        n_calls=1,
        schema_valid_rate=1.0,
        answered=True,
        answer_faithful=True,
        arguments_faithful=True,
        needed_calls_ok=False,
    )
    unfaithful = faithful.model_copy(update={"answer_faithful": False, "arguments_faithful": False})
    a, b = combine(faithful, None), combine(unfaithful, None)
    # schema 0.25*1 + answer_faithful 0.25 + arguments_faithful 0.25 (+ needed_calls_ok 0.0) over 0.75
    assert a["reward"] == pytest.approx(1.0) and b["reward"] == pytest.approx(0.25 / 0.75)
    assert a["needed_calls_ok"] == 0.0  # logged with the components, weighing nothing
    assert combine(faithful.model_copy(update={"needed_calls_ok": True}), None)["reward"] == a["reward"]


def test_a_new_check_is_one_function_plus_a_weight():
    from judges.checks import REWARD_COMPONENTS, reward_component

    trajs, tasks = load_set()
    t = trajs[0]
    before = combine(run_checks(t, tasks[t.task_id]), None)["reward"]

    @reward_component("says_please")
    def says_please(traj, _task, _checks):
        return float("please" in (traj.final_answer or "").lower())

    try:
        checks = run_checks(t, tasks[t.task_id])
        assert checks.components()["says_please"] == 0.0  # logged with every trajectory
        assert combine(checks, None)["reward"] == pytest.approx(before)  # no weight: not weighted
        weighted = combine(checks, None, RewardConfig(weights=RewardWeights(says_please=1.0)))["reward"]
        assert weighted < before  # a failed check with a weight pulls the reward down
    finally:
        del REWARD_COMPONENTS["says_please"]
    with pytest.raises(ValueError):
        reward_component("answer_correct")


def test_a_loop_of_the_same_call_scores_below_one_call_then_stopping():
    """The base models' loop (the same call until the turn limit, no answer) against one call and a
    stop: the loop fetched nothing new and scores lower, so a group of the two has a gradient toward
    stopping; neither earned an answer, and a right answer still beats both by far."""
    loop = run_checks(_episode(None, calls=4), TIME_TASK)
    once = run_checks(_episode("In Tokyo it is 09:30.", calls=1), TIME_TASK)
    assert loop.extra["distinct_calls"] == 0.25 and once.extra["distinct_calls"] == 1.0
    assert combine(loop, None)["reward"] < combine(once, None)["reward"] < 0.3
    assert _reward(_episode("In Tokyo it is 18:30.")) > 3 * combine(once, None)["reward"]
    no_weight = RewardConfig(weights=RewardWeights(distinct_calls=0))  # negative control
    assert combine(loop, None, no_weight)["reward"] == pytest.approx(combine(once, None, no_weight)["reward"])
    assert "distinct_calls" not in run_checks(Trajectory(id="n", task_id="tz", final_answer="Hi"), TIME_TASK).extra

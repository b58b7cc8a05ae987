"""RULER with a fake scripted judge: id matching, repair retries, unscored groups, permutations, cache,
concurrency. The fake (tests.judge_fakes.FakeScriptedJudge) stands in for the model because the point here is
the parser and retry logic, which a real model exercises only by chance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from judges import JudgeCache, JudgeConfig, Ruler, permutation_orders
from mcp_rl.errors import JudgeError
from mcp_rl.task import Task
from mcp_rl.trajectory import Trajectory
from tests.judge_fakes import FakeScriptedJudge

SYSTEM = "You are a shop assistant. SYSTEM-PROMPT-MARKER"
TASK = Task(id="task-1", text="How many tents are in stock?", source="grounded", reference_answer="14")


def traj(tid: str, answer: str | None, task_id: str = "task-1", group: str = "g1") -> Trajectory:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK.text}]
    if answer:
        msgs.append({"role": "assistant", "content": answer})
    return Trajectory(
        id=tid, task_id=task_id, group_id=group, task_text=TASK.text, messages=msgs, final_answer=answer
    )


GROUP = [
    traj("a", "There are 14 tents."),
    traj("b", "About 3 tents."),
    traj("c", None),
    traj("d", "14 tents, I think"),
]
QUALITY = {"There are 14 tents.": 1.0, "About 3 tents.": 0.2, "(none given)": 0.0, "14 tents, I think": 0.8}


def shown_ids(messages) -> list[str]:
    return re.findall(r"^### (t\d+)$", messages[1]["content"], flags=re.M)


def by_content(messages) -> str:
    """A judge that scores by what each id shows, so any id/position mix-up changes the result."""
    user = messages[1]["content"]
    blocks = re.split(r"^### (t\d+)$", user, flags=re.M)[1:]
    scores = []
    for tid, body in zip(blocks[::2], blocks[1::2], strict=True):
        answer = re.search(r"FINAL ANSWER: (.*)", body).group(1).strip()
        scores.append({"id": tid, "explanation": f"answer {answer!r}", "score": QUALITY[answer]})
    scores.reverse()  # entries out of order on purpose: matching must go by id
    return json.dumps({"scores": scores})


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def good_reply(n: int) -> str:
    return json.dumps({"scores": [{"id": f"t{i + 1}", "explanation": "ok", "score": 0.5} for i in range(n)]})


def test_scores_match_trajectories_by_id_in_any_order():
    judge = FakeScriptedJudge([by_content])
    gs = run(Ruler(judge).score_group, GROUP, TASK)
    assert gs.scored and gs.attempts == 1
    assert gs.scores == {"a": 1.0, "b": 0.2, "c": 0.0, "d": 0.8}
    assert gs.explanations["b"] == "answer 'About 3 tents.'"


def test_prompt_sends_shared_prefix_once_with_reference_and_tools():
    judge = FakeScriptedJudge([by_content])
    tools = [
        {"type": "function", "function": {"name": "count_items", "description": "Count", "parameters": {}}}
    ]
    run(Ruler(judge).score_group, GROUP, TASK, tools)
    user = judge.calls[0][1]["content"]
    assert user.count("SYSTEM-PROMPT-MARKER") == 1
    assert user.count(TASK.text) == 1  # the task is part of the shared start, shown once
    assert "Reference answer" in user and "\n14" in user
    assert "count_items" in user
    assert shown_ids(judge.calls[0]) == ["t1", "t2", "t3", "t4"]
    assert judge.sampling[0].temperature == 0.0


def test_permutations_average_and_map_back_to_the_right_trajectories():
    judge = FakeScriptedJudge([by_content])
    gs = run(Ruler(judge, JudgeConfig(permutations=3, seed=7)).score_group, GROUP, TASK)
    assert len(judge.calls) == 3 and len(gs.permutation_scores) == 3
    # A content-based judge gives the same score in every order: averages equal the qualities, std 0.
    assert gs.scores == pytest.approx({"a": 1.0, "b": 0.2, "c": 0.0, "d": 0.8})
    assert all(v == pytest.approx(0.0) for v in gs.score_std.values())
    # The orders really differed: the trajectory shown first changed.
    firsts = {
        re.search(r"### t1\n.*?FINAL ANSWER: (.*)", c[1]["content"], flags=re.S).group(1) for c in judge.calls
    }
    assert len(firsts) > 1


def test_position_biased_judge_is_averaged_out():
    # Always gives t1 1.0 and the rest 0: with identity + reverse orders the ends average to 0.5.
    judge = FakeScriptedJudge(
        [json.dumps({"scores": [{"id": f"t{i}", "score": 1.0 if i == 1 else 0.0} for i in range(1, 5)]})]
    )
    gs = run(Ruler(judge, JudgeConfig(permutations=2)).score_group, GROUP, TASK)
    assert gs.scores["a"] == 0.5 and gs.scores["d"] == 0.5 and gs.scores["b"] == 0.0
    assert gs.score_std["a"] == 0.5


def test_permutation_orders_are_deterministic_permutations():
    orders = permutation_orders(5, 4, seed=3)
    assert orders[0] == [0, 1, 2, 3, 4] and orders[1] == [4, 3, 2, 1, 0]
    assert all(sorted(o) == list(range(5)) for o in orders)
    assert orders == permutation_orders(5, 4, seed=3)
    assert (
        permutation_orders(5, 1, seed=3, shuffle=True)[0] == permutation_orders(5, 1, seed=3, shuffle=True)[0]
    )


@pytest.mark.parametrize(
    ("bad", "told"),
    [
        ("The first one is best, then the last.", "could not be read as JSON"),
        ('{"scores": [{"id": "t1", "score": 0.5}]}', "missing for: t2, t3, t4"),
        (json.dumps({"scores": [{"id": f"x{i}", "score": 0.5} for i in range(4)]}), "do not exist"),
        (
            json.dumps({"scores": [{"id": f"t{i}", "score": 5} for i in range(1, 5)]}),
            "outside the allowed range",
        ),
        ('```json\n{"scores": [{"id": "t1", "score": 0.5}, {"id": "t2", "expl', "cut off"),
    ],
)
def test_bad_reply_gets_a_repair_that_names_the_problem(bad: str, told: str):
    judge = FakeScriptedJudge([bad, good_reply(4)])
    gs = run(Ruler(judge).score_group, GROUP, TASK)
    assert gs.scored and gs.attempts == 2
    repair_conv = judge.calls[1]
    assert repair_conv[-2] == {"role": "assistant", "content": bad}
    assert told in repair_conv[-1]["content"]
    assert "t1, t2, t3, t4" in repair_conv[-1]["content"]


def test_persistently_bad_judge_leaves_group_unscored_with_reason():
    judge = FakeScriptedJudge(['{"scores": [{"id": "t1", "score": 0.5}]}'])
    gs = run(Ruler(judge, JudgeConfig(max_retries=2)).score_group, GROUP, TASK)
    assert not gs.scored and gs.scores == {}
    assert len(judge.calls) == 3 and gs.attempts == 3
    assert "unscored after 3 judge attempts" in gs.reason and "t2" in gs.reason
    assert gs.usage.calls == 3


def test_judge_exceptions_and_empty_results_never_escape():
    judge = FakeScriptedJudge([RuntimeError("rate limited"), None, ""])
    gs = run(Ruler(judge, JudgeConfig(max_retries=2)).score_group, GROUP, TASK)
    assert not gs.scored
    joined = " | ".join(gs.problems)
    assert "RuntimeError: rate limited" in joined
    assert "no completion" in joined
    assert "empty" in joined
    assert gs.usage.failed_calls == 2


def test_exception_then_success_recovers():
    judge = FakeScriptedJudge([ConnectionError("boom"), by_content])
    gs = run(Ruler(judge).score_group, GROUP, TASK)
    assert gs.scored and gs.scores["a"] == 1.0 and gs.attempts == 2


def test_slow_judge_times_out_as_unscored():
    judge = FakeScriptedJudge([by_content], delay_s=5.0)
    gs = run(Ruler(judge, JudgeConfig(timeout_s=0.05, max_retries=1)).score_group, GROUP, TASK)
    assert not gs.scored and "did not answer within" in gs.reason


def test_one_failed_order_of_several_still_scores():
    judge = FakeScriptedJudge([by_content, "garbage", "garbage", "garbage"])
    gs = run(
        Ruler(judge, JudgeConfig(permutations=2, max_retries=2, max_concurrency=1)).score_group, GROUP, TASK
    )
    assert gs.scored and gs.failed_permutations == 1 and "1 of 2 orders failed" in gs.reason
    assert gs.scores["a"] == 1.0


def test_cache_hits_cost_nothing_and_keys_on_content(tmp_path: Path):
    cache_dir = tmp_path / "cache"
    first = FakeScriptedJudge([by_content])
    gs1 = run(Ruler(first, cache=JudgeCache(cache_dir)).score_group, GROUP, TASK)
    assert len(list(cache_dir.rglob("*.json"))) == 1

    again = FakeScriptedJudge([RuntimeError("must not be called")])
    gs2 = run(Ruler(again, cache=JudgeCache(cache_dir)).score_group, GROUP, TASK)
    assert again.calls == [] and gs2.scores == gs1.scores and gs2.usage.cached == 1 and gs2.usage.calls == 0

    # Anything that changes the question misses: rubric, trajectory content, judge model.
    other_rubric = FakeScriptedJudge([by_content])
    run(
        Ruler(other_rubric, JudgeConfig(rubric="- be strict"), cache=JudgeCache(cache_dir)).score_group,
        GROUP,
        TASK,
    )
    changed = [*GROUP[:3], traj("d", "14 tents.")]
    QUALITY["14 tents."] = 0.9
    other_content = FakeScriptedJudge([by_content])
    run(Ruler(other_content, cache=JudgeCache(cache_dir)).score_group, changed, TASK)
    other_model = FakeScriptedJudge([by_content], name="another-judge")
    run(Ruler(other_model, cache=JudgeCache(cache_dir)).score_group, GROUP, TASK)
    assert [len(j.calls) for j in (other_rubric, other_content, other_model)] == [1, 1, 1]


def test_failures_are_not_cached_and_corrupt_entries_are_misses(tmp_path: Path):
    cache = JudgeCache(tmp_path)
    run(Ruler(FakeScriptedJudge(["nope"]), JudgeConfig(max_retries=0), cache=cache).score_group, GROUP, TASK)
    assert list(tmp_path.rglob("*.json")) == []
    run(Ruler(FakeScriptedJudge([by_content]), cache=cache).score_group, GROUP, TASK)
    (entry,) = list(tmp_path.rglob("*.json"))
    entry.write_text("{not json")
    judge = FakeScriptedJudge([by_content])
    gs = run(Ruler(judge, cache=JudgeCache(tmp_path)).score_group, GROUP, TASK)
    assert gs.scored and len(judge.calls) == 1


def test_concurrency_is_bounded_and_each_group_reported():
    judge = FakeScriptedJudge([by_content], delay_s=0.05)
    groups = [
        (
            [
                traj(f"{g}{x}", a, task_id=f"k{g}", group=f"g{g}")
                for x, a in zip("abcd", QUALITY, strict=False)
            ],
            None,
            None,
        )
        for g in range(6)
    ]
    # Answers come from QUALITY keys, so by_content can score them.
    ruler = Ruler(judge, JudgeConfig(max_concurrency=2))
    results = run(ruler.score_groups, groups)
    assert len(results) == 6 and all(r.scored for r in results)
    assert judge.max_in_flight == 2


def test_one_bad_group_does_not_stop_the_others():
    good = [traj("a", "There are 14 tents.", group="g1"), traj("b", "About 3 tents.", group="g1")]
    bad = [traj("c", "x", task_id="t2", group="g2"), traj("d", "y", task_id="t2", group="g2")]

    def judge_fn(messages):
        if "FINAL ANSWER: x" in messages[1]["content"]:
            raise ValueError("judge crashed on this group")
        return by_content(messages)

    def step(messages):
        return judge_fn(messages)

    results = run(Ruler(FakeScriptedJudge([step])).score_groups, [(good, TASK, None), (bad, None, None)])
    assert results[0].scored and not results[1].scored
    assert "ValueError: judge crashed" in results[1].reason


def test_misuse_is_a_clear_error_and_empty_group_is_unscored():
    mixed = [traj("a", "x"), traj("b", "y", task_id="other")]
    with pytest.raises(JudgeError, match="different tasks"):
        run(Ruler(FakeScriptedJudge(["{}"])).score_group, mixed)
    with pytest.raises(JudgeError, match="duplicate"):
        run(Ruler(FakeScriptedJudge(["{}"])).score_group, [traj("a", "x"), traj("a", "y")])
    gs = run(Ruler(FakeScriptedJudge(["{}"])).score_group, [])
    assert not gs.scored and gs.reason == "empty group"


def test_usage_prices_api_names_from_litellms_bundled_table():
    judge = FakeScriptedJudge([by_content], name="gpt-4.1-mini")
    judge.cost_free = False  # priced like the API model it is named after
    gs = run(Ruler(judge).score_group, GROUP, TASK)
    assert gs.usage.calls == 1 and gs.usage.prompt_tokens > 200 and gs.usage.completion_tokens > 20
    assert gs.usage.cost_usd > 0 and not gs.usage.estimated

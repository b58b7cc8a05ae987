"""Judge output parsing: every malformed shape a small model produces is recovered or named precisely.
(The JSON extraction underneath is tested in test_structured.py.)"""

from __future__ import annotations

import pytest

from judges.scores import check_scores

IDS = ["t1", "t2", "t3"]


def test_check_scores_valid_and_matched_by_id_not_position():
    text = (
        '{"scores": [{"id": "t3", "explanation": "c", "score": 0.1},'
        ' {"id": "t1", "explanation": "a", "score": 0.9}, {"id": "t2", "explanation": "b", "score": 0.5}]}'
    )
    check = check_scores(text, IDS)
    assert check.ok
    assert {k: v.score for k, v in check.entries.items()} == {"t1": 0.9, "t2": 0.5, "t3": 0.1}
    assert check.entries["t3"].explanation == "c"


def test_check_scores_lenient_forms():
    # A bare list, upper-case or numeric ids, scores as numeric strings.
    check = check_scores(
        '[{"id": "T1", "score": "0.5"}, {"id": 2, "score": 1}, {"id": "3", "score": 0}]', IDS
    )
    assert check.ok, check.problems
    assert check.entries["t2"].score == 1.0


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"scores": [{"id": "t1", "score": 0.5}, {"id": "t2", "score": 0.4}]}', "missing for: t3"),
        (
            '{"scores": [{"id": "t1", "score": 0.5}, {"id": "t1", "score": 0.6}, {"id": "t2", "score": 0.1},'
            ' {"id": "t3", "score": 0.2}]}',
            "more than once: t1",
        ),
        (
            '{"scores": [{"id": "t1", "score": 0.5}, {"id": "t2", "score": 0.1}, {"id": "t9", "score": 0.2}]}',
            "do not exist: t9",
        ),
        (
            '{"scores": [{"id": "t1", "score": 7}, {"id": "t2", "score": 0.1}, {"id": "t3", "score": 0}]}',
            "outside",
        ),
        (
            '{"scores": [{"id": "t1", "score": -0.1}, {"id": "t2", "score": 0.1}, {"id": "t3", "score": 0}]}',
            "outside",
        ),
        (
            '{"scores": [{"id": "t1", "score": "high"}, {"id": "t2", "score": 1}, {"id": "t3", "score": 0}]}',
            "not a number",
        ),
        ('{"results": []}', 'no "scores" list'),
        ('{"scores": "t1=0.5"}', "must be a list"),
        ("I think t1 is best.", "could not be read as JSON"),
    ],
)
def test_check_scores_problems(reply: str, expected: str):
    check = check_scores(reply, IDS)
    assert not check.ok
    assert any(expected in p for p in check.problems), check.problems


def test_bad_score_is_not_also_reported_missing():
    check = check_scores(
        '{"scores": [{"id": "t1", "score": 2}, {"id": "t2", "score": 0.1}, {"id": "t3", "score": 0}]}', IDS
    )
    assert len(check.problems) == 1 and "t1" in check.problems[0]


def test_extra_fields_like_the_copied_answer_are_tolerated():
    reply = (
        '{"scores": ['
        + ", ".join(
            f'{{"id": "t{i}", "answer": "a{i}", "explanation": "e", "score": 0.{i}}}' for i in (1, 2, 3)
        )
        + "]}"
    )
    check = check_scores(reply, IDS)
    assert check.ok and check.entries["t2"].score == 0.2

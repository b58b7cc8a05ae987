"""Strict answer grading: an answer is a statement for a person, read by the type of its reference.

Each rule of `judges.answers` has cases that must pass and cases that must fail; the first block is
the measured defects of the old grader (a pasted JSON result accepted, a 1% tolerance on every
number, "6:30 pm" refused for 18:30)."""

from __future__ import annotations

import pytest

from judges import answer_matches
from judges.answers import polarity, split_items, statement

PASTED = (
    '```json {"timezone": "Europe/London", "datetime": "2026-12-03T20:05:11+00:00", '
    '"day_of_week": "Thursday", "is_dst": false}```'
)
RAW = '{"timezone": "Europe/London", "datetime": "2026-12-03T20:05:11+00:00", "is_dst": false}'

CASES = [
    # --- the measured defects -------------------------------------------------------------------
    (PASTED, "no", False),
    (PASTED, "Thursday", False),
    (PASTED, "2026-12-03", False),
    (PASTED, "20:05", False),
    (RAW, "no", False),
    ("Here is the result: " + RAW, "20:05", False),
    ("It is 2040-12-03", "2026-12-03", False),
    ("101 units", "100", False),
    ("6:30 pm", "18:30", True),
    # --- integers: exact ------------------------------------------------------------------------
    ("There are 100 units.", "100", True),
    ("1,234", "1234", True),
    ("It costs $1,234.00.", "1234", True),
    ("100.0", "100", True),
    ("99 units", "100", False),
    ("100.4", "100", False),
    ("It is six.", "6", True),  # a number word, where no digits are written
    ("It is seven.", "6", False),
    ("Stock is at -3.", "-3", True),
    ("Stock is at 3.", "-3", False),
    # --- decimals: to the reference's precision -------------------------------------------------
    ("12.5", "12.5", True),
    ("12.50", "12.5", True),
    ("12.49", "12.5", False),
    ("12.6", "12.5", False),
    ("3.14", "3.14", True),
    ("3.1", "3.14", False),
    ("3.141", "3.14", True),
    ("3.146", "3.14", False),  # rounds to 3.15
    ("It is 482.99 USD.", "482.99", True),
    ("It is $483.", "482.99", False),
    ("It is about 3.33.", "3.3333333333", True),  # a machine float may be rounded to 2 places
    ("It is about 3.3.", "3.3333333333", False),
    ("Tokyo is 9 hours ahead.", "+9.0h", True),
    ("Tokyo is 8 hours ahead.", "+9.0h", False),
    # --- one value where one is asked -----------------------------------------------------------
    ("The numbers are 1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "6", False),
    ("Stock went from -3 to 5", "-3", False),
    ("It has 6 in stock at $482.99.", "6", False),
    ("The Basecamp 6P Cabin Tent has 6 in stock.", "6", True),  # 6P is part of a name, not a number
    ("time6 time7", "6", False),  # digits glued to a word are no number
    # --- dates: exact, in any common form -------------------------------------------------------
    ("2026-12-03", "2026-12-03", True),
    ("It is December 3, 2026.", "2026-12-03", True),
    ("3 December 2026", "2026-12-03", True),
    ("Dec 3rd, 2026", "2026-12-03", True),
    ("Thursday, 3 Dec 2026", "2026-12-03", True),
    ("the 3rd of December 2026", "2026-12-03", True),
    ("It is 2026-12-03T20:05:11+00:00 there.", "2026-12-03", True),
    ("2026-12-04", "2026-12-03", False),
    ("December 4, 2026", "2026-12-03", False),
    ("It is 2026-12-03 or 2026-12-04.", "2026-12-03", False),
    # --- clock times: 12 h and 24 h -------------------------------------------------------------
    ("6:30 PM", "18:30", True),
    ("It is 18:30:00.", "18:30", True),
    ("half past six in the evening", "18:30", True),
    ("It is 2026-12-03T20:05:11+00:00 there.", "20:05", True),
    ("8:05 pm in London", "20:05", True),
    ("8:45 pm", "08:45", False),
    ("8:45 am", "08:45", True),
    ("8:45", "08:45", True),
    ("6:30", "18:30", False),  # without am/pm, 6:30 is morning
    ("It is 18:31.", "18:30", False),
    ("It is 7 pm.", "19:00", True),
    # --- day and month names --------------------------------------------------------------------
    ("It is Thursday.", "Thursday", True),
    ("Thursday, December 3, 2026", "Thursday", True),
    ("It is Friday.", "Thursday", False),
    ("It is 2026-12-03.", "Thursday", False),  # a date does not state its weekday
    ("December", "December", True),
    ("It is Dec 2026.", "December", True),
    ("November", "December", False),
    # --- yes / no: by what the sentence claims --------------------------------------------------
    ("No, London is not observing daylight saving time.", "no", True),
    ("It is not daylight saving time there.", "no", True),
    ("There is no daylight saving in London now.", "no", True),
    ("Yes.", "no", False),
    ("Yes, London is observing daylight saving time.", "yes", True),
    ("Yes, it is not daylight saving time.", "yes", False),  # says both
    ("No idea", "yes", False),
    ("No idea", "no", False),
    ("I could not find whether London observes it.", "no", False),
    ("Yes and no", "yes", False),
    ("London is on GMT.", "yes", False),  # claims nothing either way
    # --- ids and names: exact, case-insensitive, whole ------------------------------------------
    ("ITM-017", "ITM-017", True),
    ("It is itm-017.", "ITM-017", True),
    ("ITM-0170", "ITM-017", False),
    ("ITM-018", "ITM-017", False),
    ("Both ITM-017 and ITM-018 match.", "ITM-017", False),
    ("the firefly tent light!", "Firefly Tent Light", True),
    ("Beacon 400 Headlamp", "Firefly Tent Light", False),
    ("Firefly Tent", "Firefly Tent Light", False),
    ("The zone is America/New_York.", "America/New_York", True),
    ("The zone is America/Chicago.", "America/New_York", False),
    # --- lists: sets, every item, typed extras fail ---------------------------------------------
    ("Camp Kettle 1L and Summit Dome 4P Tent", "Summit Dome 4P Tent, Camp Kettle 1L", True),
    ("The Summit Dome 4P Tent", "Summit Dome 4P Tent, Camp Kettle 1L", False),
    ('["b", "a"]', '["A", "B"]', True),
    ("3, 5 and 7", "[7, 3, 5]", True),
    ("3, 5, 7 and 9", "[7, 3, 5]", False),
    ("3 and 5", "[7, 3, 5]", False),
    ("We have 6 in stock at $482.99 each.", "6 in stock; 482.99 USD", True),
    ("We have 6 in stock.", "6 in stock; 482.99 USD", False),
    ("Item SKU-104 has 7", "SKU-104: 7", True),
    ("Item SKU-104 has 8", "SKU-104: 7", False),
    # --- no answer ------------------------------------------------------------------------------
    ("", "42", False),
    (None, "42", False),
]


@pytest.mark.parametrize(("answer", "reference", "correct"), CASES)
def test_an_answer_is_graded_by_the_type_of_its_reference(answer, reference, correct):
    assert answer_matches(answer, reference).correct is correct


def test_the_table_covers_every_rule_with_at_least_sixty_cases():
    assert len(CASES) >= 60
    assert sum(1 for *_, ok in CASES if ok) >= 25 and sum(1 for *_, ok in CASES if not ok) >= 25


def test_a_pasted_json_result_is_not_a_statement():
    m = answer_matches(PASTED, "20:05")
    assert m.how == "not a statement" and m.missing == ["20:05"]
    assert statement(PASTED) is None and statement("Here is the result: " + RAW) is None
    assert statement('["a", "b"]') == "a, b"  # a list of plain values is a list answer
    # Prose around a JSON block is graded on the prose alone.
    assert statement("It is 20:05. " + RAW) == "It is 20:05."


def test_values_the_question_gives_may_be_said_back():
    question = "How many items cost under $100?"
    assert not answer_matches("There are 6 items under $100.", "6").correct
    assert answer_matches("There are 6 items under $100.", "6", context=question).correct
    convert = "What is 14:00 in New York in London time?"
    assert answer_matches("2 pm in New York is 7 pm in London.", "19:00", context=convert).correct
    assert not answer_matches("2 pm in New York is 8 pm in London.", "19:00", context=convert).correct


def test_a_complete_list_fails_with_items_the_reference_lacks():
    ref = "Summit Dome 4P Tent, Camp Kettle 1L"
    three = "Summit Dome 4P Tent, Camp Kettle 1L and Firefly Tent Light"
    assert answer_matches(three, ref).correct  # not a complete list: extras are allowed
    m = answer_matches(three, ref, complete=True)
    assert not m.correct and m.extra == ["Firefly Tent Light"]
    bullets = "The tents are:\n- Summit Dome 4P Tent\n- Camp Kettle 1L\n- Beacon 400 Headlamp"
    assert answer_matches(bullets, ref, complete=True).extra == ["Beacon 400 Headlamp"]
    sentence = (
        "The two best-rated items in stock are the Summit Dome 4P Tent (4.9) and the Camp Kettle 1L (4.8)."
    )
    assert answer_matches(sentence, ref, complete=True).correct
    assert answer_matches("They are: Summit Dome 4P Tent and Camp Kettle 1L.", ref, complete=True).correct


def test_the_match_says_what_is_missing_and_what_conflicts():
    m = answer_matches("Only the tent", "Summit Dome 4P Tent; Camp Kettle 1L")
    assert m.how == "items" and m.missing == ["Summit Dome 4P Tent", "Camp Kettle 1L"]
    m = answer_matches("It is 101 or maybe 100.", "100")
    assert m.how == "number" and m.missing == [] and m.conflicting == ["101"]


def test_a_written_date_is_one_reference_item():
    assert split_items("December 3, 2026") == ["December 3, 2026"]
    assert split_items("1,234") == ["1,234"]
    assert split_items("6 in stock; 482.99 USD") == ["6 in stock", "482.99 USD"]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("No, it is not.", "no"),
        ("Nope", "no"),
        ("False.", "no"),
        ("True", "yes"),
        ("Yes. It was not in summer, but it is now.", "yes"),  # the opposite in a later sentence
        ("I don't know.", None),
        ("London is on GMT.", None),
    ],
)
def test_polarity_reads_what_a_sentence_claims(text, claim):
    assert polarity(text) == claim

"""The pure pieces of scenario_gen: answers read from results, argument synthesis, validators,
near-duplicates, the split."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from mcp_rl.answer_rule import apply_rule, result_json
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.task import AnswerRule, ReferenceCall, Task
from scenario_gen.argsynth import param_candidates, schema_errors, synthesize
from scenario_gen.dedup import NgramSimilarity, default_similarity, minilm_zip, near_duplicates
from scenario_gen.facts import extract_facts
from scenario_gen.grounded import gives_answer_away, mentions_ok, value_variants
from scenario_gen.language import detect_language, matches_language
from scenario_gen.split import split_tasks
from scenario_gen.validate import check_task, leaked_names, strip_tool_mentions
from scenario_gen.values import ValuePool

# --- answers read from results --------------------------------------------------------------


def _by_what(facts):
    return {f.what: f for f in facts}


def test_facts_from_a_clock_are_marked_time_dependent():
    now = datetime.now(UTC)
    text = json.dumps(
        {
            "timezone": "Asia/Tokyo",
            "datetime": now.isoformat(timespec="seconds"),
            "day_of_week": "Friday",
            "is_dst": False,
        }
    )
    facts = _by_what(extract_facts(text, {"timezone": "Asia/Tokyo"}))
    assert "the `timezone`" not in facts  # echoes the argument: no question there
    hhmm = facts["the time of day (HH:MM) in `datetime`"]
    assert hhmm.answer == now.strftime("%H:%M") and hhmm.dated
    assert facts["the `is_dst`"].answer == "no" and facts["the `is_dst`"].dated
    assert all(apply_rule(f.rule, [text]) == f.answer for f in facts.values())


def test_a_conversion_keeps_its_time_of_day_stable():
    day = (datetime.now(UTC) + timedelta(days=40)).date()  # a date far from today: nothing is "now"
    text = json.dumps(
        {
            "source": {"timezone": "Asia/Tokyo", "datetime": f"{day}T14:00:00+09:00"},
            "target": {"timezone": "Europe/Paris", "datetime": f"{day}T06:00:00+01:00"},
            "time_difference": "-8.0h",
        }
    )
    args = {"source_timezone": "Asia/Tokyo", "time": "14:00", "target_timezone": "Europe/Paris"}
    facts = _by_what(extract_facts(text, args))
    target = facts["the time of day (HH:MM) in `datetime` in `target`"]
    assert target.answer == "06:00" and not target.dated
    assert "the time of day (HH:MM) in `datetime` in `source`" not in facts  # 14:00 is the argument
    assert facts["the `time_difference`"].answer == "-8.0h"


def test_list_facts_select_by_name_and_respect_a_cut_list():
    text = json.dumps(
        {
            "total_matches": 7,
            "results": [
                {"id": "ITM-001", "name": "Summit Dome", "price": 341.99},
                {"id": "ITM-002", "name": "Featherlite", "price": 216.99},
            ],
        }
    )
    facts = extract_facts(text, {"query": "tent"})
    price = next(f for f in facts if f.answer == "216.99")
    assert price.mentions == [["Featherlite"]]
    assert price.rule.path == ["results", {"key": "name", "equals": "Featherlite"}, "price"]
    # 2 shown of 7: the list's length and names do not answer "how many" / "which"
    assert not any(f.rule.kind in ("count", "names") for f in facts)
    assert any(f.what == "the `total_matches`" and f.answer == "7" for f in facts)
    # the rule follows the item, not its position
    moved = json.dumps({"total_matches": 7, "results": list(reversed(json.loads(text)["results"]))})
    assert apply_rule(price.rule, [moved]) == "216.99"


def test_list_of_content_blocks_and_counts():
    text = '{"category": "tents", "item_count": 5}\n{"category": "cooking", "item_count": 4}'
    assert result_json(text) == [
        {"category": "tents", "item_count": 5},
        {"category": "cooking", "item_count": 4},
    ]
    facts = extract_facts(text)
    kinds = {(f.rule.kind, f.answer) for f in facts}
    assert ("count", "2") in kinds and ("names", "tents, cooking") in kinds
    assert any(f.answer == "4" and f.mentions == [["cooking"]] for f in facts)


def test_an_element_without_a_name_field_is_named_by_all_its_short_fields():
    # a knowledge graph's relations: `to` happens to be distinct, but "the relation of Ines" is not a
    # question; it must name both ends (the memory server's set had 5 of 13 such references wrong)
    text = json.dumps(
        {
            "relations": [
                {"type": "relation", "from": "Anna Weber", "to": "Ines Moreau", "relationType": "friend of"},
                {"type": "relation", "from": "Paul Moreau", "to": "Anna Weber", "relationType": "married to"},
            ]
        }
    )
    facts = extract_facts(text)
    rel = next(f for f in facts if f.answer == "married to")
    assert sorted(g[0] for g in rel.mentions) == ["Anna Weber", "Paul Moreau"]
    assert "Paul Moreau" in rel.what and "Anna Weber" in rel.what
    assert mentions_ok("What is the relationship between Anna Weber and someone?", rel.mentions) == ["Paul Moreau"]
    assert mentions_ok("How is Paul Moreau related to Anna Weber?", rel.mentions) == []
    # the answer may be one end, when the question names the other end and the relation
    who = next(f for f in facts if f.answer == "Ines Moreau")
    assert sorted(g[0] for g in who.mentions) == ["Anna Weber", "friend of"]
    # nor is "the `from` of every relation" a question: a relation has no name
    assert not any(f.rule.kind == "names" for f in facts)
    # `type` is the same in every element: it names nothing
    assert not any(["relation"] in f.mentions for f in facts)
    assert apply_rule(rel.rule, [text]) == "married to"


def test_apply_rule_fails_softly():
    rule = AnswerRule(kind="field", path=["missing"])
    assert apply_rule(rule, ['{"a": 1}']) is None
    assert apply_rule(rule, ["not json"]) is None
    assert apply_rule(AnswerRule(kind="field", path=["a"], call_index=3), ['{"a": 1}']) is None
    assert apply_rule(AnswerRule(kind="count", path=["a"]), ['{"a": [1, 2, 3]}']) == "3"
    assert apply_rule(AnswerRule(kind="text"), ["Stock changed from 3 to 5."]) == "Stock changed from 3 to 5."


# --- argument synthesis --------------------------------------------------------------------


def test_param_candidates_use_the_schema_first():
    pool = ValuePool()
    assert [c.value for c in param_candidates("mode", {"enum": ["fast", "slow"]}, pool)] == ["fast", "slow"]
    tz = {"type": "string", "description": "IANA timezone (e.g., 'America/New_York', 'Europe/London')."}
    assert [c.value for c in param_candidates("timezone", tz, pool)] == ["America/New_York", "Europe/London"]
    times = param_candidates(
        "time", {"type": "string", "description": "Time in 24-hour format (HH:MM)"}, pool
    )
    assert all(len(c.value) == 5 and c.value[2] == ":" for c in times)
    lim = param_candidates("limit", {"type": "integer", "minimum": 1, "maximum": 3}, pool)
    assert all(1 <= c.value <= 3 for c in lim)


def test_ids_seen_in_results_feed_later_calls_and_remember_where_they_came_from():
    pool = ValuePool()
    pool.add_result({"items": [{"id": "ITM-007", "name": "Camp Kettle"}]}, step=4, arguments={})
    tool = ToolSpec(
        name="get_item",
        parameters={"type": "object", "properties": {"item_id": {"type": "string"}}, "required": ["item_id"]},
    )
    (p,) = synthesize(tool.parameters, pool, random.Random(0), k=1)
    assert p.arguments == {"item_id": "ITM-007"} and p.sources == [4] and not p.weak
    # a value the call itself sent is not learned from its result
    pool.add_result({"query": "kettle", "hits": 1}, step=5, arguments={"query": "kettle"})
    assert "query" not in pool.by_key


def test_optional_parameters_are_left_at_their_defaults():
    params = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words, e.g. 'tent'"},
            "max_results": {"type": "integer", "default": 5},
        },
        "required": ["query"],
    }
    for p in synthesize(params, ValuePool(), random.Random(1), k=3):
        # no evidence for any other value than the default: the server's default is used
        assert "max_results" not in p.arguments
        assert "query" in p.arguments
    assert synthesize({"type": "object", "properties": {}}, ValuePool(), random.Random(0))[0].arguments == {}
    # never the same value for two parameters of one kind (a conversion from UTC to UTC)
    tz = {"type": "string", "description": "e.g. 'Etc/UTC', 'Asia/Tokyo'"}
    conv = {
        "type": "object",
        "properties": {"source_timezone": tz, "target_timezone": tz},
        "required": ["source_timezone", "target_timezone"],
    }
    for p in synthesize(conv, ValuePool(), random.Random(0), k=4):
        assert p.arguments["source_timezone"] != p.arguments["target_timezone"]
    assert schema_errors(params, {}) and not schema_errors(params, {"query": "x"})


# --- validators ----------------------------------------------------------------------------


def test_tool_names_are_stripped_or_detected():
    names = ["get_item", "filter_items", "search"]
    assert leaked_names("search for a tent", names) == []  # a plain word is not a leak
    assert strip_tool_mentions("Use the get_item tool to find the price of ITM-001.", ["get_item"]) == (
        "Find the price of ITM-001."
    )
    assert (
        strip_tool_mentions("What is the price of ITM-001 (get_item)?", ["get_item"])
        == "What is the price of ITM-001?"
    )
    stuck = strip_tool_mentions("What does get_item return for ITM-001?", ["get_item"])
    assert leaked_names(stuck, names) == ["get_item"]


def test_check_task_reasons():
    ok = Task(id="a", text="Which tents are cheaper than 200 dollars?")
    assert check_task(ok, ["filter_items"], "en") is None
    assert check_task(ok.model_copy(update={"text": "hi"}), [], "en") == "empty or too short"
    assert check_task(ok.model_copy(update={"text": "1234567890 12345"}), [], "en") == "no words"
    fr = ok.model_copy(update={"text": "Quelles tentes sont en stock pour moins de 200 dollars ?"})
    assert check_task(fr, [], "en") == "wrong language" and check_task(fr, [], "fr") is None
    g = ok.model_copy(update={"source": "grounded"})
    assert check_task(g, [], "en") == "grounded without reference"


def test_language_guess():
    assert detect_language("What time is it in Tokyo right now?") == "en"
    assert detect_language("Wie viele Zelte sind noch auf Lager?") == "de"
    assert detect_language("東京は今何時ですか？") == "ja"
    assert detect_language("Tokyo 14:00") is None
    assert matches_language("Convert 14:00 Tokyo", "fr")  # can't tell: kept


def test_question_checks():
    assert "Tokyo" in value_variants("Asia/Tokyo") and "2 pm" in value_variants("14:00")
    assert "New York" in value_variants("America/New_York")
    assert mentions_ok("What time is it in New York now?", [["America/New_York", "New York"]]) == []
    assert mentions_ok("What time is it?", [["America/New_York", "New York"]]) == ["America/New_York"]
    assert gives_answer_away("Is the price of the kettle 29.99?", "29.99", [])
    assert not gives_answer_away("How many kettles are there?", "4", [["kettle"]])
    assert not gives_answer_away("Is Tokyo on summer time?", "no", [])
    # a clock time, with or without its leading zero (a writer turned the explored moment into the question)
    assert gives_answer_away("What is the time in London at 7:36 AM?", "07:36", [])
    assert gives_answer_away("What time is it in London at 07:36?", "07:36", [])
    assert not gives_answer_away("What time is it in Tokyo when it is 7:36 in London?", "16:36", [])
    assert not gives_answer_away("What time is it in London at 17:36?", "07:36", [])


# --- near-duplicates -------------------------------------------------------------------------


def test_ngram_catches_near_verbatim_copies_only():
    texts = [
        "How many tents are in stock right now?",
        "How many tents are in stock right now ?",
        "how many TENTS are in stock, right now",
        "Which headlamp has the best rating?",
    ]
    d = near_duplicates(texts, NgramSimilarity())
    assert d == {1: 0, 2: 0}


@pytest.mark.skipif(minilm_zip() is None, reason="the offline MiniLM package is not installed")
def test_embeddings_catch_paraphrases_but_keep_other_entities():
    sim = default_similarity()
    assert sim.name == "minilm"
    texts = [
        "How much does the Summit Dome 4P Tent cost?",
        "What is the price of the Summit Dome 4P Tent?",  # paraphrase: dropped
        "How much does the Featherlite Solo Tent cost?",  # another item: kept
        "What time is it in Tokyo?",
        "What time is it in Paris?",  # another city: kept
    ]
    assert near_duplicates(texts, sim) == {1: 0}


# --- split ----------------------------------------------------------------------------------


def _tasks(n: int) -> list[Task]:
    out = []
    for i in range(n):
        grounded = i % 3 == 0
        out.append(
            Task(
                id=f"t{i}",
                text=f"task number {i}",
                source="grounded" if grounded else "written",
                reference_calls=[ReferenceCall(tool="x")] if grounded else [],
                reference_answer="1" if grounded else None,
            )
        )
    return out


def test_split_is_deterministic_order_free_and_holds_both_sources():
    tasks = _tasks(30)
    a = {t.id: t.split for t in split_tasks(tasks, 0.2, seed=7)}
    shuffled = list(tasks)
    random.Random(3).shuffle(shuffled)
    b = {t.id: t.split for t in split_tasks(shuffled, 0.2, seed=7)}
    assert a == b
    val = [t for t in split_tasks(tasks, 0.2, seed=7) if t.split == "val"]
    assert len(val) == 6 and {t.source for t in val} == {"grounded", "written"}
    c = {t.id: t.split for t in split_tasks(tasks, 0.2, seed=8)}
    assert c != a  # another seed, another split
    # adding a task never moves the others
    more = {t.id: t.split for t in split_tasks([*tasks, *_tasks(31)[30:]], 0.2, seed=7)}
    assert sum(more[k] != v for k, v in a.items()) <= 2
    assert all(t.split == "train" for t in split_tasks(tasks, 0.0, test_fraction=0.0, seed=7))

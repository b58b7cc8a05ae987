"""Faithfulness: pasted results, values an answer states that no result holds, and arguments the
policy made up. Results here are copied from real servers (mcp-server-time, the example inventory);
`test_judges_checks.py` runs the same checks on results read from the live inventory server."""

from __future__ import annotations

import pytest

from judges.faithful import invented_arguments, pasted_result, reference_supported, unsupported_values
from mcp_rl.servers.results import CallStatus
from mcp_rl.trajectory import ToolCallRecord

TIME = (
    '{"timezone": "Europe/London", "datetime": "2026-12-03T20:05:11+00:00", '
    '"day_of_week": "Thursday", "is_dst": false}'
)
ITEMS = (
    '{"count": 3, "items": [{"id": "ITM-012", "name": "Firefly Tent Light", "price": 14.99, "stock": 9}, '
    '{"id": "ITM-011", "name": "Beacon 400 Headlamp", "price": 47.99, "stock": 4}, '
    '{"id": "ITM-013", "name": "Lumen Lantern", "price": 29.5, "stock": 0}]}'
)
TEXT_BLOCK = (
    "Shipping: orders over $50 ship free within 3 days.\n"
    "Coupons: one per order, not valid on sale items.\n"
    "Returns: 30 days with the receipt."
)


@pytest.mark.parametrize(
    ("answer", "results", "pasted"),
    [
        (TIME, [TIME], True),
        ("```json\n" + TIME + "\n```", [TIME], True),
        ("Here is the result: " + TIME, [TIME], True),
        ('{"answer": 20}', ['{"result": 20.0}'], True),  # raw JSON even when no result says so
        (TEXT_BLOCK, [TEXT_BLOCK], True),
        ("Policy:\n" + TEXT_BLOCK, [TEXT_BLOCK], True),
        ("20.0", ['{"result": 20.0}'], False),
        ("The result is 20.", ['{"result": 20.0}'], False),
        ("It is 8:05 pm on Thursday in London, and not daylight saving time.", [TIME], False),
        ("Orders over $50 ship free.", [TEXT_BLOCK], False),
        ("Stock of A is 6 (price 9.5).", ["Stock of A is 6 (price 9.5)."], False),  # a one-line sentence
        ('["Firefly Tent Light", "Lumen Lantern"]', [ITEMS], False),  # a list of names is an answer
    ],
)
def test_a_paste_is_told_from_an_answer(answer, results, pasted):
    assert (pasted_result(answer, results) is not None) is pasted


def test_a_paste_says_why():
    assert "raw JSON" in (pasted_result(TIME, [TIME]) or "")
    assert "copies tool result 1" in (pasted_result(TEXT_BLOCK, [TEXT_BLOCK]) or "")


@pytest.mark.parametrize(
    ("answer", "task", "results", "unsupported"),
    [
        # the real run: 100 / 5 returned 20.0 and the answer said 40
        ('"result": "40.0"', "What is 100 / 5?", ['{"result": 20.0}'], ["40.0"]),
        ("100 / 5 is 20.", "What is 100 / 5?", ['{"result": 20.0}'], []),
        ("It is 8:05 pm on Thursday, December 3 in London.", "What time is it in London?", [TIME], []),
        ("It is 21:05 on 2026-12-04.", "What time is it in London?", [TIME], ["21:05", "2026-12-04"]),
        ("There are 3 lighting items.", "How many lighting items?", [ITEMS], []),
        ("The cheapest is ITM-012 at $14.99.", "Cheapest light?", [ITEMS], []),
        ("The cheapest is ITM-014 at $12.99.", "Cheapest light?", [ITEMS], ["ITM-014", "$12.99"]),
        ("The lantern costs about $29.50.", "Lantern price?", [ITEMS], []),
        ("The headlamp costs about $48.", "Headlamp price?", [ITEMS], ["$48"]),  # rounded to no decimals
        ("Four headlamps are left: 4.", "How many headlamps?", [ITEMS], []),
        ("We have 12 of them.", "How many headlamps?", [], ["12"]),  # no result holds anything
    ],
)
def test_values_an_answer_states_must_come_from_the_task_or_a_result(answer, task, results, unsupported):
    assert unsupported_values(answer, task, results) == unsupported


def test_a_list_length_supports_a_count_but_not_a_longer_one():
    listing = '[{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]'
    assert unsupported_values("There are 4 of them.", "How many?", [listing]) == []
    assert unsupported_values("There are 5 of them.", "How many?", [listing]) == ["5"]


def call(turn, name, arguments, result="", status=CallStatus.OK):
    return ToolCallRecord(turn=turn, name=name, arguments=arguments, status=status, result_text=result)


def test_arguments_from_the_task_or_an_earlier_result_are_not_invented():
    task = "What time is it in Tokyo, and what is the cheapest lighting item under $100?"
    calls = [
        call(1, "get_current_time", {"timezone": "Asia/Tokyo"}, TIME),
        call(
            1,
            "filter_items",
            {"category": "lights", "max_price": 100, "limit": 10, "in_stock_only": True},
            ITEMS,
        ),
        call(1, "filter_items", {"category": "lighting", "sort_by": "price", "descending": False}),
        call(2, "get_item", {"item_id": "ITM-012"}),
    ]
    assert invented_arguments(calls, task) == []


def test_invented_numbers_ids_dates_and_strings_are_named():
    task = "What is the average of 3 and 5? Is ITM-012 in stock?"
    calls = [
        call(1, "mean", {"values": [3, 5, 17]}),  # 17 is data nobody gave
        call(1, "get_item", {"item_id": "ITM-099"}),
        call(1, "get_item", {"item_id": "ITM-012"}, ITEMS),
        call(1, "convert_time", {"time": "14:00", "date": "2026-12-03"}),
        call(1, "search_items", {"query": "unicorn saddle"}),
        call(1, "update_stock", {"item_id": "ITM-012", "delta": 40}),
    ]
    assert invented_arguments(calls, task) == [
        "mean.values[2]=17",
        'get_item.item_id="ITM-099"',
        'convert_time.time="14:00"',
        'convert_time.date="2026-12-03"',
        'search_items.query="unicorn saddle"',
        "update_stock.delta=40",
    ]


def test_an_id_seen_only_in_a_result_of_the_same_turn_is_invented():
    calls = [
        call(1, "filter_items", {"category": "lighting"}, ITEMS),
        call(1, "get_item", {"item_id": "ITM-012"}),
    ]
    assert invented_arguments(calls, "What lighting do you have?") == ['get_item.item_id="ITM-012"']
    calls[1] = call(2, "get_item", {"item_id": "ITM-012"})
    assert invented_arguments(calls, "What lighting do you have?") == []


def test_bounds_choices_and_written_forms_are_not_data():
    task = "Convert 2 pm on December 3, 2026 from New York to London; list five items."
    calls = [
        call(
            1, "convert_time", {"time": "14:00", "date": "2026-12-03", "source_timezone": "America/New_York"}
        ),
        call(1, "list", {"limit": 5, "page": 1, "top_k": 50, "order": "desc", "unit": "C"}),
        call(1, "list", {"count": 5}),  # "five" in the task
    ]
    assert invented_arguments(calls, task) == []
    # A bound key does not excuse a number that is data, nor a list of numbers.
    assert invented_arguments([call(1, "list", {"limit": 5000, "ids": [7]})], task) == [
        "list.limit=5000",
        "list.ids[0]=7",
    ]
    # With the schema in hand, an enum choice is supported; without it, a free word is not.
    schemas = {"search": {"properties": {"mode": {"enum": ["fuzzy", "exact"]}, "q": {"type": "string"}}}}
    assert invented_arguments([call(1, "search", {"q": "fuzzy"})], task, schemas) == []
    assert invented_arguments([call(1, "search", {"q": "fuzzy"})], task) == ['search.q="fuzzy"']


def test_a_reference_answer_can_come_from_the_results():
    assert reference_supported("20:05", [TIME]) and reference_supported("Thursday", [TIME])
    assert reference_supported("no", [TIME])
    assert reference_supported("Firefly Tent Light; 14.99 USD", [ITEMS])
    assert reference_supported("3", [ITEMS])  # the length of the items list
    assert not reference_supported("21:05", [TIME])
    assert not reference_supported("Summit Dome 4P Tent", [ITEMS])
    assert not reference_supported("20:05", [])

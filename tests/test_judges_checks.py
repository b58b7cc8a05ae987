"""Deterministic checks on grounded tasks: answer matching, call rates, expected tools, and re-grading
against the live example server when the world has changed."""

from __future__ import annotations

import sys

import anyio
import pytest

from judges import answer_matches, refresh_reference, run_checks
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
from mcp_rl.servers.results import CallStatus, ToolResult
from mcp_rl.task import ReferenceCall, Task
from mcp_rl.trajectory import ToolCallRecord, Trajectory


@pytest.mark.parametrize(
    ("answer", "reference", "correct"),
    [
        ("There are 42 widgets in stock.", "42", True),
        ("There are 41 widgets.", "42", False),
        ("It costs $1,234.00.", "1234", True),
        ("It costs 1234.004 dollars", "1234", False),  # an integer is exact: no tolerance
        ("It costs 1300", "1234", False),
        ("We have 6 in stock at $482.99 each.", "6 in stock; 482.99 USD", True),
        ("We have 6 in stock.", "6 in stock; 482.99 USD", False),  # an expected item is missing
        ("Summit Dome 4P Tent and Camp Kettle 1L", "Summit Dome 4P Tent; Camp Kettle 1L", True),
        ("The Summit Dome 4P Tent", "Summit Dome 4P Tent; Camp Kettle 1L", False),
        ("the firefly tent light!", "Firefly Tent Light", True),
        ("Beacon 400 Headlamp", "Firefly Tent Light", False),
        ('["a", "b"]', '["B", "A"]', True),
        ("No, it is out of stock.", "no", True),
        ("Yes it is", "no", False),
        ("Yes and no", "yes", False),
        ("", "42", False),
        (None, "42", False),
        ("Stock is at -3 now", "-3", True),
        ("Stock went from -3 to 5", "-3", False),  # two numbers where one is asked
        ("Item SKU-104 has 7", "SKU-104: 7", True),
        # an ISO 8601 date-time holds its time after a letter T (what time tools return)
        ("It is 2026-12-02T13:59:12-05:00 there.", "13:59", True),
        ("It is 2026-12-02T13:59:12-05:00 there.", "2026-12-02", True),
        ("It is 2026-12-02T14:05:12-05:00 there.", "13:59", False),
        # ...but a pasted JSON result is no statement, whatever it holds
        ('{"datetime": "2026-12-02T13:59:12-05:00"}', "13:59", False),
        ('{"datetime": "2026-12-02T13:59:12-05:00"}', "2026-12-02", False),
    ],
)
def test_answer_matches(answer, reference, correct):
    assert answer_matches(answer, reference).correct is correct


def test_answer_match_reports_missing_items():
    m = answer_matches("Only the tent", "Summit Dome 4P Tent; Camp Kettle 1L")
    assert m.how == "items" and m.missing == ["Summit Dome 4P Tent", "Camp Kettle 1L"]


def call(name, ok=True, valid=True, args=None):
    status = CallStatus.OK if ok and valid else (CallStatus.INVALID if not valid else CallStatus.TOOL_ERROR)
    return ToolCallRecord(
        turn=1, name=name, arguments={} if args is None else args, valid=valid, status=status
    )


TASK = Task(
    id="t",
    text="How many Basecamp tents, and the price?",
    source="grounded",
    tools_expected=["search_items", "get_item"],
    reference_answer="6; 482.99",
)


def test_checks_rates_expected_tools_and_answer():
    calls = [
        call("search_items"),
        call("get_item", ok=False),
        call("filter_items", valid=False),
        ToolCallRecord(turn=2, name="", arguments=None, valid=False, status=CallStatus.INVALID),
    ]
    t = Trajectory(id="x", task_id="t", tool_calls=calls, final_answer="6 tents at $482.99")
    c = run_checks(t, TASK)
    assert c.n_calls == 4
    assert c.parse_rate == 0.75 and c.schema_valid_rate == 0.5 and c.no_error_rate == 0.25
    assert c.answered and c.answer_correct is True
    assert c.expected_tools_used == 1.0  # get_item was sent (valid), even though the tool then failed


def test_checks_without_calls_or_reference():
    t = Trajectory(id="x", task_id="t", final_answer=None)
    c = run_checks(t, Task(id="t", text="hi"))
    assert c.n_calls == 0 and c.parse_rate is None and not c.answered and c.answer_correct is None
    assert c.components() == {"answered": 0.0}
    c2 = run_checks(Trajectory(id="y", task_id="t", final_answer="7; 482.99"), TASK)
    assert c2.answer_correct is False and c2.expected_tools_used == 0.0
    # A fresh reference overrides the stored one.
    assert run_checks(
        Trajectory(id="y", task_id="t", final_answer="7; 482.99"), TASK, "7; 482.99"
    ).answer_correct


def test_refresh_reference_with_a_fake_caller_sync_and_async():
    task = Task(
        id="s",
        text="How many left?",
        source="grounded",
        answer_depends_on_state=True,
        reference_calls=[
            ReferenceCall(tool="get", arguments={"id": 1}, result_text='{"stock": 6, "price": 9.5}')
        ],
        reference_answer="6 left",
    )
    same = anyio.run(
        refresh_reference,
        task,
        lambda n, a: ToolResult(status=CallStatus.OK, text='{"stock": 6, "price": 9.5}'),
    )
    assert same.reference_answer == "6 left" and not same.changed

    async def moved(name, args):
        return ToolResult(status=CallStatus.OK, text='{"stock": 2, "price": 9.5}')

    fresh = anyio.run(refresh_reference, task, moved)
    assert fresh.changed and not fresh.stale and fresh.reference_answer == "2 left"

    gone = anyio.run(
        refresh_reference, task, lambda n, a: ToolResult(status=CallStatus.TOOL_ERROR, text="no such id")
    )
    assert gone.stale and gone.reference_answer is None and "now fails" in gone.reason

    added = anyio.run(
        refresh_reference,
        task,
        lambda n, a: ToolResult(status=CallStatus.OK, text='{"stock": 6, "price": 9.5, "x": 1}'),
    )
    assert added.changed and not added.stale and added.reference_answer == "6 left"
    renamed = anyio.run(
        refresh_reference,
        task,
        lambda n, a: ToolResult(status=CallStatus.OK, text='{"units": 6, "price": 9.5}'),
    )
    assert renamed.stale and renamed.reference_answer is None

    text_task = task.model_copy(
        update={"reference_calls": [ReferenceCall(tool="get", result_text="Stock of A is 6 (price 9.5).")]}
    )
    carried = anyio.run(
        refresh_reference,
        text_task,
        lambda n, a: ToolResult(status=CallStatus.OK, text="Stock of A is 11 (price 9.5)."),
    )
    assert carried.reference_answer == "11 left"


def test_refresh_reference_against_the_live_inventory_server():
    """Grade against the world as it is now: stock moves on the real server, the reference follows."""

    async def main():
        spec = ServerSpec.parse(f"{sys.executable} -m examples.servers.inventory --transport stdio --seed 0")
        async with ServerSession(spec, policy=ToolPolicy()) as s:
            rc = ReferenceCall(tool="get_item", arguments={"item_id": "ITM-003"})
            rc.result_text = (await s.call(rc.tool, rc.arguments)).text
            task = Task(
                id="inv",
                text="How many Basecamp 6P Cabin Tents are in stock, and at what price?",
                source="grounded",
                answer_depends_on_state=True,
                reference_calls=[rc],
                reference_answer="6 in stock; 482.99 USD",
            )
            unchanged = await refresh_reference(task, s.call)
            assert (await s.call("update_stock", {"item_id": "ITM-003", "delta": 4})).ok
            after_restock = await refresh_reference(task, s.call)
            assert (await s.call("set_price", {"item_id": "ITM-003", "price": 450.0})).ok
            after_price = await refresh_reference(task, s.call)
            return unchanged, after_restock, after_price

    unchanged, after_restock, after_price = anyio.run(main)
    assert unchanged.reference_answer == "6 in stock; 482.99 USD" and not unchanged.changed
    assert after_restock.reference_answer == "10 in stock; 482.99 USD"
    assert after_price.reference_answer == "10 in stock; 450 USD"
    t = Trajectory(id="x", task_id="inv", final_answer="We have 10 of them at $450.00 each.")
    assert run_checks(t, None, after_price.reference_answer).answer_correct
    assert not run_checks(t, None, "6 in stock; 482.99 USD").answer_correct


def test_digits_glued_to_a_word_do_not_match_a_standalone_number() -> None:
    # A noisy policy wrote "time6" and used to score as answering "6".
    assert not answer_matches("time6 time7", "6").correct
    assert answer_matches("The category holds 6 items.", "6").correct
    # ...while a reference that is itself an id with glued digits still matches its own form.
    assert answer_matches("It is SKU104.", "SKU104").correct


def test_refresh_reference_re_applies_the_tasks_answer_rule_on_the_live_server():
    """A task with an answer rule gets its answer read out of the new results exactly, even where
    carrying numbers over would be ambiguous (the stock and another field both move)."""
    from mcp_rl.task import AnswerRule

    async def main():
        spec = ServerSpec.parse(f"{sys.executable} -m examples.servers.inventory --transport stdio --seed 0")
        async with ServerSession(spec, policy=ToolPolicy()) as s:
            rc = ReferenceCall(tool="get_item", arguments={"item_id": "ITM-003"})
            rc.result_text = (await s.call(rc.tool, rc.arguments)).text
            task = Task(
                id="inv-rule",
                text="How many Basecamp 6P Cabin Tents are in stock?",
                source="grounded",
                answer_depends_on_state=True,
                reference_calls=[rc],
                reference_answer="6",
                answer_rule=AnswerRule(kind="field", call_index=0, path=["stock"]),
            )
            assert (await s.call("update_stock", {"item_id": "ITM-003", "delta": 3})).ok
            return await refresh_reference(task, s.call)

    fresh = anyio.run(main)
    assert fresh.changed and not fresh.stale
    assert fresh.reference_answer == "9" and fresh.reason == "answer rule re-applied"


def _live_calls():
    """Two turns against the live inventory server: a search, then the item it found."""

    async def main():
        spec = ServerSpec.parse(f"{sys.executable} -m examples.servers.inventory --transport stdio --seed 0")
        async with ServerSession(spec, policy=ToolPolicy()) as s:
            found = await s.call("search_items", {"query": "basecamp"})
            item = await s.call("get_item", {"item_id": "ITM-003"})
            return found, item

    found, item = anyio.run(main)
    assert found.ok and item.ok and "482.99" in item.text
    return [
        ToolCallRecord(
            turn=1,
            name="search_items",
            arguments={"query": "basecamp"},
            status=found.status,
            result_text=found.text,
        ),
        ToolCallRecord(
            turn=2,
            name="get_item",
            arguments={"item_id": "ITM-003"},
            status=item.status,
            result_text=item.text,
        ),
    ]


LIVE_TASK = Task(
    id="live",
    text="How many Basecamp 6P Cabin Tents do you have in stock, and what does one cost?",
    source="grounded",
    tools_expected=["get_item"],
    reference_answer="6 in stock; 482.99 USD",
)


def test_a_pasted_live_result_is_no_answer_and_not_correct():
    calls = _live_calls()
    pasted = Trajectory(id="p", task_id="live", tool_calls=calls, final_answer=calls[1].result_text)
    c = run_checks(pasted, LIVE_TASK)
    assert c.pasted and "raw JSON" in c.pasted_reason
    assert not c.answered and c.answer_correct is False and c.answer_faithful is None
    assert c.components()["answered"] == 0.0
    from judges import combine

    assert combine(c, None)["gate"] == 0.25  # gated like no answer at all


def test_faithfulness_checks_on_live_results():
    calls = _live_calls()
    right = run_checks(
        Trajectory(
            id="r", task_id="live", tool_calls=calls, final_answer="We have 6 of them, at $482.99 each."
        ),
        LIVE_TASK,
    )
    assert right.answered and right.answer_correct and not right.pasted
    assert (
        right.answer_faithful is True and right.arguments_faithful is True and right.needed_calls_ok is True
    )
    comps = right.components()
    assert comps["answer_faithful"] == comps["arguments_faithful"] == comps["needed_calls_ok"] == 1.0

    made_up = run_checks(
        Trajectory(
            id="m", task_id="live", tool_calls=calls, final_answer="We have 7 of them, at $482.99 each."
        ),
        LIVE_TASK,
    )
    assert made_up.answer_correct is False and made_up.answer_faithful is False
    assert made_up.unsupported_values == ["7"]

    # The id came from nowhere when get_item runs in the same turn as the search that found it.
    same_turn = [calls[0], calls[1].model_copy(update={"turn": 1})]
    guessed = run_checks(
        Trajectory(id="g", task_id="live", tool_calls=same_turn, final_answer="6, at $482.99."), LIVE_TASK
    )
    assert guessed.arguments_faithful is False and guessed.invented_arguments == [
        'get_item.item_id="ITM-003"'
    ]

    # Answered right with no call behind it: the answer is correct, the calls are not.
    skipped = run_checks(
        Trajectory(id="s", task_id="live", tool_calls=[], final_answer="6 in stock at $482.99."), LIVE_TASK
    )
    assert skipped.answer_correct is True and skipped.needed_calls_ok is False
    # Another path to the same result counts: the search alone returned the stock and the price,
    # though the writer expected get_item.
    searched = run_checks(
        Trajectory(id="q", task_id="live", tool_calls=calls[:1], final_answer="6 in stock at $482.99."),
        LIVE_TASK,
    )
    assert searched.answer_correct is True and searched.needed_calls_ok is True
    failed = calls[1].model_copy(update={"status": CallStatus.TOOL_ERROR})
    broken = run_checks(
        Trajectory(id="b", task_id="live", tool_calls=[failed], final_answer="6 at $482.99."),
        LIVE_TASK,
    )
    assert broken.needed_calls_ok is False


def test_the_time_tools_pasted_json_is_not_a_no():
    result = (
        '{"timezone": "Europe/London", "datetime": "2026-12-03T20:05:11+00:00", '
        '"day_of_week": "Thursday", "is_dst": false}'
    )
    time_call = ToolCallRecord(
        turn=1,
        name="get_current_time",
        arguments={"timezone": "Europe/London"},
        status=CallStatus.OK,
        result_text=result,
    )
    task = Task(
        id="dst", text="Is London on daylight saving time now?", source="grounded", reference_answer="no"
    )
    pasted = Trajectory(id="x", task_id="dst", tool_calls=[time_call], final_answer=f"```json {result}```")
    said = Trajectory(id="y", task_id="dst", tool_calls=[time_call], final_answer="No, London is on GMT now.")
    c, d = run_checks(pasted, task), run_checks(said, task)
    assert c.pasted and c.answer_correct is False and not c.answered
    assert d.answer_correct is True and d.answered and d.needed_calls_ok is True and d.arguments_faithful

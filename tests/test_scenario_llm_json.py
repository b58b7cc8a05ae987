"""Structured output from a task-writing LLM that does not always cooperate: parse with repair,
validate per item, retry with the reason, never crash on garbage."""

from __future__ import annotations

import anyio
import pytest

from mcp_rl.models.base import Completion
from scenario_gen.llm_json import JsonParseError, ask_items, coerce_items, parse_lenient
from scenario_gen.writer import WrittenItem


class ScriptedFakeModel:
    """A fake ChatModel: replies with the given texts in order (the last one repeats) and records
    every conversation it was sent. Stands in for the LLM so malformed output can be scripted."""

    name = "scripted-fake"

    def __init__(self, replies: list[str | Exception]) -> None:
        self.replies = replies
        self.seen: list[list[dict]] = []

    async def chat(self, messages, tools=None, n=1, sampling=None):
        self.seen.append(list(messages))
        reply = self.replies[min(len(self.seen) - 1, len(self.replies) - 1)]
        if isinstance(reply, Exception):
            raise reply
        return [Completion(text=reply)]


GOOD = '{"tasks": [{"task": "Which tents cost less than 200 dollars?", "difficulty": 2, "tools": ["filter_items"]}]}'


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            GOOD,
            {
                "tasks": [
                    {
                        "task": "Which tents cost less than 200 dollars?",
                        "difficulty": 2,
                        "tools": ["filter_items"],
                    }
                ]
            },
        ),
        ('Sure! Here you go:\n```json\n[{"task": "a"}]\n```\nHope this helps.', [{"task": "a"}]),
        ('[{"task": "a"}] and some trailing words {not json', [{"task": "a"}]),
        ('{{"task": "a", "difficulty": 2}}', {"task": "a", "difficulty": 2}),  # Qwen template brace leak
        ('[{"task": "a",}, {"task": "b"},]', [{"task": "a"}, {"task": "b"}]),  # trailing commas
        ("[{'task': 'a', 'ok': True}]", [{"task": "a", "ok": True}]),  # Python literal
        ('{"task": "a"}\n{"task": "b"}', [{"task": "a"}, {"task": "b"}]),  # JSON lines
        (
            '{"tasks": [{"task": "a"}, {"task": "b"}, {"task": "c", "diff',
            [{"task": "a"}, {"task": "b"}],
        ),  # cut off
        ("\u201ctask\u201d", None),
    ],
)
def test_parse_lenient_repairs(text, expected):
    if expected is None:
        with pytest.raises(JsonParseError):
            parse_lenient(text)
        return
    got = parse_lenient(text)
    assert coerce_items(got) == coerce_items(expected)


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that.", "```\n```", "<tool_call>"])
def test_parse_lenient_rejects_garbage_with_a_reason(text):
    with pytest.raises(JsonParseError) as e:
        parse_lenient(text)
    assert str(e.value)


def test_coerce_items_shapes():
    assert coerce_items({"task": "one"}) == [{"task": "one"}]  # a single object instead of a list
    assert coerce_items({"questions": [1, 2]}) == [1, 2]
    assert coerce_items([[{"a": 1}]]) == [{"a": 1}]
    assert coerce_items({"1": {"task": "x"}, "2": {"task": "y"}}) == [{"task": "x"}, {"task": "y"}]
    assert coerce_items(7) == []


def test_written_item_is_lenient_about_shape_strict_about_content():
    item = WrittenItem.model_validate(
        {"question": " Where is my order ORD-0001? ", "difficulty": "hard", "tool": "get_order"}
    )
    assert item.task == "Where is my order ORD-0001?" and item.difficulty == 4 and item.tools == ["get_order"]
    assert WrittenItem.model_validate({"task": "List every tent in stock", "difficulty": 9}).difficulty == 5
    assert (
        WrittenItem.model_validate({"task": "List every tent in stock", "difficulty": "3/5"}).difficulty == 3
    )
    assert WrittenItem.model_validate("Show me the cheapest headlamp").task == "Show me the cheapest headlamp"
    # its own metadata copied into the text is cut off
    tagged = {"task": "What time is it in Lima? (Difficulty: 2, Tools: None)"}
    assert WrittenItem.model_validate(tagged).task == "What time is it in Lima?"
    assert (
        WrittenItem.model_validate({"task": "What time is it in Lima? (Easy)"}).task
        == "What time is it in Lima?"
    )
    with pytest.raises(ValueError):
        WrittenItem.model_validate({"task": "  "})
    with pytest.raises(ValueError):
        WrittenItem.model_validate({"difficulty": 2})


def _ask(model, **kw):
    async def go():
        msgs = [{"role": "user", "content": "write tasks"}]
        return await ask_items(model, msgs, WrittenItem, **kw)

    return anyio.run(go)


def test_ask_items_retries_with_the_reason_then_succeeds():
    fake = ScriptedFakeModel(["Sorry, here are some ideas: tents, lamps.", GOOD])
    got = _ask(fake, want=3)
    assert [i.task for i in got.items] == ["Which tents cost less than 200 dollars?"]
    assert got.calls == 2 and len(fake.seen) == 2
    retry = fake.seen[1]
    # garbage is not replayed as an assistant turn (small models continue what they see); the
    # request is asked again with a note that quotes how the bad reply began and says why
    assert len(retry) == 1 and retry[0]["content"].startswith("write tasks")
    note = retry[0]["content"]
    assert "could not be used" in note and "Sorry, here are some ideas" in note and "JSON" in note


def test_ask_items_names_invalid_items_in_the_retry():
    bad_items = '{"tasks": [{"difficulty": 2}, {"task": ""}]}'
    fake = ScriptedFakeModel([bad_items, GOOD])
    got = _ask(fake, want=2)
    assert len(got.items) == 1 and got.calls == 2
    # parsed but invalid: the reply is shown back, with what was wrong (the missing field named)
    assert fake.seen[1][-2] == {"role": "assistant", "content": bad_items}
    assert "task" in fake.seen[1][-1]["content"]
    assert any("item 1" in p for p in got.problems)


def test_ask_items_never_raises_on_garbage_or_model_errors():
    fake = ScriptedFakeModel([RuntimeError("backend fell over"), "%%%", "{]"])
    got = _ask(fake, want=2, attempts=3)
    assert got.items == [] and got.calls == 3
    assert any("model call failed" in p for p in got.problems)
    assert any("unparseable" in p for p in got.problems)


def test_ask_items_accept_hook_rejects_and_explains():
    fake = ScriptedFakeModel(
        ['{"task": "Use get_item to read ITM-001"}', '{"task": "What does item ITM-001 cost?"}']
    )

    def accept(item: WrittenItem) -> str | None:
        return "it names a tool" if "get_item" in item.task else None

    got = _ask(fake, want=1, accept=accept)
    assert [i.task for i in got.items] == ["What does item ITM-001 cost?"]
    assert "names a tool" in fake.seen[1][-1]["content"]

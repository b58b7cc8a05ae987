"""Structured output from a language model that does not always cooperate (`mcp_rl.structured`):
parse with repair, validate per item, retry with the reason, never crash on garbage. The same
parser reads the judge's replies and the task writer's."""

from __future__ import annotations

import anyio
import pytest

from mcp_rl.models.base import Completion
from mcp_rl.structured import JsonReplyError, ask_items, coerce_items, extract_json
from scenario_gen.writer import WrittenItem


class ScriptedFakeModel:
    """A fake ChatModel: replies with the given texts in order (the last one repeats) and records
    every conversation it was sent. Stands in for the LLM so malformed output can be scripted."""

    name = "scripted-fake"
    cost_free = True  # a fake is never priced as an API model

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


def test_extract_plain_fenced_and_surrounded():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here you go:\n```json\n{"a": 1}\n```\nHope it helps!') == {"a": 1}
    assert extract_json('Sure! {"a": [1, 2]} -- that is my answer.') == {"a": [1, 2]}


def test_extract_single_quotes_python_literals_and_trailing_commas():
    assert extract_json("{'a': 'x', 'b': True, 'c': None}") == {"a": "x", "b": True, "c": None}
    assert extract_json('{"a": [1, 2,], "b": true,}') == {"a": [1, 2], "b": True}
    assert extract_json("{'ok': true, 'n': null}") == {"ok": True, "n": None}


def test_extract_braces_inside_strings_do_not_confuse_matching():
    text = 'note {"explanation": "used {curly} and ] brackets", "score": 1} end'
    assert extract_json(text) == {"explanation": "used {curly} and ] brackets", "score": 1}


def test_extract_failures_say_why():
    with pytest.raises(JsonReplyError, match="empty"):
        extract_json("   ")
    with pytest.raises(JsonReplyError, match="no JSON"):
        extract_json("t1 is the best, t2 is worse")
    with pytest.raises(JsonReplyError, match="cut off"):
        extract_json('{"scores": [{"id": "t1", "score": 0.5}, {"id": "t2", "expl')
    with pytest.raises(JsonReplyError, match="not valid JSON"):
        extract_json('{"scores": [1 2 3]}')


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
def test_item_lists_are_repaired(text, expected):
    if expected is None:
        with pytest.raises(JsonReplyError):
            extract_json(text, item_list=True)
        return
    got = extract_json(text, item_list=True)
    assert coerce_items(got) == coerce_items(expected)


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that.", "```\n```", "<tool_call>"])
def test_item_lists_reject_garbage_with_a_reason(text):
    with pytest.raises(JsonReplyError) as e:
        extract_json(text, item_list=True)
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


def test_a_typographic_quote_inside_a_valid_string_is_kept():
    # Repairs apply only after the text as written fails: a writer's curly quotes stay as they were.
    text = '{"task": "Is the \u201cSummit Dome\u201d tent in stock?"}'
    assert extract_json(text, item_list=True) == {"task": "Is the \u201cSummit Dome\u201d tent in stock?"}
    assert extract_json("{\u201ctask\u201d: \u201ca\u201d}") == {"task": "a"}


def test_a_judge_reply_with_doubled_braces_is_read_not_a_crash():
    from judges.verdict import parse_verdict

    assert parse_verdict('{{"success": true, "explanation": "it answered"}}') == ((True, "it answered"), [])


def test_a_cut_off_list_keeps_its_items_only_when_items_were_asked_for():
    cut = '{"scores": [{"id": "t1", "score": 0.5}, {"id": "t2", "score": 0.1}, {"id": "t3", "expl'
    # A judge's partial judgement is a wrong one: it is named, so the repair prompt can say so.
    with pytest.raises(JsonReplyError, match="cut off"):
        extract_json(cut)
    assert extract_json(cut, item_list=True) == [{"id": "t1", "score": 0.5}, {"id": "t2", "score": 0.1}]
    # Objects one after another are a list only when a list of items was asked for.
    assert extract_json('{"a": 1}\n{"a": 2}') == {"a": 1}
    assert extract_json('{"a": 1}\n{"a": 2}', item_list=True) == [{"a": 1}, {"a": 2}]


def test_a_wanted_type_skips_values_of_another_type():
    assert extract_json('[1, 2] then {"success": false}', want=dict) == {"success": False}
    with pytest.raises(JsonReplyError, match="was a list"):
        extract_json("[1, 2]", want=dict)


def test_ask_items_counts_every_call_and_its_tokens():
    fake = ScriptedFakeModel([RuntimeError("backend fell over"), "%%%", GOOD])
    got = _ask(fake, want=1, attempts=3)
    assert len(got.items) == 1 and got.calls == 3
    assert got.usage.calls == 2 and got.usage.failed_calls == 1
    assert got.usage.prompt_tokens > 0 and got.usage.completion_tokens > 0


def test_retries_of_a_sampling_writer_get_new_seeds():
    from mcp_rl.models.base import SamplingParams

    seeds: list[int | None] = []

    class Recording(ScriptedFakeModel):
        async def chat(self, messages, tools=None, n=1, sampling=None):
            seeds.append(sampling.seed)
            return await super().chat(messages, tools, n, sampling)

    _ask(Recording(["no", "still no", GOOD]), sampling=SamplingParams(seed=40))
    assert seeds == [40, 41, 42]


def test_structured_output_and_the_call_parser_import_neither_judges_nor_scenario_gen():
    import subprocess
    import sys

    code = (
        "import sys, mcp_rl.structured, mcp_rl.toolcalls; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'judges', 'scenario_gen', 'torch'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"

"""Tool-call parsing: the forms real small models emit, malformed ones, and the prose boundary."""

from __future__ import annotations

import pytest

from mcp_rl.toolcalls import parse_message

KNOWN = {"get_current_time", "convert_time", "get_item", "search_items"}


def calls(text: str, known: set[str] = KNOWN) -> list[tuple[str, dict | None, bool]]:
    return [(c.name, c.arguments, c.ok) for c in parse_message(text, known).calls]


# --- well-formed calls ------------------------------------------------------------------------


def test_qwen_tool_call_tag() -> None:
    text = '<tool_call>\n{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
    assert calls(text) == [("get_current_time", {"timezone": "Asia/Tokyo"}, True)]


def test_only_calls_in_tags_are_marked_tagged() -> None:
    """The form the runtimes parse (llama.cpp's server, vLLM's hermes, Ollama) is told apart from the
    bare and fenced JSON the 0.5B writes, including a list of calls inside one tag."""
    bare = '{"name": "get_item", "arguments": {"item_id": "ITM-001"}}'
    text = f"<tool_call>[{bare}, {bare}]</tool_call>\n{bare}\n```json\n{bare}\n```"
    assert [c.tagged for c in parse_message(text, KNOWN).calls] == [True, True, False, False]
    (broken,) = parse_message("<tool_call>{name: get_item}</tool_call>", KNOWN).calls
    assert broken.tagged and not broken.ok


def test_several_tags_keep_order() -> None:
    text = (
        'Let me check both.\n<tool_call>\n{"name": "get_item", "arguments": {"item_id": "ITM-001"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_item", "arguments": {"item_id": "ITM-002"}}\n</tool_call>'
    )
    assert [a["item_id"] for _, a, _ in calls(text)] == ["ITM-001", "ITM-002"]


def test_bare_json_object_as_qwen_05b_writes_it() -> None:
    text = '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}'
    assert calls(text) == [("get_current_time", {"timezone": "Asia/Tokyo"}, True)]


def test_json_fence_with_prose_around() -> None:
    text = 'I will look it up.\n```json\n{"name": "search_items", "arguments": {"query": "tent"}}\n```\nDone.'
    assert calls(text) == [("search_items", {"query": "tent"}, True)]


def test_several_fences() -> None:
    text = (
        '```json\n{"name": "get_item", "arguments": {"item_id": "A"}}\n```\n'
        'and\n```\n{"name": "get_item", "arguments": {"item_id": "B"}}\n```'
    )
    assert [a["item_id"] for _, a, _ in calls(text)] == ["A", "B"]


def test_json_list_of_calls() -> None:
    text = (
        '[{"name": "get_item", "arguments": {"item_id": "A"}}, {"name": "get_current_time", "arguments": {}}]'
    )
    got = calls(text)
    assert [n for n, _, _ in got] == ["get_item", "get_current_time"]
    raws = [c.raw for c in parse_message(text, KNOWN).calls]
    assert raws[0] != raws[1]  # each call of a list keeps its own text


def test_arguments_as_json_string() -> None:
    text = '{"name": "get_current_time", "arguments": "{\\"timezone\\": \\"Europe/Paris\\"}"}'
    assert calls(text) == [("get_current_time", {"timezone": "Europe/Paris"}, True)]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_item", "parameters": {"item_id": "X"}}',
        '{"function": {"name": "get_item", "arguments": {"item_id": "X"}}}',
        '{"type": "function", "function": {"name": "get_item", "arguments": "{\\"item_id\\": \\"X\\"}"}}',
        '{"tool_calls": [{"id": "1", "type": "function", "function": {"name": "get_item", "arguments": {"item_id": "X"}}}]}',
        '<tool_call>\n```json\n{"name": "get_item", "arguments": {"item_id": "X"}}\n```\n</tool_call>',
    ],
)
def test_other_call_shapes(text: str) -> None:
    assert calls(text) == [("get_item", {"item_id": "X"}, True)]


def test_name_only_object_is_a_call_when_it_names_a_known_tool() -> None:
    assert calls('{"name": "get_current_time"}') == [("get_current_time", {}, True)]
    # ...but the same shape naming no tool is data (e.g. a person in an answer).
    assert calls('The customer is {"name": "Ada"}.') == []


def test_null_arguments_mean_no_arguments() -> None:
    assert calls('{"name": "get_current_time", "arguments": null}') == [("get_current_time", {}, True)]


def test_unknown_tool_still_parses_as_a_call() -> None:
    # The name is checked against the live server later; the form is right, so it is a call.
    assert calls('{"name": "get_weather", "arguments": {"city": "Paris"}}') == [
        ("get_weather", {"city": "Paris"}, True)
    ]


# --- malformed call attempts ---------------------------------------------------------------------


def _errors(text: str) -> list[str]:
    return [c.error or "" for c in parse_message(text, KNOWN).calls]


def test_unclosed_braces_are_an_invalid_call() -> None:
    (err,) = _errors('{"name": "get_item", "arguments": {"item_id": "A"}')
    assert "not valid JSON" in err
    (c,) = parse_message('{"name": "get_item", "arguments": {"item_id": "A"}', KNOWN).calls
    assert c.name == "get_item"  # the name is recovered for the record


def test_python_dict_quotes_are_an_invalid_call() -> None:
    (err,) = _errors("{'name': 'get_item', 'arguments': {'item_id': 'A'}}")
    assert "double quotes" in err


def test_unquoted_name_is_invalid_and_says_where() -> None:
    # What Qwen2.5-Coder-0.5B wrote in a real episode.
    (c,) = parse_message('{"name": get_item, "arguments": {"item_id": "ITM-001"}}', KNOWN).calls
    assert not c.ok and c.name == "get_item"
    assert "at 'get_item" in (c.error or "") and "double quotes" in (c.error or "")


def test_garbage_inside_tags_is_an_invalid_call() -> None:
    (err,) = _errors("<tool_call>get_item(item_id='A')</tool_call>")
    assert "not valid JSON" in err


def test_cut_off_tag_is_an_invalid_call() -> None:
    (err,) = _errors('<tool_call>\n{"name": "get_item", "argu')
    assert "not valid JSON" in err


def test_empty_tag() -> None:
    (err,) = _errors("<tool_call>\n</tool_call>")
    assert "empty" in err


def test_tag_without_name() -> None:
    (err,) = _errors('<tool_call>{"arguments": {"a": 1}}</tool_call>')
    assert '"name"' in err


def test_arguments_not_an_object() -> None:
    (err,) = _errors('{"name": "get_item", "arguments": ["ITM-001"]}')
    assert "must be a JSON object" in err
    (err,) = _errors('{"name": "get_item", "arguments": "item ITM-001"}')
    assert "arguments string is not valid JSON" in err


def test_non_string_name() -> None:
    (err,) = _errors('{"name": 7, "arguments": {}}')
    assert "non-empty string" in err


def test_broken_call_in_fence_does_not_swallow_the_next_fence() -> None:
    text = (
        '```json\n{"name": "get_item", "arguments": {"item_id": "A"}\n```\n'
        '```json\n{"name": "get_item", "arguments": {"item_id": "B"}}\n```'
    )
    got = parse_message(text, KNOWN).calls
    assert [c.ok for c in got] == [False, True]
    assert got[1].arguments == {"item_id": "B"}


# --- the prose boundary ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "It is 14:05 in Tokyo right now.",
        "",
        "The set {1, 2, 3} has three elements.",
        'The result was {"time": "14:05", "timezone": "Asia/Tokyo"}.',
        "```python\nprint(get_item('A'))\n```",
        "get_current_time(timezone='Asia/Tokyo')",  # Python-style calls are prose by our rule
        '[{"id": "ITM-001", "price": 12.5}]',
    ],
)
def test_prose_and_data_are_a_final_answer(text: str) -> None:
    assert parse_message(text, KNOWN).is_final


def test_call_nested_in_data_is_data() -> None:
    # A call-shaped object inside other JSON is what a tool returned, being quoted back.
    text = '{"history": [{"name": "get_item", "arguments": {"item_id": "A"}}]}'
    assert parse_message(text, KNOWN).is_final


def test_prose_plus_call_is_a_call() -> None:
    text = 'Checking now: {"name": "get_current_time", "arguments": {"timezone": "UTC"}} one moment.'
    msg = parse_message(text, KNOWN)
    assert not msg.is_final and msg.calls[0].arguments == {"timezone": "UTC"}

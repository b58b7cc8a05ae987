"""Written tasks must carry the data they need, or name where the server holds it. The tools are the
real ones of the example stats_lab server (unannotated, array-typed parameters, like most third-party
servers); the writer model's verdict comes from a scripted fake (a real 1.5B check is too slow here)."""

from __future__ import annotations

import sys
from io import StringIO

import anyio
import pytest
from rich.console import Console
from test_scenario_generate import FakeTaskWriter

from mcp_rl.models.base import Completion
from mcp_rl.servers import ServerSession, ServerSpec
from mcp_rl.servers.tools import ToolSpec
from mcp_rl.task import Task
from scenario_gen import GenerateConfig, generate_tasks
from scenario_gen.gen_report import render
from scenario_gen.self_contained import (
    ABSENT_DATA,
    MODEL_SAYS,
    OWN_DATA,
    UNCHECKED,
    UNLISTED,
    rule_reason,
    self_contained,
    unsupported_terms,
)

STATS_LAB = f"{sys.executable} -m examples.servers.stats_lab"

NO_DATA = {
    "What is the average of my friends' ages?": OWN_DATA,
    "Give me the statistics of my test scores.": OWN_DATA,
    "Calculate the average of these numbers.": ABSENT_DATA,
    "Compute the total price for all items in the store.": UNLISTED,
}
SELF_CONTAINED = [
    "What is the mean of 4, 8 and 15?",
    "Sum my monthly expenses: 120, 80 and 45.",
    "Rank all the cities by population.",  # a tool lists the cities
    "Which of my notes is the longest?",  # the notes are the server's: a tool lists their titles
    "What's the population of Lisbon?",
    "Convert 100 km to miles.",
]


@pytest.fixture(scope="module")
def tools() -> list[ToolSpec]:
    async def go():
        async with ServerSession(ServerSpec.parse(STATS_LAB)) as s:
            return list(s.tools)

    return anyio.run(go)


def _check(text: str, tools: list[ToolSpec], model=None) -> tuple[bool, str]:
    return anyio.run(self_contained, Task(id="t", text=text), tools, model)


@pytest.mark.parametrize("text", list(NO_DATA))
def test_a_written_task_that_gives_no_data_is_dropped_by_the_rules_with_its_reason(tools, text):
    assert rule_reason(text, tools) == NO_DATA[text]
    # the rules decide before any model is asked: a model that would say yes is never consulted
    writer = FakeTaskWriter()
    assert _check(text, tools, writer) == (False, NO_DATA[text])
    assert writer.calls == 0


@pytest.mark.parametrize("text", SELF_CONTAINED)
def test_a_task_that_carries_its_data_or_names_where_the_server_holds_it_passes(tools, text):
    assert rule_reason(text, tools) is None
    assert _check(text, tools, FakeTaskWriter()) == (True, "")


def test_the_rules_read_the_tools_vocabulary_not_a_fixed_list(tools):
    # "all items" is unanswerable on stats_lab, answerable where a tool lists items
    lister = ToolSpec(name="list_items", description="Every item in the store, with its price.")
    text = "Compute the total price for all items in the store."
    assert rule_reason(text, tools) == UNLISTED
    assert rule_reason(text, [*tools, lister]) is None
    # "my friends' ages" is the user's data, unless the server keeps friends
    friends = ToolSpec(name="friends", description="The user's friends and their ages.")
    assert rule_reason("What is the average of my friends' ages?", [friends]) is None


def test_the_writer_models_verdict_drops_a_task_whose_input_is_missing(tools):
    text = "Convert 20 degrees to Kelvin."  # which scale is 20 in? the rules cannot tell
    assert rule_reason(text, tools) is None
    fake = FakeTaskWriter(missing={text: "the scale of 20 degrees (Celsius or Fahrenheit)"})
    ok, reason = _check(text, tools, fake)
    assert not ok and reason == f"{MODEL_SAYS}: the scale of 20 degrees (Celsius or Fahrenheit)"
    assert fake.calls == 1
    # the question the model got names the task and the server's real tools
    assert text in fake.prompts[0] and "convert_temperature" in fake.prompts[0]


class FakeGarbledVerdict:
    """A fake writer whose verdicts can never be read."""

    name = "fake-garbled-verdict"

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, messages, tools=None, n=1, sampling=None):
        self.calls += 1
        return [Completion(text="I think it might be fine, probably.")]


def test_a_verdict_that_cannot_be_read_keeps_the_task_as_unchecked(tools):
    fake = FakeGarbledVerdict()
    assert _check("Convert 20 degrees to Kelvin.", tools, fake) == (True, UNCHECKED)
    assert fake.calls == 2  # asked again once, with what was wrong


def test_generate_drops_written_tasks_that_give_no_data_and_shows_why():
    bank = [*NO_DATA, *SELF_CONTAINED, "Convert 20 degrees to Kelvin."]
    fake = FakeTaskWriter(bank=bank, missing={"Convert 20 degrees to Kelvin.": "the scale of 20 degrees"})
    cfg = GenerateConfig(n=6, grounded_share=0.0, explore_calls=0, batch_size=5, max_rounds=4)

    async def go():
        async with ServerSession(ServerSpec.parse(STATS_LAB)) as s:
            return await generate_tasks(s, fake, cfg)

    tasks, report = anyio.run(go)
    texts = {t.text for t in tasks}
    assert texts == set(SELF_CONTAINED)
    assert all(t.notes["self_contained"] == "passed" for t in tasks)
    assert (
        report.dropped[OWN_DATA] == 2 and report.dropped[ABSENT_DATA] == 1 and report.dropped[UNLISTED] == 1
    )
    assert report.dropped[MODEL_SAYS] == 1
    assert report.drop_examples[MODEL_SAYS] == [
        "Convert 20 degrees to Kelvin. (missing: the scale of 20 degrees)"
    ]
    assert report.self_contained == {"checked": 11, "passed": 6}
    out = StringIO()
    render(report, Console(file=out, width=250))
    shown = out.getvalue()
    assert OWN_DATA in shown and "What is the average of my friends' ages?" in shown


# What a memory-graph server said of one person (the shape of the npm memory server's results).
GRAPH = '{"name": "Anna Weber", "entityType": "person", "observations": ["lives in Berlin", "is a dentist"]}'


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        # false premises and requests no tool serves: kept "always solved" by the 1.5B judge (2026-12-07)
        ("I want to know who is the mother of Anna Weber.", ["mother"]),
        ("Schedule a meeting between Anna Weber and her dentist.", ["schedule", "meeting"]),
        # what the server said, in other forms of its words
        ("Where does Anna Weber live?", []),
        ("Which person living in Berlin is a dentist?", []),
        # request words, orders and amounts are nobody's data
        ("Show me the three oldest entities and tell me the cheapest one.", []),
        # values the task carries are its own: quoted, paths, file names
        ("Add the observation 'plays the violin' to Anna Weber.", []),
        ("Read /srv/notes/todo.md and README.md for Anna Weber.", []),
    ],
)
def test_words_a_task_speaks_of_must_be_the_servers(text, unknown):
    assert unsupported_terms(text, GRAPH) == unknown

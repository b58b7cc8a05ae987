"""Grounding on a server shaped like third-party ones: the real example server `stats_lab` over stdio
(no annotations; arrays of numbers, an array of {label, value} objects, enums, a 0-100 range; JSON
and plain-text results). Exploration here runs with no model, or with a scripted fake of one.

Which unannotated tools exploration may call is decided elsewhere (`explorable`); these tests mark
the computing and reading tools read-only, as a server that annotated them would, and leave the note
writer unannotated."""

from __future__ import annotations

import json
import re
import sys

import anyio

from mcp_rl.answer_rule import apply_rule
from mcp_rl.models.base import Completion
from mcp_rl.servers import ServerSession, ServerSpec
from mcp_rl.servers.tools import ToolAnnotations
from scenario_gen import GenerateConfig, generate_tasks
from scenario_gen.explorer import Explorer, ExploreResult
from scenario_gen.grounded import GroundedWriter

STATS_LAB = f"{sys.executable} -m examples.servers.stats_lab"
COMPUTING = ("describe", "percentile", "top_sample", "rank_cities", "convert_length")


def _as_annotated(session: ServerSession) -> None:
    session.tools = [
        t if t.name == "save_note" else t.model_copy(update={"annotations": ToolAnnotations(read_only=True)})
        for t in session.tools
    ]


def _explore(**kw) -> tuple[ExploreResult, list]:
    async def go():
        async with ServerSession(ServerSpec.parse(STATS_LAB)) as s:
            _as_annotated(s)
            return await Explorer(s, **kw).run(), s.tools

    return anyio.run(go)


def test_exploration_with_no_model_reaches_ok_calls_on_array_enum_and_range_tools():
    result, _ = _explore(seed=0)
    ok = {s.tool for s in result.steps if s.ok}
    assert set(COMPUTING) <= ok
    assert result.stats.invalid_proposals == 0  # every synthesized proposal fit its schema
    pct = [s for s in result.steps if s.tool == "percentile" and s.ok]
    assert all(0 <= s.arguments["p"] <= 100 and len(s.arguments["numbers"]) >= 1 for s in pct)
    tops = [s for s in result.steps if s.tool == "top_sample" and s.ok]
    assert all(len({x["label"] for x in s.arguments["samples"]}) == len(s.arguments["samples"]) for s in tops)
    # rank_cities takes an array of names read from `cities`' plain-text listing: a chain
    ranked = next(s for s in result.steps if s.tool == "rank_cities" and s.ok)
    listing = result.steps[ranked.sources[0]]
    assert listing.tool == "cities" and listing.ok
    assert set(ranked.arguments["names"]) <= set(listing.result_text.splitlines())
    assert [s.tool for s in result.chain(ranked)] == ["cities", "rank_cities"]
    # a text listing of titles feeds the tool that opens one
    opened = next(s for s in result.steps if s.tool == "open_note" and s.ok)
    assert result.steps[opened.sources[0]].tool == "note_titles"


def test_grounded_candidates_come_from_text_results_and_cover_every_tool_with_an_ok_call():
    result, tools = _explore(seed=0)
    writer = GroundedWriter(None, tools, seed=0)  # picking candidates needs no model
    ok_tools = {s.tool for s in result.steps if s.ok}
    first_pass = writer.candidates(result, len(ok_tools))
    assert {c.chain[-1].tool for c in first_pass} == ok_tools  # one per tool before any second
    picked = writer.candidates(result, 400)
    by_tool = {c.chain[-1].tool: c for c in picked}
    assert by_tool["cities"].fact.rule.kind in ("count", "names")  # from "Lisbon\nPorto\n..."
    listing = [c for c in picked if c.chain[-1].tool == "cities" and not c.chain[-1].arguments]
    assert {c.fact.answer for c in listing} >= {
        "8",
        "Lisbon, Porto, Madrid, Valencia, Lyon, Nantes, Graz, Utrecht",
    }
    assert any(len(c.chain) >= 2 and c.chain[-1].tool == "rank_cities" for c in picked)
    for c in picked:  # each answer is what its rule reads from the chain's own results
        assert apply_rule(c.fact.rule.model_copy(update={"call_index": len(c.chain) - 1}),
                          [s.result_text for s in c.chain]) == c.fact.answer  # fmt: skip
    # a question about a computation must state the numbers it was given
    top = next(c for c in picked if c.chain[-1].tool == "top_sample")
    given = {str(x["label"]) for x in top.chain[-1].arguments["samples"]}
    assert given <= {m for g in top.mentions for m in g}


class StatsWriter:
    """A fake task-writing model: grounded questions from what the prompt says they must mention,
    argument proposals for the LLM round (recorded), a few written requests."""

    name = "fake-stats-writer"

    def __init__(self) -> None:
        self.proposal_prompts: list[str] = []

    async def chat(self, messages, tools=None, n=1, sampling=None):
        prompt = messages[-1]["content"]
        if "Write one question" in prompt:
            what = re.search(r"\(the answer is (.*), in data \d", prompt).group(1).replace("`", "")
            line = next((ln for ln in prompt.splitlines() if ln.startswith("The question must mention:")), "")
            names = re.findall(r"'([^']*)'", line.split(":", 1)[1]) if line else []
            about = " and ".join(dict.fromkeys(names)) or "the lab"
            return [Completion(text=json.dumps({"question": f"Could you tell me {what}, for {about}?"}))]
        if "Propose arguments" in prompt:
            self.proposal_prompts.append(prompt)
            return [Completion(text='{"arguments": []}')]
        bank = [
            "What is the mean of 4, 8 and 15?",
            "Convert 12 km to miles.",
            "Which city is older, Graz or Lyon?",
        ]
        return [
            Completion(text=json.dumps({"tasks": [{"task": t, "difficulty": 2, "tools": []} for t in bank]}))
        ]


def test_a_generated_set_records_chains_and_tools_and_its_references_re_check():
    fake = StatsWriter()
    cfg = GenerateConfig(
        n=16, grounded_share=0.75, seed=0, instructions="I compare Iberian cities for a move"
    )

    async def go():
        async with ServerSession(ServerSpec.parse(STATS_LAB)) as s:
            _as_annotated(s)
            return await generate_tasks(s, fake, cfg)

    tasks, report = anyio.run(go)
    grounded = [t for t in tasks if t.source == "grounded"]
    assert len(grounded) >= 8
    assert all(t.notes["chain_len"] == len(t.reference_calls) >= 1 for t in grounded)
    assert all(t.notes.get("verified") in ("stable", "changed") for t in grounded)  # re-run on the server
    chained = [t for t in grounded if t.notes["chain_len"] >= 2]
    assert chained and report.chain_share == len(chained) / len(grounded)
    used = {c.tool for t in grounded for c in t.reference_calls}
    assert set(report.grounded_tools) == used and len(used) >= 5
    assert [n for n in report.grounded_tools] == [t for t in report.coverage if t in used]  # server order
    # the LLM round was told what the user and the server are about, and what other tools returned
    assert fake.proposal_prompts
    p = fake.proposal_prompts[0]
    assert (
        cfg.instructions in p and "eight European cities" in p and "Other calls and what they returned" in p
    )

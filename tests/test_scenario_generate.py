"""Generation against real MCP servers over stdio (the example inventory, mcp-server-time, the fault
server). The task-writing LLM is a scripted fake here, so malformed output, too few tasks and
duplicates can be produced on purpose; the real offline writer runs in test_scenario_slow.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from conftest import FAULTY, INVENTORY, have
from mcp_rl.models.base import Completion
from mcp_rl.servers import CallStatus, ServerSession, ServerSpec, ToolPolicy
from scenario_gen import GenerateConfig, apply_rule, generate_tasks
from scenario_gen.explorer import Explorer
from scenario_gen.writer_prompts import SELF_CONTAINED_ASK

BANK = [
    "Which tents cost less than 250 dollars and are in stock?",
    "I need a headlamp for night hikes; what do you have?",
    "How many sleeping bags does the shop carry?",
    "Show me the three best rated backpacks.",
    "Is the Camp Kettle 1L available, and what does it cost?",
    "What is the cheapest item in the cooking category?",
    "Find waterproof footwear under 120 dollars.",
    "Compare the prices of the two most expensive tents.",
    "Which lighting products have a rating above 4.5?",
    "List every category and how many items each one has.",
    "What's the most expensive sleeping pad you sell?",
    "Are there any items with fewer than 3 units left?",
    "Recommend a stove for a weekend trip for two people.",
    "What would two Solar String Lights cost before shipping?",
    "Tell me about item ITM-005.",
    "Which backpack is the lightest option for day hikes?",
]


def _mentions(prompt: str) -> list[str]:
    line = next((ln for ln in prompt.splitlines() if ln.startswith("The question must mention:")), "")
    groups = line.split(":", 1)[1].strip().rstrip(".").split("; ") if line else []
    return [
        re.findall(r"'([^']*)'|\"([^\"]*)\"", g)[0][0] or re.findall(r"'([^']*)'|\"([^\"]*)\"", g)[0][1]
        for g in groups
        if g
    ]


class FakeTaskWriter:
    """A fake of the task-writing LLM (a ChatModel). It answers each kind of prompt the generator sends:
    written-task batches from a bank of requests, grounded questions built from what the prompt says
    they must mention, no argument proposals, and self-contained verdicts (answerable, unless `missing`
    names what a request lacks). Knobs script the failures a weak model shows."""

    name = "fake-task-writer"

    def __init__(
        self,
        bank=BANK,
        per_call: int | None = None,
        garbage_every: int = 0,
        repeat: bool = False,
        mute: bool = False,
        missing: dict[str, str] | None = None,
    ) -> None:
        self.missing = missing or {}  # request text -> the input the verdict says it lacks
        self.mute = mute  # write no requests at all (every written-task reply is an empty list)
        self.bank = list(bank)
        self.per_call = per_call
        self.garbage_every = garbage_every
        self.repeat = repeat
        self.calls = 0
        self.written_calls = 0
        self.next = 0
        self.prompts: list[str] = []

    async def chat(self, messages, tools=None, n=1, sampling=None):
        self.calls += 1
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if self.garbage_every and self.calls % self.garbage_every == 0:
            return [Completion(text="Sure! I'd be glad to help with that. {tasks: oops")]
        if "Write one question" in prompt:
            what = re.search(r"\(the answer is (.*), in data \d", prompt).group(1).replace("`", "")
            about = " and ".join(_mentions(prompt)) or "the shop"
            return [Completion(text=json.dumps({"question": f"Could you tell me {what}, for {about}?"}))]
        if SELF_CONTAINED_ASK in prompt:
            text = prompt.split(": ", 1)[1].split("\n", 1)[0]
            lacks = self.missing.get(text, "")
            verdict = {"inputs": [], "answerable": not lacks, "missing": lacks}
            return [Completion(text=json.dumps(verdict))]
        if "Propose arguments" in prompt:
            return [Completion(text='{"arguments": []}')]
        if "Rewrite this request" in prompt:
            text = prompt.split(":\n", 1)[1].split("\nReply", 1)[0]
            return [Completion(text=json.dumps({"task": text}))]
        self.written_calls += 1
        if self.mute:
            return [Completion(text='{"tasks": []}')]
        want = int(re.search(r"Write (\d+) different", prompt).group(1))
        k = min(want, self.per_call or want)
        if self.repeat:
            items = self.bank[:k]
        else:
            items = [self.bank[(self.next + i) % len(self.bank)] for i in range(k)]
            self.next += k
        body = {
            "tasks": [
                {"task": t, "difficulty": 1 + i % 5, "tools": ["filter_items"]} for i, t in enumerate(items)
            ]
        }
        return [Completion(text="```json\n" + json.dumps(body) + "\n```")]


def _generate(server: str, model, cfg: GenerateConfig, progress=None, **session_kw):
    async def go():
        spec = ServerSpec.parse(server).with_connection(result_budget=20000, **session_kw)
        async with ServerSession(spec) as s:
            return await generate_tasks(s, model, cfg, progress=progress)

    return anyio.run(go)


async def _rerun(server: str, tasks):
    """Re-run every grounded task's reference calls on a fresh server; the answers they give now."""
    out = []
    async with ServerSession(ServerSpec.parse(server).with_connection(result_budget=20000)) as s:
        for t in tasks:
            texts = []
            for c in t.reference_calls:
                r = await s.call(c.tool, c.arguments)
                assert r.ok, r.text
                texts.append(r.text)
            out.append(apply_rule(t.answer_rule, texts))
    return out


def test_inventory_set_is_valid_distinct_split_and_grounded_answers_check_out():
    fake = FakeTaskWriter()
    tasks, report = _generate(INVENTORY, fake, GenerateConfig(n=16, seed=3, val_fraction=0.25))
    assert len(tasks) == 16
    assert len({t.text.lower() for t in tasks}) == 16 and len({t.id for t in tasks}) == 16
    grounded = [t for t in tasks if t.source == "grounded"]
    assert len(grounded) >= 16 / 3
    assert {t.split for t in tasks} == {"train", "val"} and report.val == 4
    p = tasks[0].provenance
    assert (p.generator, p.seed, p.server_name, p.server_version) == (
        "fake-task-writer",
        3,
        "inventory-example",
        "0.1.0",
    )
    assert p.created_at
    for t in grounded:
        assert t.reference_calls and t.answer_rule is not None and t.tools_expected
        assert t.reference_answer not in ("", None)
        assert all(c.result_text for c in t.reference_calls)
        assert not any(
            name in t.text for name in ("get_item", "filter_items", "search_items", "list_categories")
        )
    # the inventory is deterministic: a fresh server gives every grounded answer again
    assert anyio.run(_rerun, INVENTORY, grounded) == [t.reference_answer for t in grounded]
    assert report.verification.get("stable", 0) >= len(grounded)
    assert report.exploration.calls > 0 and report.exploration.statuses.get("ok", 0) > 0
    assert "place_order" in report.exploration.skipped_tools  # writes are not explored by default
    assert report.coverage["filter_items"]["written"] > 0
    assert sum(report.difficulty.values()) == 16


def test_a_generated_set_holds_out_a_test_split_that_shares_no_call_or_entity():
    from io import StringIO

    from rich.console import Console

    from scenario_gen.gen_report import render
    from scenario_gen.split import leaks

    cfg = GenerateConfig(n=16, seed=3, val_fraction=0.25, test_fraction=0.3)
    tasks, report = _generate(INVENTORY, FakeTaskWriter(), cfg)
    assert {t.split for t in tasks} == {"train", "val", "test"}
    assert (report.train, report.val, report.test) == tuple(
        sum(t.split == s for t in tasks) for s in ("train", "val", "test")
    )
    assert report.split is not None and report.split.leaks == [] and leaks(tasks) == []
    assert report.split.counts["test"]["grounded"] >= 1
    out = StringIO()
    render(report, Console(file=out, width=200))
    assert f"{report.train} train / {report.val} val / {report.test} test" in out.getvalue()
    with pytest.raises(ValueError, match="below 1"):
        GenerateConfig(val_fraction=0.5, test_fraction=0.5)


def test_writer_returning_too_few_tasks_is_asked_again():
    fake = FakeTaskWriter(per_call=1)
    tasks, report = _generate(
        INVENTORY, fake, GenerateConfig(n=6, grounded_share=0.0, explore_calls=0, batch_size=4)
    )
    assert len(tasks) == 6
    assert fake.written_calls >= 6
    assert report.dropped["writer returned too few"] >= 6


def test_malformed_output_is_retried_and_counted():
    fake = FakeTaskWriter(garbage_every=2)
    tasks, report = _generate(
        INVENTORY, fake, GenerateConfig(n=6, grounded_share=0.0, explore_calls=0, batch_size=3)
    )
    assert len(tasks) == 6
    assert report.llm_problems.get("unparseable reply", 0) >= 1
    # the retry told the model what was wrong
    assert any("could not be used" in p for p in fake.prompts)


def test_a_writer_that_only_writes_garbage_ends_cleanly():
    fake = FakeTaskWriter(garbage_every=1)
    tasks, report = _generate(
        INVENTORY, fake, GenerateConfig(n=4, grounded_share=0.0, explore_calls=0, max_rounds=3)
    )
    assert tasks == []
    assert any("only 0 of the 4" in w for w in report.warnings)


def test_grounded_tasks_fill_in_when_the_writer_falls_short():
    fake = FakeTaskWriter(mute=True)
    said: list[str] = []
    tasks, report = _generate(
        INVENTORY, fake, GenerateConfig(n=10, grounded_share=0.3, max_rounds=2), lambda msg, _: said.append(msg)
    )
    assert len(tasks) == 10 and all(t.source == "grounded" for t in tasks)
    assert report.written == 0 and report.grounded == 10
    # a page of questions takes most of an hour on one thread: the run says how far it is
    assert any(m.startswith("grounded questions: 5 of ") for m in said)


def test_duplicates_and_tool_names_are_removed():
    bank = [
        "What is the price of the Summit Dome 4P Tent?",
        "How much does the Summit Dome 4P Tent cost?",  # paraphrase (or near-copy without embeddings)
        "what is the price of the summit dome 4P tent",  # same request
        "Use the get_item tool to find the price of ITM-001.",  # stripped to a clean request
        "What does get_item return for ITM-003?",  # cannot be reworded: dropped
        "Which tents are in stock?",
    ]
    fake = FakeTaskWriter(bank=bank, repeat=True)
    tasks, report = _generate(
        INVENTORY, fake, GenerateConfig(n=6, grounded_share=0.0, explore_calls=0, batch_size=6, max_rounds=3)
    )
    texts = [t.text for t in tasks]
    assert "Find the price of ITM-001." in texts and "Which tents are in stock?" in texts
    assert not any("get_item" in t for t in texts)
    assert report.dropped["duplicate"] >= 2 and report.dropped["names a tool"] >= 1
    assert len({t.lower() for t in texts}) == len(texts) <= 4


@pytest.mark.skipif(not have("uvx"), reason="uvx is needed to run mcp-server-time in its own environment")
def test_time_server_grounded_tasks_know_when_answers_move():
    fake = FakeTaskWriter()
    tasks, report = _generate(
        "uvx mcp-server-time", fake, GenerateConfig(n=8, grounded_share=1.0, seed=1), connect_timeout=120
    )
    grounded = [t for t in tasks if t.source == "grounded"]
    assert len(grounded) >= 4
    clock = [t for t in grounded if t.tools_expected == ["get_current_time"]]
    assert clock and all(t.answer_depends_on_state for t in clock)
    assert report.state_dependent >= len(clock)
    assert all(t.reference_calls[0].arguments.get("timezone") for t in clock)
    # every reference still follows from a re-run: a stable answer again, or a fresh one for the clock
    fresh = anyio.run(_rerun, "uvx mcp-server-time", grounded)
    for t, now in zip(grounded, fresh, strict=True):
        assert now is not None
        assert t.answer_depends_on_state or now == t.reference_answer


def test_exploration_survives_a_server_that_crashes():
    async def go():
        spec = ServerSpec.parse(f"{FAULTY} --crash-after 4").with_connection(call_timeout=5)
        async with ServerSession(spec) as s:
            return await Explorer(s, seed=0, max_calls=14).run()

    result = anyio.run(go)
    st = result.stats
    assert st.statuses.get("crash", 0) >= 1 and st.restarts >= 1 and st.aborted is None
    first_crash = next(s.index for s in result.steps if s.status is CallStatus.CRASH)
    assert any(s.ok for s in result.steps[first_crash + 1 :])  # it went on after the crash
    assert st.calls == len(result.steps) <= 14


def test_exploration_stops_cleanly_when_the_server_cannot_come_back(tmp_path: Path):
    marker = tmp_path / "started"
    # starts once; every later start (the restart after the crash) exits at once
    cmd = f"sh -c 'if [ -e {marker} ]; then exit 3; fi; touch {marker}; exec {FAULTY} --crash-after 3'"

    async def go():
        async with ServerSession(
            ServerSpec.parse(cmd).with_connection(call_timeout=5, connect_timeout=30)
        ) as s:
            return await generate_tasks(
                s, FakeTaskWriter(), GenerateConfig(n=4, grounded_share=0.5, explore_calls=20, max_rounds=2)
            )

    tasks, report = anyio.run(go)
    e = report.exploration
    assert e.aborted and "could not be restarted" in e.aborted
    assert e.statuses.get("crash") == 1 and e.calls == 3
    assert all(t.source == "written" for t in tasks)  # nothing can be grounded on a dead server


def test_writes_are_explored_only_when_allowed_and_the_server_is_reset_around_them():
    async def go():
        policy = ToolPolicy(allow_destructive=True)
        async with ServerSession(ServerSpec.parse(INVENTORY), policy) as s:
            before = json.loads((await s.call("get_item", {"item_id": "ITM-001"})).text)
            result = await Explorer(s, allow_destructive=True, max_calls=40, seed=2).run()
            after = json.loads((await s.call("get_item", {"item_id": "ITM-001"})).text)
            return before, result, after

    before, result, after = anyio.run(go)
    wrote = [st for st in result.steps if st.wrote]
    assert {st.tool for st in wrote} & {"update_stock", "set_price", "delete_item", "place_order"}
    assert result.stats.resets >= len(wrote) + 1
    assert after == before  # every write was undone by a reset
    assert not any(st.wrote for st in result.steps if st.tool in ("get_item", "filter_items"))


def test_writes_are_not_explored_on_a_server_that_cannot_be_reset(inventory_http):
    async def go():
        policy = ToolPolicy(allow_destructive=True)
        async with ServerSession(ServerSpec.parse(inventory_http), policy) as s:
            return await Explorer(s, allow_destructive=True, max_calls=10).run()

    result = anyio.run(go)
    assert "cannot be reset" in result.stats.skipped_tools["update_stock"]
    assert not any(st.wrote for st in result.steps)

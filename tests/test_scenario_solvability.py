"""The solvability pass (`--check-with`): real episodes through the agent loop against the real
inventory server; the checker and policy models are fakes that solve everything or nothing, so what
the pass keeps, drops and marks is known in advance."""

from __future__ import annotations

import json

import anyio
import pytest
from test_scenario_generate import FakeTaskWriter

from conftest import INVENTORY
from judges.judge_prompts import VERDICT_SYSTEM
from mcp_rl.models.base import Completion
from mcp_rl.rollout.pool import SessionPool
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy
from mcp_rl.solvability import LAST_WORD, UNSUPPORTED, SolvabilitySettings, check_solvability
from scenario_gen import GenerateConfig, Task, apply_rule, generate_tasks


class FakeSolver:
    """A fake agent that knows each grounded task's reference calls: it makes them, one a turn (an id a
    later call needs comes from an earlier turn's result, or it is invented), then answers with the
    value its rule reads from the results. As a judge it says every attempt succeeded."""

    name = "fake-solver"

    def __init__(self, tasks: list[Task]) -> None:
        self.by_text = {t.text: t for t in tasks}

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            ok = "don't know" not in messages[-1]["content"]
            return [Completion(text=json.dumps({"success": ok, "explanation": "read the attempt"}))]
        task = self.by_text[messages[1]["content"]]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not task.reference_calls:
            return [Completion(text="Here is what you asked for.")]
        if len(results) < len(task.reference_calls):  # one call a turn: a later call uses an earlier result
            c = task.reference_calls[len(results)]
            return [Completion(text=json.dumps({"name": c.tool, "arguments": c.arguments}))]
        return [Completion(text=f"The answer is {apply_rule(task.answer_rule, results)}.")]


class FakeGiveUp:
    """A fake agent that never calls a tool and never knows; as a judge it fails every attempt."""

    name = "fake-give-up"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            return [Completion(text='{"success": false, "explanation": "no answer"}')]
        return [Completion(text="Sorry, I don't know.")]


# Read-only tools only: episodes then share one session (no restart between them), which keeps this fast.
READS = ToolPolicy(allow=["list_categories", "get_item", "search_items", "filter_items"])


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    async def go():
        async with ServerSession(
            ServerSpec.parse(INVENTORY).with_connection(result_budget=20000), READS
        ) as s:
            return await generate_tasks(s, FakeTaskWriter(), GenerateConfig(n=4, grounded_share=0.75, seed=5))

    tasks, _ = anyio.run(go)
    return tasks


def _check(tasks, checker, policy=None):
    async def go():
        async with SessionPool(ServerSpec.parse(INVENTORY), READS, size=1) as pool:
            return await check_solvability(tasks, pool, checker, attempts=2, policy=policy)

    return anyio.run(go)


def test_solvability_keeps_solved_tasks_and_marks_those_without_signal(tasks):
    assert {t.source for t in tasks} == {"grounded", "written"}
    kept = _check(tasks, FakeSolver(tasks), policy=FakeGiveUp())
    assert [t.id for t in kept] == [t.id for t in tasks]
    for t in kept:
        assert t.notes["checker_solve_rate"] == 1.0
        assert t.notes["policy_solve_rate"] == 0.0 and t.notes["grpo_signal"] == "never"


def test_solvability_drops_what_nobody_solves(tasks):
    assert _check(tasks, FakeGiveUp()) == []


def test_the_default_pass_attempts_only_written_tasks_and_marks_what_it_solved(tasks):
    check = SolvabilitySettings()
    assert check.enabled and check.attempts == 1 and not check.grounded

    async def go(checker):
        async with SessionPool(ServerSpec.parse(INVENTORY), READS, size=1) as pool:
            return await check_solvability(
                tasks,
                pool,
                checker,
                attempts=check.attempts,
                max_turns=check.max_turns,
                grounded=check.grounded,
            )

    kept = anyio.run(go, FakeSolver(tasks))
    assert [t.id for t in kept] == [t.id for t in tasks]
    for t in kept:
        if t.source == "written":
            assert t.notes["solve_rate"] == 1.0 and t.notes["solved"] == "always"
        else:  # verified by re-running its calls; not attempted again
            assert "solve_rate" not in t.notes and t.notes == next(x.notes for x in tasks if x.id == t.id)
    dropped = anyio.run(go, FakeGiveUp())
    assert [t.id for t in dropped] == [t.id for t in tasks if t.source == "grounded"]


def test_generate_reports_the_tasks_no_attempt_solved():
    async def go():
        spec = ServerSpec.parse(INVENTORY)
        async with (
            SessionPool(spec, READS, size=1) as pool,
            ServerSession(spec.with_connection(result_budget=20000), READS) as s,
        ):

            async def solvability(ts, say, dropped, seen):
                return await check_solvability(
                    ts, pool, FakeGiveUp(), attempts=1, max_turns=2, grounded=False, say=say, dropped=dropped,
                    seen=seen,
                )  # fmt: skip

            cfg = GenerateConfig(n=4, grounded_share=0.5, seed=5)
            progress = lambda msg, _report: said.append(msg)  # noqa: E731
            return await generate_tasks(s, FakeTaskWriter(), cfg, solvability=solvability, progress=progress)

    said: list[str] = []
    tasks, report = anyio.run(go)
    assert tasks and all(t.source == "grounded" for t in tasks)
    # the pass says how far it is, one line per attempt and one per grade (it was silent for 20-40
    # minutes on git, then 30 more while grading on the filesystem server)
    at = said.index("solvability pass")
    assert said[at + 1 : at + 6] == [
        "solvability: attempting 2 tasks (2 attempts)",
        "solvability: 1 of 2 attempts done",
        "solvability: 2 of 2 attempts done",
        "solvability: 1 of 2 attempts graded",
        "solvability: 2 of 2 attempts graded",
    ]
    assert report.dropped["no attempt solved it"] == 2
    assert len(report.drop_examples["no attempt solved it"]) == 2
    # and the set is refilled with grounded tasks, whose references were re-run, up to the n asked
    assert "refilling 2 dropped tasks with grounded ones" in said
    assert len(tasks) == 4 and len({t.id for t in tasks}) == 4


class FakeMentalArithmetic:
    """A fake checker that answers every task from its own head with a number no tool returned (as the
    1.5B writer did for "the mean of 4, 8 and 15"), never calling a tool."""

    name = "fake-mental-arithmetic"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            return [Completion(text='{"success": true, "explanation": "looks right"}')]
        return [Completion(text="The answer is 4817.")]


def test_an_attempt_that_never_called_a_tool_neither_solves_nor_drops_a_task(tasks):
    written = [t for t in tasks if t.source == "written"]
    kept = _check(written, FakeMentalArithmetic())
    assert [t.id for t in kept] == [t.id for t in written]
    assert all(t.notes["solved"] == "unknown" and t.notes["solve_rate"] is None for t in kept)


class FakeLooper:
    """A fake checker that makes a right call and then repeats it until the turn limit, never answering:
    what the 1.5B writer did on every written task of a filesystem-server generation. As a judge it
    fails every attempt."""

    name = "fake-looper"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            return [Completion(text='{"success": false, "explanation": "no answer"}')]
        return [Completion(text=json.dumps({"name": "list_categories", "arguments": {}}))]


def test_an_attempt_that_never_answered_neither_solves_nor_drops_a_task(tasks):
    written = [t for t in tasks if t.source == "written"]
    kept = _check(written, FakeLooper())
    assert [t.id for t in kept] == [t.id for t in written]
    assert all(t.notes["solved"] == "unknown" for t in kept)
    # negative control: an attempt that answered and was judged wrong still drops the task
    assert _check(written, FakeGiveUp()) == []


class FakeLooperWhoAnswersWhenAsked(FakeLooper):
    """The looper, but given the last word (no tools offered) it answers: right or wrong as told. As a
    judge it accepts an answer that says "right"."""

    name = "fake-looper-answers"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked = 0

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            ok = "right" in messages[-1]["content"]
            return [Completion(text=json.dumps({"success": ok, "explanation": "read the answer"}))]
        if messages[-1]["content"] == LAST_WORD:
            assert not tools  # the last word offers no tool
            self.asked += 1
            return [Completion(text=self.answer)]
        return await super().chat(messages, tools, n, sampling)


def test_an_attempt_out_of_turns_is_asked_for_its_answer_and_graded_on_it(tasks):
    written = [t for t in tasks if t.source == "written"]
    right = FakeLooperWhoAnswersWhenAsked("The categories are right here: tents and cooking.")
    kept = _check(written, right)
    assert right.asked == 2 * len(written)  # each of the 2 attempts per task
    assert [t.id for t in kept] == [t.id for t in written]
    assert all(t.notes["solved"] == "always" for t in kept)
    # the same loop answered wrongly when asked: now the pass can drop the task (before: "unknown")
    assert _check(written, FakeLooperWhoAnswersWhenAsked("I could not find anything.")) == []


class FakeWrongCaller(FakeLooper):
    """A fake checker that calls a tool with an item that does not exist until the turn limit, never
    answering: a task that leads every attempt only into tool errors."""

    name = "fake-wrong-caller"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            return [Completion(text='{"success": false, "explanation": "no answer"}')]
        return [Completion(text=json.dumps({"name": "get_item", "arguments": {"item_id": "NO-SUCH-ITEM"}}))]


def test_an_attempt_whose_every_call_failed_and_never_answered_drops_the_task(tasks):
    written = [t for t in tasks if t.source == "written"]
    assert written and _check(written, FakeWrongCaller()) == []
    # control: the same silence after an OK call says nothing about the task (see the looper above)
    assert len(_check(written, FakeLooper())) == len(written)


class FakeCategoryReader:
    """A fake checker that lists the categories, then answers with the first one and its count, whatever
    the task asked; as a judge it accepts every answer (the 1.5B writer's judge accepted "the city where
    Anna Weber teaches" when she teaches nowhere)."""

    name = "fake-category-reader"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] == VERDICT_SYSTEM:
            return [Completion(text='{"success": true, "explanation": "looks right"}')]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return [Completion(text=json.dumps({"name": "list_categories", "arguments": {}}))]
        first, _ = json.JSONDecoder().raw_decode(results[-1])  # one category per content block
        first = first[0] if isinstance(first, list) else first
        return [Completion(text=f"The {first['category']} category holds {first['item_count']} items.")]


def test_a_task_that_speaks_of_what_the_server_never_said_is_dropped_with_its_reason():
    premise = Task(id="w-premise", text="Which supplier was paid the most last winter?")
    sound = Task(id="w-sound", text="How many items does each category hold?")
    drops: list[tuple[str, str]] = []

    async def go():
        async with SessionPool(ServerSpec.parse(INVENTORY), READS, size=1) as pool:
            return await check_solvability(
                [premise, sound], pool, FakeCategoryReader(), attempts=1, max_turns=3, grounded=False,
                dropped=lambda t, why: drops.append((t.id, why)),
            )  # fmt: skip

    kept = anyio.run(go)
    # both attempts made an OK call and were judged right; only the sound task's words are the server's
    assert [t.id for t in kept] == ["w-sound"] and kept[0].notes["solved"] == "always"
    assert drops == [("w-premise", f"{UNSUPPORTED}: 'supplier', 'paid', 'winter'")]


class FakeEchoSearcher(FakeCategoryReader):
    """The category reader, but its first call searches the task's own words (as the 1.5B writer searched
    "nearby organization" for "Planning a trip to a nearby organization.") and finds nothing."""

    name = "fake-echo-searcher"

    async def chat(self, messages, tools=None, n=1, sampling=None):
        if messages[0]["content"] != VERDICT_SYSTEM and not any(m["role"] == "tool" for m in messages):
            words = " ".join(w for w in messages[1]["content"].rstrip("?.").split() if len(w) > 3)
            return [Completion(text=json.dumps({"name": "search_items", "arguments": {"query": words}}))]
        if messages[0]["content"] != VERDICT_SYSTEM and sum(m["role"] == "tool" for m in messages) == 1:
            return [Completion(text=json.dumps({"name": "list_categories", "arguments": {}}))]
        return await super().chat(messages, tools, n, sampling)


def test_an_attempt_that_searched_the_tasks_own_words_does_not_make_them_the_servers():
    premise = Task(id="w-premise", text="Which supplier was paid the most last winter?")
    drops: list[tuple[str, str]] = []

    async def go():
        async with SessionPool(ServerSpec.parse(INVENTORY), READS, size=1) as pool:
            return await check_solvability(
                [premise], pool, FakeEchoSearcher(), attempts=1, max_turns=4, grounded=False,
                dropped=lambda t, why: drops.append((t.id, why)),
            )  # fmt: skip

    assert anyio.run(go) == []
    assert drops == [("w-premise", f"{UNSUPPORTED}: 'supplier', 'paid', 'winter'")]


def test_what_a_write_stored_is_the_servers_and_what_a_read_echoed_is_not():
    """The npm memory server's results echo both: `add_observations` the observation it stored,
    `search_nodes`-like searches their query. Only the write's echo names something the server holds."""
    from mcp_rl.servers.results import CallStatus
    from mcp_rl.solvability import _seen
    from mcp_rl.trajectory import ToolCallRecord, Trajectory
    from scenario_gen.self_contained import unsupported_terms

    stored = {"observations": [{"entityName": "Ines", "contents": ["works at a hospital"]}]}
    write = ToolCallRecord(
        turn=0, name="add_observations", arguments=stored, status=CallStatus.OK,
        result_text='[{"entityName": "Ines", "addedObservations": ["works at a hospital"]}]',
    )  # fmt: skip
    search = write.model_copy(
        update={
            "name": "search_nodes",
            "arguments": {"query": "hospital"},
            "result_text": '{"query": "hospital", "entities": [{"name": "Ines", "observations": ["works at a pharmacy"]}]}',
        }
    )
    task = "Note that Ines works at a hospital."
    for call, unknown in ((write, []), (search, ["hospital"])):
        traj = Trajectory(id="t", task_id="w", tool_calls=[call])
        assert unsupported_terms(task, _seen(traj, reads={"search_nodes"})) == unknown


def test_a_success_that_called_no_tool_is_checked_against_what_exploration_saw():
    """The 1.5B writer answered "Planning a trip to a nearby organization." with advice, calling no
    tool, and its judge said solved (memory graph, 2026-12-07)."""
    premise = Task(id="w-premise", text="Which supplier was paid the most last winter?")
    sound = Task(id="w-sound", text="How many items does each category hold?")

    def check(seen):
        drops: list[str] = []

        async def go():
            async with SessionPool(ServerSpec.parse(INVENTORY), READS, size=1) as pool:
                kept = await check_solvability(
                    [premise, sound], pool, FakeSolver([premise, sound]), attempts=1, max_turns=2,
                    grounded=False, dropped=lambda t, why: drops.append(t.id), seen=seen,
                )  # fmt: skip
                return [t.id for t in kept], drops

        return anyio.run(go)

    explored = '[{"category": "tents", "item_count": 4}] List the categories with how many items each holds.'
    assert check(explored) == (["w-sound"], ["w-premise"])
    # control: with nothing explored there is nothing to check the words against, and both stay
    assert check("") == (["w-premise", "w-sound"], [])


def test_generate_counts_unsupported_words_as_one_kind_of_drop_with_the_words_in_its_examples():
    async def go():
        spec = ServerSpec.parse(INVENTORY)
        async with (
            SessionPool(spec, READS, size=1) as pool,
            ServerSession(spec.with_connection(result_budget=20000), READS) as s,
        ):
            writer = FakeTaskWriter()

            async def solvability(ts, say, dropped, seen):
                return await check_solvability(
                    ts,
                    pool,
                    FakeSolver(ts),
                    attempts=1,
                    max_turns=2,
                    grounded=False,
                    dropped=dropped,
                    seen=seen,
                )

            return await generate_tasks(
                s, writer, GenerateConfig(n=8, grounded_share=0.25, seed=5), solvability=solvability
            )

    tasks, report = anyio.run(go)
    n = report.dropped.get(UNSUPPORTED, 0)
    examples = report.drop_examples.get(UNSUPPORTED, [])
    assert n >= 1 and examples and all(e.endswith("')") and " ('" in e for e in examples), report.dropped
    assert not any(k.startswith(UNSUPPORTED + ":") for k in report.dropped)  # one kind, not one per word
    assert not {e.rsplit(" ('", 1)[0] for e in examples} & {t.text for t in tasks}  # and gone from the set

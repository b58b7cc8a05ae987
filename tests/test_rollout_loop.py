"""The agent loop against real MCP servers over stdio, driven by a scripted fake model so every
branch (calls, invalid calls, crashes, limits, cut samples) is forced exactly."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from mcp_rl.rollout import RolloutConfig, SessionPool, TemplateDriftError, run_group, run_tasks, verify_trace
from mcp_rl.servers.results import CallStatus
from mcp_rl.servers.spec import ServerSpec
from mcp_rl.trajectory import Trajectory
from tests.conftest import FAULTY, INVENTORY, PY, have
from tests.rollout_fakes import FakeScriptedModel

pytestmark = pytest.mark.timeout(120)


def call(name: str, **args: object) -> str:
    return json.dumps({"name": name, "arguments": args})


async def _group(
    model, server: str, n: int = 1, pool_size: int = 1, share: bool | None = None, **cfg
) -> list[Trajectory]:
    async with SessionPool(ServerSpec.parse(server), size=pool_size, share=share) as pool:
        return await run_group(model, pool, "Task for the test.", n=n, config=RolloutConfig(**cfg))


def group(model, server: str, **kw) -> list[Trajectory]:
    return anyio.run(lambda: _group(model, server, **kw))


def check_tokens(model: FakeScriptedModel, t: Trajectory) -> None:
    assert verify_trace(model, t.messages, t.metadata["tools"], t.token_ids, t.sampled_mask) == []
    assert len(t.token_ids) == len(t.sampled_mask) == len(t.logprobs)
    # Sampled positions carry the sampling log-probs, every other position 0.
    assert all((lp == -0.5) == bool(m) for lp, m in zip(t.logprobs, t.sampled_mask, strict=True))
    # Re-encoding the rendered conversation gives back the ids (the fake samples canonical tokens).
    assert model.encode(model.render(t.messages, t.metadata["tools"], False)) == t.token_ids


def test_episode_calls_a_tool_then_answers() -> None:
    model = FakeScriptedModel([call("get_item", item_id="ITM-001"), "ITM-001 is in stock."])
    (t,) = group(model, INVENTORY)
    assert t.end == "answer" and t.final_answer == "ITM-001 is in stock." and t.turns == 2
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    (rec,) = t.tool_calls
    assert rec.valid and rec.status is CallStatus.OK and rec.arguments == {"item_id": "ITM-001"}
    assert json.loads(rec.result_text)["id"] == "ITM-001"
    assert rec.latency_s > 0
    # The second prompt showed the model the tool's result.
    assert rec.result_text in model.prompts[1]
    # Tools went through the chat template and the server's instructions into the system prompt.
    assert "search_items" in model.prompts[0] and "Trailhead Outfitters" in model.prompts[0]
    check_tokens(model, t)
    # The ids at sampled positions are exactly the sampled ones, in order.
    sampled = [i for i, m in zip(t.token_ids, t.sampled_mask, strict=True) if m]
    expected = [*model.encode(t.messages[2]["content"]), model.eos_token_id]
    expected += [*model.encode(t.messages[4]["content"]), model.eos_token_id]
    assert sampled == expected
    assert t.timings["generate_s"] >= 0 and t.timings["tools_s"] > 0 and t.timings["total_s"] > 0


def test_invalid_calls_are_recorded_and_reported_to_the_model() -> None:
    reply = "\n".join(
        [
            call("get_weather", city="Paris"),  # unknown tool
            call("get_item", item_id=7),  # breaks the schema
            '<tool_call>{"name": "get_item", "arguments": {"item_id": </tool_call>',  # does not parse
        ]
    )
    model = FakeScriptedModel([reply, "I could not do it."])
    (t,) = group(model, INVENTORY)
    assert [r.valid for r in t.tool_calls] == [False, False, False]
    assert all(r.status is CallStatus.INVALID for r in t.tool_calls)
    unknown, bad_args, unparsed = (r.result_text for r in t.tool_calls)
    assert "unknown tool 'get_weather'" in unknown and "get_item" in unknown  # lists the real tools
    assert "invalid arguments" in bad_args
    assert "not valid JSON" in unparsed
    tool_msgs = [m["content"] for m in t.messages if m["role"] == "tool"]
    assert tool_msgs == [unknown, bad_args, unparsed]
    for text in tool_msgs:
        assert text in model.prompts[1]
    assert t.end == "answer"
    check_tokens(model, t)


def _stock(text: str) -> int:
    return json.loads(text)["stock"]


def test_stateful_episodes_do_not_see_each_other() -> None:
    script = [
        call("get_item", item_id="ITM-001"),
        call("update_stock", item_id="ITM-001", delta=-1),
        call("get_item", item_id="ITM-001"),
        "done",
    ]
    # Two at once on private sessions, then two in a row on one session (reset in between).
    for pool_size in (2, 1):
        trajs = group(FakeScriptedModel(script, delay_s=0.05), INVENTORY, n=2, pool_size=pool_size)
        assert len(trajs) == 2
        for t in trajs:
            before, update, after = t.tool_calls
            assert update.status is CallStatus.OK, update.result_text
            assert _stock(after.result_text) == _stock(before.result_text) - 1, pool_size
        assert _stock(trajs[0].tool_calls[0].result_text) == _stock(trajs[1].tool_calls[0].result_text)


def test_episodes_run_concurrently() -> None:
    model = FakeScriptedModel([call("list_categories"), "ok"], delay_s=0.3)
    trajs = group(model, INVENTORY, n=4, pool_size=4)
    assert len(trajs) == 4 and {t.end for t in trajs} == {"answer"}
    assert model.max_in_flight == 4  # all four episodes were generating at the same time
    assert len({t.id for t in trajs}) == 4 and len({t.group_id for t in trajs}) == 1


def test_read_only_calls_of_one_message_run_in_parallel_and_keep_their_order() -> None:
    reply = "\n".join([call("sleep", seconds=1), call("echo", text="second"), call("sleep", seconds=1)])
    model = FakeScriptedModel([reply, "ok"])
    (t,) = group(model, FAULTY)
    assert [r.name for r in t.tool_calls] == ["sleep", "echo", "sleep"]
    assert [m["content"] for m in t.messages if m["role"] == "tool"][1] == "second"
    assert t.timings["tools_s"] < 1.8  # the two 1 s sleeps overlapped


def test_server_crash_mid_episode_restarts_and_continues() -> None:
    model = FakeScriptedModel([call("crash"), call("echo", text="back"), "finished"])
    (t,) = group(model, FAULTY, max_restarts=1)
    crash, echo = t.tool_calls
    assert crash.status is CallStatus.CRASH and "restarted" in crash.result_text
    assert echo.status is CallStatus.OK and echo.result_text == "back"
    assert t.end == "answer" and t.metadata["restarts"] == 1
    check_tokens(model, t)


def test_server_crash_without_restart_budget_ends_the_episode() -> None:
    model = FakeScriptedModel([call("crash"), "never reached"])
    start = time.monotonic()
    (t,) = group(model, FAULTY, max_restarts=0)
    assert time.monotonic() - start < 60
    assert t.end == "server_error" and t.turns == 1 and t.final_answer is None
    assert t.tool_calls[0].status is CallStatus.CRASH
    check_tokens(model, t)  # the token trace is closed cleanly after the tool message


def test_turn_limit() -> None:
    model = FakeScriptedModel([call("echo", text="again")])
    (t,) = group(model, FAULTY, max_turns=3)
    assert t.end == "max_turns" and t.turns == 3 and len(t.tool_calls) == 3
    check_tokens(model, t)


def test_context_budget_ends_the_episode() -> None:
    model = FakeScriptedModel([call("big_output", n_chars=3000)])
    (t,) = group(model, FAULTY, max_context_tokens=2500, max_turns=10)
    assert t.end == "context" and t.turns < 10
    assert len(t.token_ids) > 2500 - 32  # it stopped for lack of room, not earlier
    check_tokens(model, t)


def test_sample_cut_by_the_length_limit() -> None:
    long_answer = "The answer is " + "very " * 80 + "long."
    model = FakeScriptedModel([long_answer])
    (t,) = group(model, FAULTY, max_new_tokens=20)
    assert t.end == "answer" and t.metadata["answer_truncated"] is True
    assert t.metadata["finish_reasons"] == ["length"]
    assert sum(t.sampled_mask) == 20
    # No eos was sampled: the template's end-of-turn follows, masked.
    first_after = t.sampled_mask.index(1) + 20
    assert t.token_ids[first_after] == model.eos_token_id and t.sampled_mask[first_after] == 0
    check_tokens(model, t)


def test_cut_off_call_is_invalid_and_told() -> None:
    model = FakeScriptedModel([call("echo", text="x" * 200), "ok"])
    (t,) = group(model, FAULTY, max_new_tokens=10)
    (rec,) = t.tool_calls
    assert not rec.valid and "not valid JSON" in rec.result_text
    check_tokens(model, t)


def test_a_template_that_rewrites_earlier_turns_fails_loudly() -> None:
    class DriftingFake(FakeScriptedModel):
        def render(self, messages, tools, add_generation_prompt):  # strips old assistant text
            msgs = [dict(m, content=m["content"].strip()) for m in messages]
            return super().render(msgs, tools, add_generation_prompt)

    model = DriftingFake([" " + call("echo", text="hi"), "ok"])
    with pytest.raises(BaseException) as info:
        group(model, FAULTY)
    leaves = info.value.exceptions if isinstance(info.value, BaseExceptionGroup) else [info.value]
    assert any(isinstance(e, TemplateDriftError) for e in leaves)


def test_an_empty_reply_renders_back_to_what_was_sampled() -> None:
    # The tiny model's template once wrote an empty assistant turn without the newline its
    # generation prompt ends with: an immediate end-of-turn drifted the trace (found by the soak
    # test at step 188 of a run, tests/test_soak.py).
    model = FakeScriptedModel([""])
    (t,) = group(model, FAULTY)
    assert t.end == "answer" and t.final_answer == ""
    check_tokens(model, t)


def test_many_tasks_share_the_pool() -> None:
    model = FakeScriptedModel([call("list_categories"), "ok"])

    async def main() -> list[list[Trajectory]]:
        async with SessionPool(ServerSpec.parse(INVENTORY), size=2) as pool:
            return await run_tasks(model, pool, ["task one", "task two"], n=2)

    groups = anyio.run(main)
    assert [len(g) for g in groups] == [2, 2]
    assert groups[0][0].task_text == "task one" and groups[1][0].task_text == "task two"
    assert groups[0][0].task_id != groups[1][0].task_id
    assert groups[0][0].group_id != groups[1][0].group_id


class FakeApiModel:
    """A fake of an API ChatModel (no token ids): replies scripted by turn."""

    name = "fake-api"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[list[dict]] = []

    async def chat(self, messages, tools=None, n=1, sampling=None):
        from mcp_rl.models.base import Completion

        self.seen.append([dict(m) for m in messages])
        turn = sum(m["role"] == "assistant" for m in messages)
        return [Completion(text=self.replies[min(turn, len(self.replies) - 1)])] * n


def test_api_models_get_structured_tool_calls_and_no_tokens() -> None:
    model = FakeApiModel([call("get_item", item_id="ITM-002"), "ITM-002 is a sleeping bag."])
    (t,) = group(model, INVENTORY)
    assert t.end == "answer" and t.token_ids == [] and t.sampled_mask == []
    assistant, tool = t.messages[2], t.messages[3]
    (tc,) = assistant["tool_calls"]
    assert tc["function"]["name"] == "get_item" and json.loads(tc["function"]["arguments"]) == {
        "item_id": "ITM-002"
    }
    assert tool["tool_call_id"] == tc["id"] and tool["role"] == "tool"
    assert model.seen[1][-1] == tool  # the API saw the tool result, tied to its call id


def test_the_form_of_each_call_is_recorded_and_summarized() -> None:
    """A tagged call and a bare one in the same episode: the record says which was which, the step
    figures give the share other runtimes would parse, and the logged reward component agrees."""
    from judges.checks import run_checks
    from mcp_rl.evaluate import summarize

    tagged = f"<tool_call>\n{call('get_item', item_id='ITM-001')}\n</tool_call>"
    model = FakeScriptedModel([tagged, call("get_item", item_id="ITM-002"), "Both are in stock."])
    (t,) = group(model, INVENTORY)
    assert [(c.arguments["item_id"], c.tagged, c.status) for c in t.tool_calls] == [
        ("ITM-001", True, CallStatus.OK),
        ("ITM-002", False, CallStatus.OK),
    ]
    assert summarize([t])["tagged_call_rate"] == 0.5
    assert run_checks(t).extra["tagged_calls"] == 0.5
    # it survives the trip through the run's files
    assert Trajectory.model_validate_json(t.model_dump_json()).tool_calls[0].tagged


@pytest.mark.npm
@pytest.mark.skipif(not have("npx"), reason="needs node/npx")
@pytest.mark.timeout(600)
def test_a_run_starts_from_the_reset_state_not_from_what_an_earlier_run_wrote(tmp_path) -> None:
    """A server that keeps its state on disk (the npm memory graph, a JSONL file) still holds what the
    last episode of an earlier run wrote: with a reset command, the first episode is reset too."""
    graph = tmp_path / "memory.jsonl"
    seed = json.dumps({"type": "entity", "name": "Ines", "entityType": "person", "observations": []})
    graph.write_text(seed + "\n")
    restore = [PY, "-c", f"open({str(graph)!r}, 'w').write({seed + chr(10)!r})"]
    server = ServerSpec.parse("npx -y @modelcontextprotocol/server-memory", env={"MEMORY_FILE_PATH": str(graph)})
    server = server.with_connection(connect_timeout=240)
    add = call("create_entities", entities=[{"name": "Hospital XYZ", "entityType": "organization", "observations": []}])
    script = [call("read_graph"), add, "done"]

    async def one_run(spec: ServerSpec) -> list[str]:
        async with SessionPool(spec, size=1, share=False) as pool:
            (t,) = await run_group(FakeScriptedModel(script), pool, "Add the hospital.", n=1, config=RolloutConfig())
        first, added = t.tool_calls
        assert added.status is CallStatus.OK, added.result_text
        return [e["name"] for e in json.loads(first.result_text)["entities"]]

    # the control: with no reset command, the second run's first episode sees the first run's write
    assert anyio.run(one_run, server) == ["Ines"]
    assert anyio.run(one_run, server) == ["Ines", "Hospital XYZ"]
    graph.write_text(seed + "\n")
    resettable = server.model_copy(update={"reset_command": restore})
    assert anyio.run(one_run, resettable) == ["Ines"]
    assert anyio.run(one_run, resettable) == ["Ines"]


def test_reset_commands_never_run_two_at_once(tmp_path) -> None:
    """A reset command that restores files is rarely safe to run twice at once (the example's seeder
    re-creates a git repository: two at once failed with `git add` exit 128 and left a solvability
    pass with no gradable attempt). The pool runs one at a time: here, one that fails if another runs."""
    lock = tmp_path / "reset.lock"
    script = (
        "import os, sys, time\n"
        f"try: fd = os.open({str(lock)!r}, os.O_CREAT | os.O_EXCL)\n"
        "except FileExistsError: sys.exit('another reset is running')\n"
        "time.sleep(0.5); os.close(fd)\n"
        f"os.remove({str(lock)!r})\n"
    )
    spec = ServerSpec.parse(INVENTORY).model_copy(update={"reset_command": [PY, "-c", script]})
    model = FakeScriptedModel([call("get_item", item_id="ITM-001"), "done"], delay_s=0.05)

    async def go() -> list[Trajectory]:
        async with SessionPool(spec, size=2, share=False) as pool:
            # 6 episodes on 2 sessions: the 4 after the first two each need a reset, two at a time
            return await run_group(model, pool, "Task for the test.", n=6, config=RolloutConfig())

    trajs = anyio.run(go)
    assert len(trajs) == 6 and all(t.end == "answer" for t in trajs), [t.end for t in trajs]
    assert all(c.status is CallStatus.OK for t in trajs for c in t.tool_calls)

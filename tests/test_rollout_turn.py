"""The agent turn (`mcp_rl.rollout.turn`) as `mcp-rl chat` uses it: the same restart, context and
call-id rules as a training episode, across the messages of one conversation. Real faulty server
over stdio; the scripted fake model forces each branch."""

from __future__ import annotations

import json

import anyio
import pytest

from mcp_rl.chat import Chat
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers.results import CallStatus
from mcp_rl.servers.session import ServerSession
from mcp_rl.servers.spec import ServerSpec
from tests.conftest import FAULTY
from tests.rollout_fakes import FakeScriptedModel

pytestmark = pytest.mark.timeout(120)


def call(name: str, **args: object) -> str:
    return json.dumps({"name": name, "arguments": args})


def converse(model: FakeScriptedModel, texts: list[str], **cfg: object) -> tuple[Chat, list]:
    async def main() -> tuple[Chat, list]:
        async with ServerSession(ServerSpec.parse(FAULTY)) as session:
            conv = Chat(model, session, "You are a test assistant.", RolloutConfig(temperature=0, **cfg))
            return conv, [await conv.send(t) for t in texts]

    return anyio.run(main)


def test_chat_restarts_a_crashed_server_once_per_conversation_as_an_episode_does() -> None:
    # The fake picks its reply by the assistant turns the prompt already holds (the whole chat).
    model = FakeScriptedModel([call("crash"), "It crashed, sorry.", call("crash"), "never reached"])
    conv, (first, second) = converse(model, ["Try it.", "Try again."], max_restarts=1)
    assert first.end == "answer" and first.answer == "It crashed, sorry."
    assert first.calls[0].status is CallStatus.CRASH and "restarted" in first.calls[0].result_text
    # The one restart was spent in the first message: the second crash ends the exchange.
    assert second.end == "server_error" and second.answer is None
    assert "restarted" not in second.calls[0].result_text
    assert conv.agent.restarts == 1


def test_chat_stops_when_the_context_is_full_and_keeps_call_ids_unique() -> None:
    model = FakeScriptedModel([call("big_output", n_chars=3000)])
    conv, (first, second) = converse(model, ["Fill it.", "More."], max_context_tokens=2500, max_turns=10)
    assert first.end == "context" and first.answer is None and 0 < len(first.calls) < 10
    # A full context ends on the last tool message: no assistant turn is left half made, and the
    # next message finds no room at all.
    assert second.end == "context" and second.calls == []
    assert conv.messages[-1] == {"role": "user", "content": "More."} and conv.messages[-2]["role"] == "tool"
    ids = [m["tool_call_id"] for m in conv.messages if m["role"] == "tool"]
    assert len(ids) == len(set(ids)) == len(first.calls)

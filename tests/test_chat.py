"""`mcp-rl chat`: the training agent loop against the real inventory server over stdio, from the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcp_rl.chat import Chat, chat_system_prompt
from mcp_rl.models.registry import close_models, load_model
from mcp_rl.policy_prompt import system_prompt
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers import ServerSpec, ToolPolicy
from mcp_rl.servers.session import ServerSession
from tests.conftest import INVENTORY, REPO, free_port
from tests.test_serve import QWEN, inventory_prompt, make_run

pytestmark = pytest.mark.timeout(600)

MCP_RL = str(Path(sys.executable).parent / "mcp-rl")


def chat(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_RL, "chat", "--server", INVENTORY, *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=500,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
    )


def test_chat_keeps_the_conversation_and_the_tool_policy() -> None:
    """In process: the tiny model, the live server; two messages in one conversation."""

    async def main() -> None:
        model = load_model("tiny")
        try:
            async with ServerSession(ServerSpec.parse(INVENTORY), ToolPolicy()) as session:
                system, recorded = chat_system_prompt(session, None)
                assert not recorded and system == system_prompt(session.server_name, session.instructions)
                seen = []
                conv = Chat(
                    model,
                    session,
                    system,
                    RolloutConfig(max_turns=2, max_new_tokens=8, temperature=0),
                    seen.append,
                )
                assert "delete_item" not in conv.tool_names and "get_item" in conv.tool_names
                first = await conv.send("How many tents are there?")
                second = await conv.send("And sleeping bags?")
                users = [m["content"] for m in conv.messages if m["role"] == "user"]
                assert users == ["How many tents are there?", "And sleeping bags?"]
                assert conv.messages[0] == {"role": "system", "content": system}
                for reply in (first, second):
                    assert (reply.answer is not None) == (reply.end == "answer")
                assert len(seen) == len(first.calls) + len(second.calls)
                conv.reset()
                assert conv.messages == [{"role": "system", "content": system}]
        finally:
            close_models(model)

    anyio.run(main)


def test_recorded_training_prompt_is_used_on_the_same_server() -> None:
    async def main() -> None:
        async with ServerSession(ServerSpec.parse(INVENTORY)) as session:
            same = {"system_prompt": "RECORDED", "server_name": session.server_name}
            assert chat_system_prompt(session, same) == ("RECORDED", True)
            other = {"system_prompt": "RECORDED", "server_name": "another-server"}
            text, recorded = chat_system_prompt(session, other)
            assert not recorded and session.server_name in text

    anyio.run(main)


def test_chat_one_shot_message_with_the_tiny_model() -> None:
    r = chat("--model", "tiny", "--message", "How many tents?", "--max-turns", "1", "--max-new-tokens", "8")
    assert "Traceback" not in r.stderr
    assert "server inventory-example" in r.stderr and "model tiny-random" in r.stderr
    # One turn of a random model: an answer on stdout (exit 0), or a call and the turn-limit note (exit 1).
    if r.returncode == 0:
        assert r.stdout.strip()
    else:
        assert r.returncode == 1 and "no answer within 1 turns" in r.stderr, r.stderr


def test_chat_bad_inputs_exit_2_with_a_clear_message(tmp_path: Path) -> None:
    r = chat("--model", str(tmp_path / "runs" / "nope"), "--message", "hi")
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [
            MCP_RL,
            "chat",
            "--server",
            f"http://127.0.0.1:{free_port()}/mcp",
            "--model",
            "tiny",
            "--message",
            "hi",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "cannot reach server" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.models
@pytest.mark.slow
def test_chat_with_the_tuned_model_interactive(tmp_path: Path) -> None:
    """The 0.5B default with a LoRA checkpoint: lines on stdin, then end of input."""
    run = make_run(tmp_path / "qwenrun", QWEN, inventory_prompt(), b_std=0.002)
    r = chat(
        "--model", str(run), "--max-turns", "2", "--max-new-tokens", "48",
        stdin="What is the price of item ITM-001?\n/reset\nHello! What can you do?\n",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "model qwenrun, checkpoint 1" in r.stderr
    # The question needs the server: the call and its (clipped) result are shown as they happen.
    assert '-> get_item({"item_id": "ITM-001"})  [ok]' in r.stderr, r.stderr
    assert "Summit Dome" in r.stderr
    assert "(conversation cleared)" in r.stderr
    # The greeting needs no tool: the model answers (on stdout).
    assert r.stdout.strip(), r.stderr


def test_chat_with_a_run_uses_the_run_s_tool_policy_unless_flags_say_otherwise(tmp_path: Path) -> None:
    import json

    run = make_run(tmp_path / "tinyrun", "tiny", inventory_prompt(), b_std=0.1)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "policy": {"deny": ["get_item", "search_items"]}}))

    def tools_line(*flags: str) -> str:
        r = chat("--model", str(run), "--message", "hi", "--max-turns", "1", "--max-new-tokens", "4", *flags)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        return next(line for line in r.stderr.splitlines() if "server inventory-example" in line)

    assert "3 excluded" in tools_line()  # the run's two denied tools, and the destructive one
    assert "1 excluded" in tools_line("--deny-tools", "nothing_*")  # the flags replace the run's policy

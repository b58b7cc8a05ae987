"""`mcp-rl serve` driven by the real `openai` client against a real uvicorn server on 127.0.0.1.

The fast tests serve a run made with the tiny random model (the protocol does not depend on what it
says); the `models` tests serve a LoRA run of the default 0.5B model with the inventory server's tools,
which does emit tool calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
import torch

from mcp_rl.errors import McpRlError
from mcp_rl.models.base import Completion
from mcp_rl.models.registry import close_models, load_model
from mcp_rl.policy_prompt import ANSWER_CONVENTION, system_prompt
from mcp_rl.rundir import RunDir, RunState
from mcp_rl.serve.completions import ServedModel
from mcp_rl.serve.openai_types import ChatRequest
from mcp_rl.servers import ServerSpec
from mcp_rl.servers.session import ServerSession
from mcp_rl.tuned import find_tuned, load_tuned
from tests.conftest import INVENTORY, REPO, free_port, stop, wait_for_port

pytestmark = pytest.mark.timeout(600)

MCP_RL = str(Path(sys.executable).parent / "mcp-rl")
TOKEN = "test-serve-token-5f1c0a9e7d"
QWEN = "qwen2.5-coder-0.5b-instruct"


def inventory_prompt() -> dict[str, Any]:
    """What training records in prompt.json, taken from the live inventory server."""

    async def read() -> dict[str, Any]:
        async with ServerSession(ServerSpec.parse(INVENTORY)) as s:
            return {
                "system_prompt": system_prompt(s.server_name, s.instructions),
                "server_name": s.server_name,
                "tools": [t.openai() for t in s.tools],
                "answer_convention": ANSWER_CONVENTION,
            }

    return anyio.run(read)


def make_run(path: Path, model_name: str, prompt: dict[str, Any], b_std: float) -> Path:
    """A run directory as training leaves it: config.json, prompt.json, a real PEFT checkpoint of a
    LoRA that changes the model (B drawn with `b_std`; PEFT's own start, B = 0, would change nothing),
    and step 1 committed as the best."""
    run = RunDir(path)
    run.create({"model": model_name})
    run.write_json(run.prompt_file, prompt)
    model = load_model(model_name)
    try:
        torch.manual_seed(0)
        model.attach_lora(r=4, alpha=8)
        with torch.no_grad():
            for name, p in model.model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, b_std)
        run.save_checkpoint(1, model.save_adapter)
    finally:
        close_models(model)
    run.commit(RunState(completed_step=1, base_evaluated=True, best_step=1, best_success=1.0))
    return path


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def client(self, token: str | None = TOKEN) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=token or "none", max_retries=0, timeout=300)


def start_serve(args: list[str], log: Path, token: str | None = TOKEN) -> Served:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MCP_RL_SERVE_TOKEN", None)
    if token:
        env["SERVE_TEST_TOKEN"] = token
        args = [*args, "--token-env", "SERVE_TEST_TOKEN"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [MCP_RL, "serve", *args, "--port", str(port)], cwd=REPO, env=env, stdout=out, stderr=out
        )
    try:
        wait_for_port(port, proc, timeout=240)
    except BaseException:
        stop(proc)
        raise AssertionError(f"serve did not start:\n{log.read_text()}") from None
    return Served(proc, port, log)


# ---- the fast protocol tests: a run of the tiny model ----------------------------------------

TINY_PROMPT = {
    "system_prompt": "You complete the user's task with the tools of the test server.",
    "server_name": "test",
    "tools": [],
    "answer_convention": ANSWER_CONVENTION,
}
LOOKUP_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    },
}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("serve") / "tinyrun", "tiny", TINY_PROMPT, b_std=0.5)


@pytest.fixture(scope="module")
def tiny_served(tiny_run: Path) -> Iterator[Served]:
    served = start_serve([str(tiny_run)], tiny_run.parent / "serve.log")
    yield served
    stop(served.proc)


def test_models_lists_the_run(tiny_served: Served) -> None:
    models = tiny_served.client().models.list()
    assert [m.id for m in models.data] == ["tinyrun"]
    assert tiny_served.client().models.retrieve("tinyrun").id == "tinyrun"


def test_plain_answer_uses_the_training_prompt(tiny_served: Served, tiny_run: Path) -> None:
    messages = [{"role": "user", "content": "Say hello."}]
    resp = tiny_served.client().chat.completions.create(
        model="tinyrun", messages=messages, max_tokens=6, temperature=0, seed=1
    )
    choice = resp.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length") and not choice.message.tool_calls
    assert 1 <= resp.usage.completion_tokens <= 6
    # The prompt the server rendered is the conversation with the run's training system prompt first.
    model = load_tuned(find_tuned(tiny_run))
    expected = model.encode(
        model.render([{"role": "system", "content": TINY_PROMPT["system_prompt"]}, *messages], None, True)
    )
    close_models(model)
    assert resp.usage.prompt_tokens == len(expected)
    # A system message of the client's own replaces it.
    own = tiny_served.client().chat.completions.create(
        model="tinyrun", messages=[{"role": "system", "content": "Be brief."}, *messages], max_tokens=1
    )
    assert own.usage.prompt_tokens < resp.usage.prompt_tokens


def test_the_served_reply_is_the_tuned_model_s_not_the_base_s(tiny_served: Served, tiny_run: Path) -> None:
    # serve must apply the run's adapter: its greedy reply is what base + adapter says in process,
    # and (the adapter being far from zero) not what the base model alone says.
    messages = [{"role": "user", "content": "List three colours."}]
    served = tiny_served.client().chat.completions.create(
        model="tinyrun", messages=messages, max_tokens=10, temperature=0
    )
    req = ChatRequest(model="tinyrun", messages=messages, max_tokens=10, temperature=0)

    def reply(model: Any) -> str:
        try:
            out = anyio.run(ServedModel(model, "tinyrun", TINY_PROMPT["system_prompt"]).complete, req)
        finally:
            close_models(model)
        return out.choices[0].message.content or ""

    tuned, base = reply(load_tuned(find_tuned(tiny_run))), reply(load_model("tiny"))
    assert tuned != base
    assert (served.choices[0].message.content or "") == tuned


def test_stream_gives_the_same_reply_as_a_plain_request(tiny_served: Served) -> None:
    kw: dict[str, Any] = {
        "model": "tinyrun",
        "messages": [{"role": "user", "content": "Count to three."}],
        "tools": [LOOKUP_TOOL],
        "max_tokens": 12,
        "temperature": 0,
    }
    client = tiny_served.client()
    plain = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == plain.usage.total_tokens
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [plain.choices[0].finish_reason]
    assert text == (plain.choices[0].message.content or "")


def test_bearer_token_is_required_and_never_shown(tiny_served: Served) -> None:
    with pytest.raises(openai.AuthenticationError):
        tiny_served.client(token=None).models.list()
    with pytest.raises(openai.AuthenticationError):
        tiny_served.client(token="wrong-" + TOKEN).chat.completions.create(
            model="tinyrun", messages=[{"role": "user", "content": "hi"}], max_tokens=1
        )
    r = httpx.get(f"{tiny_served.base_url}/models", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert TOKEN not in r.text
    r = httpx.get(f"{tiny_served.base_url}/models", headers={"Authorization": f"bearer {TOKEN}"})
    assert r.status_code == 200
    time.sleep(0.2)  # let the access log reach the file
    log = tiny_served.log.read_text()
    assert "401" in log and "200" in log  # the requests were logged ...
    assert TOKEN not in log  # ... without the token


def test_bad_requests_get_openai_style_errors(tiny_served: Served) -> None:
    url = f"{tiny_served.base_url}/chat/completions"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(body: str | dict[str, Any]) -> httpx.Response:
        content = body if isinstance(body, str) else json.dumps(body)
        return httpx.post(url, content=content, headers={**auth, "content-type": "application/json"})

    user = [{"role": "user", "content": "hi"}]
    cases: list[tuple[str | dict[str, Any], int, str]] = [
        ("{not json", 400, "not valid JSON"),
        ("[1, 2]", 400, "JSON object"),
        ({"model": "tinyrun"}, 400, "'messages' is required"),
        ({"model": "tinyrun", "messages": []}, 400, "messages"),
        ({"model": "tinyrun", "messages": [{"role": "robot", "content": "x"}]}, 400, "messages.0.role"),
        ({"model": "tinyrun", "messages": user, "temperature": 5}, 400, "temperature"),
        ({"model": "tinyrun", "messages": user, "n": 2, "stream": True}, 400, "n=1"),
        (
            {
                "model": "tinyrun",
                "messages": user,
                "tools": [LOOKUP_TOOL],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            400,
            "not in tools",
        ),
        ({"model": "gpt-4o", "messages": user}, 404, "does not exist"),
    ]
    for body, status, text in cases:
        r = post(body)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert text in err["message"], (body, err)
        assert err["type"] in ("invalid_request_error", "not_found_error")
    r = httpx.get(f"{tiny_served.base_url}/nothing", headers=auth)
    assert r.status_code == 404 and "error" in r.json()
    with pytest.raises(openai.NotFoundError):
        tiny_served.client().chat.completions.create(model="other", messages=user, max_tokens=1)  # type: ignore[arg-type]


def test_served_model_rebuilds_the_training_conversation() -> None:
    """Requests are turned back into the form the model trained on (no model needed for this)."""
    served = ServedModel(model=None, name="m", system_prompt="TRAINED PROMPT")
    raw = 'Let me look.\n{"name": "lookup", "arguments": {"word": "tent"}}'
    choice = served._choice(0, Completion(text=raw, finish_reason="stop"), ["lookup"])
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.function == {"name": "lookup", "arguments": '{"word": "tent"}'}
    answer = served._choice(0, Completion(text=" A tent. ", finish_reason="length"), ["lookup"])
    assert answer.message.content == "A tent." and answer.finish_reason == "length"

    req = ChatRequest.model_validate(
        {
            "messages": [
                {"role": "user", "content": "find tent"},
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": "tent: a shelter"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "x1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"word": "a"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "x1", "content": [{"type": "text", "text": "a: a letter"}]},
            ]
        }
    )
    msgs = served.messages_for(req)
    assert msgs[0] == {"role": "system", "content": "TRAINED PROMPT"}
    assert msgs[2] == {"role": "assistant", "content": raw}  # our own call: the raw text it came from
    assert msgs[3] == {
        "role": "tool",
        "content": "tent: a shelter",
        "tool_call_id": call.id,
        "name": "lookup",
    }
    # A call we did not issue keeps its OpenAI form, arguments as an object for the template.
    assert msgs[4]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": {"word": "a"}}
    assert msgs[5]["name"] == "lookup"
    dev = ChatRequest.model_validate(
        {"messages": [{"role": "developer", "content": "mine"}, {"role": "user", "content": "x"}]}
    )
    assert served.messages_for(dev)[0] == {"role": "system", "content": "mine"}
    assert ServedModel(None, "m", None).messages_for(req)[0]["role"] == "user"


def test_serve_bad_input_is_one_clear_error(tmp_path: Path, tiny_run: Path) -> None:
    base = {k: v for k, v in os.environ.items() if k != "MCP_RL_SERVE_TOKEN"}
    # As the user meets them: exit code 2, one message, no traceback (each run costs the CLI's start-up).
    r = subprocess.run(
        [MCP_RL, "serve", str(tmp_path / "no-such-run"), "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=base,
    )  # fmt: skip
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [MCP_RL, "serve", str(tiny_run), "--token-env", "SERVE_TEST_UNSET_VAR"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=base,
    )  # fmt: skip
    assert r.returncode == 2 and "SERVE_TEST_UNSET_VAR" in r.stderr and "Traceback" not in r.stderr
    # The rest in process: the same errors, raised before anything loads or listens.
    from typer.testing import CliRunner

    from mcp_rl.cli import app

    runner = CliRunner()
    for args, text in [
        ([str(tiny_run), "--model", "tiny"], "either"),
        ([str(tiny_run), "--checkpoint", "7", "--port", "0"], "no checkpoint for step 7"),
        ([str(tmp_path)], "neither a training run nor an mcp-rl export"),
        (["--model", "no-such-model-xyz", "--port", "0"], "unknown model"),
    ]:
        result = runner.invoke(app, ["serve", *args])
        assert isinstance(result.exception, McpRlError) and text in result.exception.message, (args, result)


def test_loopback_detection() -> None:
    from mcp_rl.cli.serve_cmd import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")


# ---- the real tuned-model test: the 0.5B default with a LoRA, the inventory server's tools ----


@pytest.fixture(scope="module")
def qwen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("serve") / "qwenrun", QWEN, inventory_prompt(), b_std=0.002)


@pytest.mark.models
@pytest.mark.slow
def test_openai_client_gets_a_tool_call_from_the_tuned_model(qwen_run: Path) -> None:
    served = start_serve([str(qwen_run), "--max-batch", "2"], qwen_run.parent / "qwen-serve.log")
    try:
        client = served.client()
        tools = json.loads((qwen_run / "prompt.json").read_text())["tools"]
        assert "delete_item" not in {t["function"]["name"] for t in tools}
        messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the price of item ITM-001?"}]
        result: dict[str, Any] = {}

        def complete() -> None:
            result["resp"] = client.chat.completions.create(
                model="qwenrun",
                messages=messages,
                tools=tools,
                max_tokens=48,
                temperature=0,  # type: ignore[arg-type]
            )

        worker = threading.Thread(target=complete)
        worker.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        assert [m.id for m in client.models.list().data] == ["qwenrun"]
        models_s = time.monotonic() - t0
        still_generating = worker.is_alive()
        worker.join(timeout=400)
        assert still_generating and models_s < 5, "/v1/models waited for the generation"

        resp = result["resp"]
        choice = resp.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message
        (call,) = choice.message.tool_calls or []
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name == "get_item"
        assert json.loads(call.function.arguments) == {"item_id": "ITM-001"}
        assert resp.usage.prompt_tokens > 300  # the training prompt and the tool list were rendered

        # The next turn: the call and its result go back; the reply is a valid completion.
        messages += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": '{"id": "ITM-001", "price": 341.99}'},
        ]
        follow = client.chat.completions.create(
            model="qwenrun",
            messages=messages,
            tools=tools,
            max_tokens=32,
            temperature=0,  # type: ignore[arg-type]
        )
        assert follow.choices[0].finish_reason in ("tool_calls", "stop", "length")
        assert follow.usage.prompt_tokens > resp.usage.prompt_tokens

        # No tools: a plain answer.
        plain = client.chat.completions.create(
            model="qwenrun",
            messages=[{"role": "user", "content": "Say hello in one word."}],
            max_tokens=8,
            temperature=0,
        )
        assert plain.choices[0].message.content and not plain.choices[0].message.tool_calls
    finally:
        stop(served.proc)


def test_a_generation_bug_comes_back_as_an_openai_error_not_a_dropped_connection() -> None:
    # Anything generation raises (here a RuntimeError from the model) is logged with its traceback on
    # the server and reaches the client as a 500 in OpenAI's error shape, streaming or not.
    from starlette.testclient import TestClient

    from mcp_rl.serve.app import create_app

    model = load_model("tiny")

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the engine fell over")

    model.generate = broken
    try:
        client = TestClient(create_app(ServedModel(model, "m")))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        r = client.post("/v1/chat/completions", json=body)
        assert r.status_code == 500
        err = r.json()["error"]
        assert err["code"] == "internal_error" and "the engine fell over" in err["message"]
        with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as s:
            events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
        assert events[0]["choices"][0]["delta"]["role"] == "assistant"
        assert events[-1]["error"]["code"] == "internal_error"
    finally:
        close_models(model)


def test_an_exported_directory_is_served_with_the_same_replies_as_its_run(
    tiny_run: Path, tiny_served: Served
) -> None:
    # `mcp-rl export` then `mcp-rl serve EXPORT_DIR`: listed under the directory's name, with the
    # training prompt the export carries, and the same greedy reply as serving the run itself.
    from typer.testing import CliRunner

    from mcp_rl.cli import app

    out = tiny_run.parent / "tiny-export"
    result = CliRunner().invoke(app, ["export", str(tiny_run), "--format", "peft", "-o", str(out)])
    assert result.exit_code == 0, result.output
    served = start_serve([str(out)], tiny_run.parent / "serve-export.log")
    try:
        assert [m.id for m in served.client().models.list().data] == ["tiny-export"]
        kw: dict[str, Any] = {
            "messages": [{"role": "user", "content": "Name a colour."}],
            "max_tokens": 8,
            "temperature": 0,
        }
        from_export = served.client().chat.completions.create(model="tiny-export", **kw)
        from_run = tiny_served.client().chat.completions.create(model="tinyrun", **kw)
        assert from_export.choices[0].message.content == from_run.choices[0].message.content
        assert from_export.usage.prompt_tokens == from_run.usage.prompt_tokens  # the same system prompt
    finally:
        stop(served.proc)

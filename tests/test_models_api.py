"""The API backend against a FAKE OpenAI-compatible server on 127.0.0.1 (no real API is reachable
here). The fake speaks the chat-completions wire format; the openai client and litellm are real."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mcp_rl.errors import ModelError
from mcp_rl.models import SamplingParams, load_model
from mcp_rl.models.api_backend import ApiModel, tool_calls_as_text

SECRET = "sk-test-DO-NOT-LEAK-1234567890"


class FakeOpenAI:
    """A fake chat-completions endpoint. `mode` picks the behaviour; requests are recorded."""

    def __init__(self) -> None:
        self.mode = "text"
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.auth.append(self.headers.get("Authorization", ""))
                    fake.active += 1
                    fake.max_active = max(fake.max_active, fake.active)
                try:
                    status, payload = fake.respond(body)
                finally:
                    with fake._lock:
                        fake.active -= 1
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.mode == "unauthorized":
            return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        if self.mode == "slow":
            time.sleep(0.2)
        n = {"ignore_n": 1, "no_choices": 0}.get(self.mode, body.get("n", 1))
        choices = []
        for i in range(n):
            if self.mode == "tools":
                msg = {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"tz": "Asia/Tokyo"}'},
                        },
                        {"id": "c2", "type": "function", "function": {"name": "get_date", "arguments": ""}},
                    ],
                }
                finish = "tool_calls"
            else:
                msg = {"role": "assistant", "content": f"answer {i}"}
                finish = "length" if body.get("max_tokens") == 1 else "stop"
            choices.append({"index": i, "message": msg, "finish_reason": finish})
        return 200, {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.server.shutdown()


def chat(model: Any, n: int = 1, **kw: Any) -> list[Any]:
    return asyncio.run(model.chat([{"role": "user", "content": "hi"}], n=n, **kw))


def test_text_n_samples_and_request_shape(fake: FakeOpenAI) -> None:
    model = load_model("openai:gpt-fake", base_url=fake.url, api_key=SECRET)
    outs = chat(model, n=3, sampling=SamplingParams(temperature=0.3, max_new_tokens=50, seed=4))
    assert [c.text for c in outs] == ["answer 0", "answer 1", "answer 2"]
    assert all(c.token_ids == [] and c.logprobs == [] and c.finish_reason == "stop" for c in outs)
    req = fake.requests[-1]
    assert req["model"] == "gpt-fake" and req["n"] == 3 and req["temperature"] == 0.3
    assert req["max_tokens"] == 50 and req["seed"] == 4
    assert fake.auth[-1] == f"Bearer {SECRET}"
    (short,) = chat(model, sampling=SamplingParams(max_new_tokens=1))
    assert short.finish_reason == "length"


def test_structured_tool_calls_become_json_lines(fake: FakeOpenAI) -> None:
    fake.mode = "tools"
    model = ApiModel("gpt-fake", base_url=fake.url, api_key=SECRET)
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    (c,) = asyncio.run(model.chat([{"role": "user", "content": "time?"}], tools=tools))
    lines = c.text.split("\n")
    assert lines[0] == "Let me check."
    assert json.loads(lines[1]) == {"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}
    assert json.loads(lines[2]) == {"name": "get_date", "arguments": {}}
    assert fake.requests[-1]["tools"] == tools
    assert (
        tool_calls_as_text(None, [{"function": {"name": "x", "arguments": "{bad"}}])
        == '{"name": "x", "arguments": "{bad"}'
    )


def test_endpoint_ignoring_n_is_topped_up(fake: FakeOpenAI) -> None:
    fake.mode = "ignore_n"
    model = ApiModel("m", base_url=fake.url, api_key=SECRET)
    assert len(chat(model, n=4)) == 4
    assert len(fake.requests) == 4  # one with n=4 answered once, then three single requests


def test_endpoint_that_never_returns_choices_is_a_clear_error(fake: FakeOpenAI) -> None:
    fake.mode = "no_choices"
    model = ApiModel("m", base_url=fake.url, api_key=SECRET)
    with pytest.raises(ModelError, match="returned no choices"):
        chat(model, n=2)
    assert len(fake.requests) <= 3  # the first request and one top-up round, not an endless loop


def test_concurrency_limit(fake: FakeOpenAI) -> None:
    fake.mode = "slow"
    model = ApiModel("m", base_url=fake.url, api_key=SECRET, max_concurrency=2)

    async def many():
        return await asyncio.gather(*(model.chat([{"role": "user", "content": str(i)}]) for i in range(6)))

    assert len(asyncio.run(many())) == 6
    assert fake.max_active == 2


def test_rejected_key_is_a_clear_error_without_the_key(fake: FakeOpenAI) -> None:
    fake.mode = "unauthorized"
    model = ApiModel("m", base_url=fake.url, api_key=SECRET, max_retries=0)
    with pytest.raises(ModelError) as err:
        chat(model)
    assert "rejected the key" in str(err.value)
    assert SECRET not in str(err.value) and SECRET not in repr(model)
    assert err.value.__suppress_context__  # the client's own exception is not chained into tracebacks


def test_unreachable_endpoint_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    model = ApiModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, max_retries=0, timeout=5)
    t = time.perf_counter()
    with pytest.raises(ModelError, match="cannot reach"):
        chat(model)
    assert time.perf_counter() - t < 10


def test_missing_key_is_refused_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        load_model("openai:gpt-4.1-mini")
    # A local endpoint needs no key.
    assert isinstance(load_model("local-model", base_url="http://127.0.0.1:9/v1"), ApiModel)


def test_litellm_name_reaches_the_same_endpoint(fake: FakeOpenAI) -> None:
    model = load_model("litellm:openai/gpt-fake", base_url=fake.url, api_key=SECRET)
    (c,) = chat(model)
    assert c.text == "answer 0"
    assert fake.requests[-1]["model"] == "gpt-fake"
    assert fake.auth[-1] == f"Bearer {SECRET}"

"""Secrets the user gives (--env, --header, URL credentials, API keys in our environment) reach no
model, no file and no message: issue 19, item 2.

Real servers: server-everything's `get-env` (npm; skipped without node) returns its whole
environment, as in the issue; the faulty example server's `echo` returns what it is sent; the
inventory server over HTTP takes a URL with credentials in it. The planted secrets of a whole
training run are checked in tests/test_security.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import FAULTY, REPO
from mcp_rl.errors import ConfigError
from mcp_rl.rollout import RolloutConfig, SessionPool, run_group
from mcp_rl.servers import CallStatus, ServerSpec, ToolPolicy
from mcp_rl.trajectory import save_trajectories
from tests.rollout_fakes import FakeScriptedModel

pytestmark = pytest.mark.timeout(300)

SECRET = "sk-live-9f2c7a1e44b0d3"
TOKEN = "url-token-5be01c9d7a"
PASSWORD = "url-pass-c41d9e07"


def mcp_rl(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip


def _everything() -> str | None:
    """server-everything as a command line: installed, or through npx (which fetches it once)."""
    if exe := shutil.which("mcp-server-everything"):
        return f"{exe} stdio"
    local = Path("/work/srv/node_modules/.bin/mcp-server-everything")  # this machine's offline copy
    if local.exists() and shutil.which("node"):
        return f"{local} stdio"
    if shutil.which("npx"):
        return "npx -y @modelcontextprotocol/server-everything stdio"
    return None


def _episode(spec: ServerSpec, tool: str, arguments: dict) -> tuple:
    """One episode of a scripted model that calls `tool`, then answers with what it was shown."""
    seen: list[str] = []

    def script(prompt: str, turn: int) -> str:
        seen.append(prompt)
        return json.dumps({"name": tool, "arguments": arguments}) if turn == 0 else "Here it is."

    async def go():
        async with SessionPool(spec, ToolPolicy(allow_destructive=True), size=1) as pool:
            return await run_group(
                FakeScriptedModel(script), pool, "Show me.", n=1, config=RolloutConfig(max_turns=2)
            )

    (t,) = anyio.run(go)
    return t, seen


def _nowhere(
    secret: str, t, seen: list[str], tmp_path: Path, spec: ServerSpec, *, typed: bool = False
) -> None:
    """The secret is in no tool result the model was shown (the prompts it got, the trajectory's tool
    messages), nowhere in the trajectory unless the model `typed` it itself, and in no saved file."""
    shown = [r for p in seen for r in re.findall(r"<tool_response>(.*?)</tool_response>", p, re.S)]
    shown += [str(m.get("content")) for m in t.messages if m.get("role") == "tool"]
    assert shown and all(secret not in r for r in shown), "the model was shown the secret"
    assert typed or secret not in t.model_dump_json(), "the trajectory holds the secret"
    for name in ("t.jsonl", "t.parquet"):
        path = save_trajectories([t], tmp_path / name, redact=spec.redact)
        assert secret.encode() not in path.read_bytes(), f"{name} holds the secret"


@pytest.mark.skipif(_everything() is None, reason="needs node (server-everything) or npx")
def test_a_secret_that_a_tool_returns_reaches_neither_the_model_nor_the_trajectory(tmp_path: Path) -> None:
    # The case: get-env returns the server's whole environment, --env SECRET included.
    spec = ServerSpec.parse(str(_everything()), env={"SERVICE_API_KEY": SECRET})
    t, seen = _episode(spec, "get-env", {})
    (call,) = t.tool_calls
    assert call.status == CallStatus.OK and "SERVICE_API_KEY" in call.result_text  # the tool really ran
    assert '"SERVICE_API_KEY": "***"' in call.result_text
    _nowhere(SECRET, t, seen, tmp_path, spec)


def test_an_api_key_in_our_environment_is_redacted_from_what_a_tool_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key we hold (a model endpoint's, the serve token) is never passed to the server, but a
    # server may still come by it (a file it reads): echo stands in for that.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    spec = ServerSpec.parse(FAULTY)
    t, seen = _episode(spec, "echo", {"text": f"the key is {SECRET} and the user is ada"})
    (call,) = t.tool_calls
    assert call.status == CallStatus.OK and call.result_text == "the key is *** and the user is ada"
    # the model wrote the key into its own call here: the writers take it out of that too
    _nowhere(SECRET, t, seen, tmp_path, spec, typed=True)


def test_a_secret_is_redacted_before_the_result_is_cut_to_its_budget() -> None:
    # Cut first, and the head of the secret would survive the cut at the budget's edge.
    spec = ServerSpec.parse(FAULTY, env={"K": SECRET}).with_connection(result_budget=14)

    async def go():
        from mcp_rl.servers import ServerSession

        async with ServerSession(spec) as s:
            return await s.call("echo", {"text": "x" * 12 + SECRET})

    r = anyio.run(go)
    assert r.truncated and r.text.startswith("x" * 12 + "**") and SECRET[:4] not in r.text


def test_credentials_in_a_server_url_are_masked_wherever_it_is_shown_or_saved() -> None:
    url = f"https://ada:{PASSWORD}@mcp.example.com/mcp?api_key={TOKEN}&region=eu&accessToken={TOKEN}x"
    spec = ServerSpec.parse(url)
    masked = "https://***@mcp.example.com/mcp?api_key=***&region=eu&accessToken=***"
    assert spec.url == url  # the real URL, in memory only
    assert spec.describe() == masked and spec.public()["url"] == masked
    assert {PASSWORD, TOKEN, f"{TOKEN}x"} <= set(spec.secret_values())
    assert (
        spec.redact(f"GET {url}")
        == "GET https://ada:***@mcp.example.com/mcp?api_key=***&region=eu&accessToken=***"
    )


def test_a_resumed_run_whose_url_held_credentials_needs_the_url_again() -> None:
    from mcp_rl.cli.train_cmd import _resumed_spec

    saved = ServerSpec.parse(f"http://127.0.0.1:9/mcp?token={TOKEN}").public()
    with pytest.raises(ConfigError, match="were not saved"):
        _resumed_spec(saved, None, {})


def test_inspect_never_prints_the_credentials_of_a_server_url(inventory_http: str) -> None:
    # A live server reached through a URL that carries a password and a token: its table, and the
    # error for the same URL on a port where nothing listens.
    url = inventory_http.replace("http://", f"http://ada:{PASSWORD}@") + f"?token={TOKEN}"
    r = mcp_rl("inspect", "--server", url)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "list_categories" in r.stdout and "***@127.0.0.1" in " ".join(r.stdout.split())
    dead = mcp_rl("inspect", "--server", f"http://ada:{PASSWORD}@127.0.0.1:9/mcp?api_key={TOKEN}")
    assert dead.returncode == 2 and "cannot reach server" in dead.stderr
    for out in (r.stdout, r.stderr, dead.stdout, dead.stderr):
        assert PASSWORD not in out and TOKEN not in out


@pytest.mark.parametrize(
    "args",
    [
        ["--server", FAULTY, "--env", SECRET],  # the key typed where KEY=VALUE belongs
        ["--server", FAULTY, "--env", f"{SECRET}=="],  # a base64 secret's padding is no KEY=
        ["--server", "http://127.0.0.1:9/mcp", "--header", f"Bearer {SECRET}"],
    ],
    ids=["env-no-equals", "env-bad-name", "header-no-name"],
)
def test_a_malformed_secret_is_refused_without_echoing_it(args: list[str]) -> None:
    r = mcp_rl("inspect", *args)
    assert r.returncode == 2 and "is not KEY=VALUE" in r.stderr and "Traceback" not in r.stderr
    assert SECRET not in r.stdout + r.stderr


def test_curls_header_form_is_accepted(inventory_http: str) -> None:
    # `--header "Authorization: Bearer x"` is what MCP users copy from curl.
    r = mcp_rl("inspect", "--server", inventory_http, "--header", f"Authorization: Bearer {SECRET}", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert any(t["function"]["name"] == "get_item" for t in json.loads(r.stdout))
    from mcp_rl.cli.options import ServerOptions

    spec = ServerOptions(server=inventory_http, header=[f"Authorization: Bearer {SECRET}", "X-Id=a:b"]).spec()
    assert spec.headers == {"Authorization": f"Bearer {SECRET}", "X-Id": "a:b"}


def test_an_empty_serve_token_that_is_set_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_rl.serve import TOKEN_ENV, token_from_env

    monkeypatch.setenv(TOKEN_ENV, "  ")
    with pytest.raises(ConfigError, match="set but empty"):
        token_from_env(None)
    monkeypatch.delenv(TOKEN_ENV)
    assert token_from_env(None) == (None, None)  # unset: no token, as before
    # the real command refuses before it loads a model or binds a port
    r = mcp_rl("serve", "--model", "tiny", "--port", "0", env={TOKEN_ENV: ""})
    assert r.returncode == 2 and "set but empty" in r.stderr and "Traceback" not in r.stderr

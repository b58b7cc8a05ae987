"""`mcp-rl inspect` as a user runs it: a real process, real servers, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FAULTY, INVENTORY, REPO


def mcp_rl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_inspect_table_shows_tools_policy_resources_prompts():
    r = mcp_rl("inspect", "--server", INVENTORY)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for word in (
        "get_item",
        "place_order",
        "delete_item",
        "excluded",
        "annotated destructive",
        "Resources",
        "Prompts",
    ):
        assert word in out
    assert "item_id*: string" in out


def test_inspect_json_is_valid_openai_tools():
    r = mcp_rl("inspect", "--server", INVENTORY, "--json")
    assert r.returncode == 0, r.stderr
    tools = json.loads(r.stdout)
    assert {t["function"]["name"] for t in tools} >= {"get_item", "search_items", "place_order"}
    assert "delete_item" not in {t["function"]["name"] for t in tools}
    for t in tools:
        assert t["type"] == "function"
        params = t["function"]["parameters"]
        assert params["type"] == "object" and isinstance(params["properties"], dict)
        assert "$ref" not in json.dumps(params) and t["function"]["description"]
    r = mcp_rl("inspect", "--server", INVENTORY, "--json", "--allow-destructive", "--deny-tools", "get_*")
    names = {t["function"]["name"] for t in json.loads(r.stdout)}
    assert "delete_item" in names and "get_item" not in names


def test_inspect_config_file(tmp_path):
    cfg = tmp_path / "claude_desktop_config.json"
    cfg.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "shop": {"command": sys.executable, "args": ["-m", "examples.servers.inventory"]}
                }
            }
        )
    )
    r = mcp_rl("inspect", "--config", str(cfg), "--name", "shop", "--json")
    assert r.returncode == 0, r.stderr
    assert any(t["function"]["name"] == "get_item" for t in json.loads(r.stdout))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server", "no-such-program-abc"], "command not found"),
        (["--server", "http://127.0.0.1:9/mcp"], "cannot reach server"),
        (["--server", f"{FAULTY} --exit-at-start"], "refusing to start"),
        ([], "no server given"),
        (["--server", "x", "--config", "y.json"], "either --server or --config"),
        (["--config", "missing.json"], "config file not found"),
        (["--server", "http://127.0.0.1:9/mcp", "--env", "A=1"], "--env only applies"),
        (["--server", "x", "--header", "novalue"], "not KEY=VALUE"),
    ],
)
def test_inspect_bad_input_is_one_clear_message(args, message):
    r = mcp_rl("inspect", *args, timeout=60)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_inspect_shows_each_tools_class_and_why_and_warns_about_an_irreversible_tool_let_through():
    r = mcp_rl("inspect", "--server", f"{sys.executable} -m examples.servers.stats_lab")
    assert r.returncode == 0, r.stderr
    assert "read: named like a computation (convert)" in r.stdout
    assert "write: named like a write (save)" in r.stdout
    assert "read: described by what it returns" in r.stdout  # `city`: a noun, and "Facts about one city"
    r = mcp_rl("inspect", "--server", f"{FAULTY} --more-faults", "--allow-tools", "wipe_*")
    assert r.returncode == 0, r.stderr
    assert "irreversible: annotated destructive" in r.stdout and "used, irreversible" in r.stdout
    assert "'wipe_all' is used though irreversible, because --allow-tools names it" in r.stderr

"""`mcp-rl bench bfcl`: BFCL's multi-turn entries through our agent loop, each entry's backends
served over real stdio MCP, graded by BFCL's own checker (the installed `bfcl-eval` package)."""

from __future__ import annotations

import json
import sys
from importlib.util import find_spec

import anyio
import pytest
from test_scenario_cli import mcp_rl

from conftest import PY
from mcp_rl.errors import ConfigError
from mcp_rl.servers import ServerSession, ServerSpec, ToolPolicy

needs_bfcl = pytest.mark.skipif(find_spec("bfcl_eval") is None, reason="bfcl-eval not installed (see README: bench)")


def test_a_missing_bfcl_package_is_one_error_that_names_the_install_command(monkeypatch):
    from mcp_rl.bench.bfcl_data import INSTALL, require_bfcl

    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # what an absent package looks like to import
    with pytest.raises(ConfigError) as e:
        require_bfcl()
    assert "not installed" in e.value.message and INSTALL in (e.value.hint or "")
    assert "--no-deps" in INSTALL and "bfcl-eval==" in INSTALL


@needs_bfcl
def test_an_unknown_category_is_one_error_naming_the_categories():
    r = mcp_rl("bench", "bfcl", "--category", "multi_turn_nonsense", timeout=120)
    assert r.returncode == 2 and "unknown BFCL category" in r.stderr and "multi_turn_base" in r.stderr
    assert "Traceback" not in r.stderr


@needs_bfcl
def test_an_unknown_backend_is_one_error_naming_the_backends():
    r = mcp_rl("bench", "bfcl", "--backend", "GorillaFileSystm", timeout=120)
    assert r.returncode == 2 and "unknown BFCL backend" in r.stderr and "GorillaFileSystem" in r.stderr
    assert "Traceback" not in r.stderr
    r = mcp_rl("bench", "server", "bfcl:NoSuchAPI", timeout=120)
    assert r.returncode == 2 and "unknown BFCL backend" in r.stderr


@needs_bfcl
def test_entries_carry_their_turns_state_and_ground_truth_in_bfcl_order():
    from mcp_rl.bench.bfcl_data import load_entries

    entries = load_entries("multi_turn_base")
    assert len(entries) == 200 and entries[0].id == "multi_turn_base_0"
    assert all(len(e.turns) == len(e.ground_truth) for e in entries)
    fs = load_entries("multi_turn_base", backend="GorillaFileSystem", limit=5)
    assert len(fs) == 5 and all("GorillaFileSystem" in e.involved_classes for e in fs)


@needs_bfcl
def test_bfcl_call_strings_become_tool_calls_and_back():
    from mcp_rl.bench.bfcl_server import positional_names
    from mcp_rl.bench.calls import call_string, parse_call

    name, args = parse_call("sort('final_report.pdf')", lambda m: positional_names("GorillaFileSystem", m))
    assert (name, args) == ("sort", {"file_name": "final_report.pdf"})
    name, args = parse_call("tail(file_name='log.txt',lines=20)", lambda m: [])
    assert call_string(name, args) == "tail(file_name='log.txt', lines=20)"
    with pytest.raises(ConfigError):
        parse_call("os.system('ls')", lambda m: [])


async def _server_roundtrip(command: str) -> tuple[list[str], str, str, str]:
    from mcp_rl.bench.runner import server_env

    spec = ServerSpec.parse(command, env=server_env())
    async with ServerSession(spec, ToolPolicy(allow=["*"], allow_destructive=True, resettable=True)) as s:
        names = [t.name for t in s.tools]
        made = await s.call("mkdir", {"dir_name": "bench_new"})
        moved = await s.call("cd", {"folder": "bench_new"})
        listed = await s.call("ls", {})
        return names, made.text, moved.text, listed.text


@needs_bfcl
def test_a_backend_serves_over_real_stdio_and_keeps_its_state_between_calls():
    # multi_turn_base_0 starts the file system at workspace/ with document/ and archive/ in it.
    names, _made, moved, listed = anyio.run(
        _server_roundtrip, f"{PY} -m mcp_rl.bench.bfcl_server bfcl:GorillaFileSystem --entry multi_turn_base_0"
    )
    assert {"cd", "mkdir", "ls", "mv", "grep"} <= set(names)
    assert "bench_new" in moved  # cd found the directory mkdir made in the previous call
    assert json.loads(listed) == {"current_directory_content": []}


@needs_bfcl
def test_a_backend_server_leaves_out_the_entrys_excluded_functions():
    from mcp_rl.bench.bfcl_data import load_entries

    entry = next(e for e in load_entries("multi_turn_base") if e.excluded_function == ["cp"])

    async def names() -> list[str]:
        from mcp_rl.bench.runner import server_env

        command = f"{PY} -m mcp_rl.bench.bfcl_server bfcl:{'+'.join(entry.involved_classes)} --entry {entry.id}"
        spec = ServerSpec.parse(command, env=server_env())
        async with ServerSession(spec, ToolPolicy(allow=["*"], allow_destructive=True, resettable=True)) as s:
            return [t.name for t in s.tools]

    got = anyio.run(names)
    assert "cp" not in got and "mv" in got


@needs_bfcl
def test_an_episode_that_makes_no_calls_fails_bfcls_checker():
    from mcp_rl.bench.bfcl_data import load_entries
    from mcp_rl.bench.grade import TurnRecord, bfcl_verdict, strict_verdict

    entry = load_entries("multi_turn_base", limit=1)[0]
    turns = [TurnRecord(text=t, answer="I did it.") for t in entry.turns]
    verdict = bfcl_verdict(entry, turns)
    assert not verdict.valid and verdict.error_type == "multi_turn:empty_turn_model_response"
    strict, why = strict_verdict(entry, turns)
    assert strict is False and "expected tool" in why


@needs_bfcl
def test_the_oracle_scores_at_least_95_percent_on_the_first_10_multi_turn_base_entries(tmp_path):
    import polars as pl

    r = mcp_rl("bench", "bfcl", "--model", "oracle", "--limit", "10", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    base = summary["accuracy"]["category"]["multi_turn_base"]
    assert base["success_n"] == 10 and base["passed"] >= 10 * 0.95
    assert "multi_turn_base" in r.stdout and "agreement with our strict checks" in r.stdout
    df = pl.read_parquet(tmp_path / "results.parquet")
    assert df.height == 10 and set(df.columns) >= {"bfcl_valid", "strict", "agree", "episode", "calls"}
    episode = json.loads(df["episode"][0])
    assert episode["tool_calls"] and episode["messages"][1]["role"] == "user"

"""The server layer against real servers on real transports, including every way one can fail."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from conftest import FAULTY, INVENTORY, PY, have
from mcp_rl.errors import ServerStartError, ServerTimeout
from mcp_rl.servers import CallStatus, ServerSession, ServerSpec, ToolPolicy


def run(fn, *args):
    return anyio.run(fn, *args)


def test_inventory_stdio_tools_policy_and_calls():
    async def go():
        async with ServerSession(ServerSpec.parse(INVENTORY)) as s:
            names = {t.name for t in s.tools}
            assert {"get_item", "search_items", "filter_items", "place_order"} <= names
            assert "delete_item" not in names and "annotated destructive" in s.excluded["delete_item"]
            assert s.server_name and s.protocol_version
            ok = await s.call("get_item", {"item_id": "ITM-001"})
            assert ok.status is CallStatus.OK and "ITM-001" in ok.text
            missing = await s.call("get_item", {"item_id": "ITM-999"})
            assert missing.status is CallStatus.TOOL_ERROR
            bad = await s.call("get_item", {"item_id": 7})
            assert bad.status is CallStatus.INVALID and "item_id" in bad.text
            unknown = await s.call("fly_to_moon", {})
            assert unknown.status is CallStatus.INVALID and "available tools" in unknown.text
            denied = await s.call("delete_item", {"item_id": "ITM-001"})
            assert denied.status is CallStatus.INVALID and "not available" in denied.text
            # nested $ref schema reached the model flattened
            order = next(t for t in s.tools if t.name == "place_order")
            assert "$ref" not in json.dumps(order.parameters)
            assert await s.list_resources() and await s.list_prompts()

    run(go)


def test_state_is_reset_between_episodes():
    async def go():
        async with ServerSession(ServerSpec.parse(INVENTORY)) as s:
            before = await s.call("get_item", {"item_id": "ITM-001"})
            stock0 = json.loads(before.text)["stock"]
            r = await s.call("update_stock", {"item_id": "ITM-001", "delta": 5})
            assert r.ok, r.text
            after = json.loads((await s.call("get_item", {"item_id": "ITM-001"})).text)["stock"]
            assert after == stock0 + 5
            await s.reset()  # stdio: a fresh process
            again = json.loads((await s.call("get_item", {"item_id": "ITM-001"})).text)["stock"]
            assert again == stock0 and s.restarts == 1

    run(go)


def test_inventory_streamable_http(inventory_http):
    async def go():
        async with ServerSession(ServerSpec.parse(inventory_http)) as s:
            assert s.spec.transport == "http"
            r = await s.call("list_categories", {})
            assert r.ok and "tents" in r.text

    run(go)


def test_faulty_server_every_failure():
    async def go():
        policy = ToolPolicy(allow_destructive=True)
        async with ServerSession(
            ServerSpec.parse(FAULTY).with_connection(call_timeout=2, result_budget=500), policy
        ) as s:
            t0 = time.monotonic()
            hang = await s.call("sleep", {"seconds": 30})
            assert hang.status is CallStatus.TIMEOUT and time.monotonic() - t0 < 15
            echo = await s.call("echo", {"text": "still alive"})  # the session survived the timeout
            assert echo.ok and "still alive" in echo.text
            assert (await s.call("fail", {})).status is CallStatus.TOOL_ERROR
            assert (await s.call("error_text", {})).status is CallStatus.TOOL_ERROR
            big = await s.call("big_output", {"n_chars": 100_000})
            assert big.ok and big.truncated and len(big.text) < 700 and "truncated" in big.text
            img = await s.call("image", {})
            assert img.ok and "[image: image/png" in img.text
            res = await s.call("resource_block", {})
            assert res.ok and "[resource" in res.text
            crash = await s.call("crash", {})
            assert crash.status is CallStatus.CRASH and "crash() was called" in crash.text
            after = await s.call("echo", {"text": "x"})
            assert after.status is CallStatus.CRASH  # no silent restart mid-episode
            await s.reset()  # the next episode gets a fresh process
            assert (await s.call("echo", {"text": "back"})).ok

    run(go)


def test_faulty_http_server_that_dies(faulty_http):
    proc, url = faulty_http

    async def go():
        with anyio.fail_after(60):
            async with ServerSession(
                ServerSpec.parse(url).with_connection(call_timeout=3), ToolPolicy(allow_destructive=True)
            ) as s:
                assert (await s.call("echo", {"text": "hi"})).ok
                assert (await s.call("crash", {})).status is CallStatus.CRASH  # dies mid-call
                assert not s.alive
                assert (await s.call("echo", {"text": "hi"})).status is CallStatus.CRASH
                with pytest.raises(ServerStartError, match="cannot reach"):
                    await s.reset()  # nothing to reconnect to: a clear error, not a hang

    run(go)
    assert proc.poll() is not None


@pytest.mark.parametrize(
    ("server", "error", "words"),
    [
        ("definitely-not-a-command-xyz --flag", ServerStartError, "command not found"),
        (f"{FAULTY} --exit-at-start", ServerStartError, "refusing to start"),
        (f"{PY} -c 'print(1)'", ServerStartError, "handshake"),
        ("http://127.0.0.1:9/mcp", ServerStartError, "cannot reach"),
        ("http://127.0.0.1:9/sse", ServerStartError, "cannot reach"),
    ],
)
def test_bad_servers_give_clear_errors(server, error, words):
    async def go():
        async with ServerSession(ServerSpec.parse(server).with_connection(connect_timeout=20)):
            pass

    with pytest.raises(error) as info:
        run(go)
    assert words in str(info.value)


def test_server_that_never_answers_times_out():
    async def go():
        async with ServerSession(
            ServerSpec.parse(f"{PY} -c 'import time; time.sleep(60)'").with_connection(connect_timeout=2)
        ):
            pass

    t0 = time.monotonic()
    with pytest.raises(ServerTimeout, match="did not finish connecting"):
        run(go)
    assert time.monotonic() - t0 < 20


def test_crash_after_n_calls_then_recover():
    async def go():
        async with ServerSession(ServerSpec.parse(f"{FAULTY} --crash-after 2")) as s:
            assert (await s.call("echo", {"text": "1"})).ok
            assert (await s.call("echo", {"text": "2"})).status is CallStatus.CRASH
            await s.reset()
            assert (await s.call("echo", {"text": "3"})).ok

    run(go)


@pytest.mark.skipif(not have("uvx"), reason="needs uv (installed by the dev extra)")
def test_third_party_mcp_server_time():
    async def go():
        async with ServerSession(
            ServerSpec.parse("uvx mcp-server-time").with_connection(connect_timeout=120)
        ) as s:
            assert sorted(t.name for t in s.tools) == ["convert_time", "get_current_time"]
            r = await s.call("get_current_time", {"timezone": "Asia/Tokyo"})
            assert r.ok and "+09:00" in r.text
            bad = await s.call("get_current_time", {"timezone": "Mars/Olympus"})
            assert bad.status is CallStatus.TOOL_ERROR

    run(go)


@pytest.mark.skipif(not have("uvx"), reason="needs uv (installed by the dev extra)")
def test_third_party_mcp_server_sqlite_in_its_own_env(tmp_path):
    # mcp-server-sqlite declares an unpinned mcp>=1.x and breaks under 2.x: its own env pins mcp<2.
    db = tmp_path / "shop.db"
    cmd = f"uvx --with 'mcp<2' mcp-server-sqlite --db-path {db}"

    async def go():
        async with ServerSession(
                        ServerSpec.parse(cmd).with_connection(connect_timeout=180),
            # write_query executes SQL: irreversible, so it must be named, not just allowed
            ToolPolicy(allow=["write_query", "read_query", "*_table", "list_tables"], allow_destructive=True),
        ) as s:
            names = {t.name for t in s.all_tools}
            assert {"read_query", "write_query", "create_table", "list_tables"} <= names
            r = await s.call("create_table", {"query": "CREATE TABLE t (id INTEGER, name TEXT)"})
            assert r.ok, r.text
            r = await s.call("write_query", {"query": "INSERT INTO t VALUES (1, 'tent')"})
            assert r.ok, r.text
            r = await s.call("read_query", {"query": "SELECT name FROM t"})
            assert r.ok and "tent" in r.text
            bad = await s.call("read_query", {"query": "SELECT * FROM nope"})
            assert bad.status is CallStatus.TOOL_ERROR  # reported as normal text "Error: ..."

    run(go)


@pytest.mark.npm
@pytest.mark.skipif(not have("npx"), reason="needs node/npx")
def test_third_party_npm_server_memory(tmp_path):
    spec = ServerSpec.parse(
        "npx -y @modelcontextprotocol/server-memory", env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    )

    async def go():
        async with ServerSession(spec.with_connection(connect_timeout=240)) as s:
            assert "create_entities" in {t.name for t in s.all_tools}
            assert "read_graph" in {t.name for t in s.tools}

    run(go)

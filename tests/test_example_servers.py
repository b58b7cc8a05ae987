"""The example MCP servers, run as real processes over stdio and streamable HTTP on 127.0.0.1."""

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from examples.servers.faulty import CRASH_EXIT_CODE
from examples.servers.inventory import build_server
from examples.servers.inventory_store import Store, generate

# Async tests run on anyio's pytest plugin (ships with anyio), on asyncio.
pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 20  # seconds for a whole test: a hang fails fast instead of stalling the suite
INVENTORY_TOOLS = {
    "list_categories",
    "get_item",
    "search_items",
    "filter_items",
    "place_order",
    "get_order",
    "update_stock",
    "set_price",
    "delete_item",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _params(module: str, *args: str) -> StdioServerParameters:
    # The child inherits only a few variables by default; PYTHONPATH makes `examples` importable.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    return StdioServerParameters(command=sys.executable, args=["-m", module, *args], env=env, cwd=str(REPO))


@asynccontextmanager
async def stdio_session(module: str, *args: str, errlog: IO[str] | None = None) -> AsyncIterator[Client]:
    with tempfile.TemporaryFile("w+") as scratch:
        transport = stdio_client(_params(module, *args), errlog=errlog or scratch)
        async with Client(transport, read_timeout_seconds=10) as client:
            yield client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(module: str, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start the server on a free loopback port, wait until it accepts connections, stop it after."""
    port = _free_port()
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--transport", "http", "--port", str(port), *args],
        cwd=REPO,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("server did not listen within 15 s") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


# ---- inventory: data and rules, no transport -------------------------------------------------


def test_generate_is_deterministic_from_the_seed():
    assert generate(0) == generate(0)
    assert generate(0) != generate(1)
    shop = generate(0)
    assert 20 <= len(shop.items) <= 40
    assert len({i.id for i in shop.items}) == len(shop.items)
    assert any(i.stock == 0 for i in shop.items), "in_stock_only needs out-of-stock items to mean something"


def test_state_file_survives_a_restart(tmp_path):
    state = tmp_path / "shop.json"
    store = Store(seed=3, state_file=state)
    first = store.items[0]
    store.update_stock(first.id, 5)
    again = Store(seed=99, state_file=state)  # the file wins over the seed
    assert again.item(first.id).stock == first.stock
    assert again.state.seed == 3
    assert Store(seed=3).item(first.id).stock == first.stock - 5  # no file: back to the seed's shop


# ---- inventory over stdio ---------------------------------------------------------------------


async def test_inventory_stdio_tools_annotations_and_calls():
    with anyio.fail_after(TIMEOUT):
        async with stdio_session("examples.servers.inventory", "--seed", "0") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == INVENTORY_TOOLS
            assert all(t.annotations is not None for t in tools.values())
            assert tools["get_item"].annotations.read_only_hint is True
            assert tools["delete_item"].annotations.destructive_hint is True
            assert tools["update_stock"].annotations.read_only_hint is False
            assert tools["update_stock"].annotations.destructive_hint is False
            order_schema = tools["place_order"].input_schema
            assert "$defs" in order_schema and "$ref" in json.dumps(order_schema["properties"])
            assert "anyOf" in json.dumps(tools["search_items"].input_schema)
            assert c.instructions and "ITM-001" in c.instructions

            item = (await c.call_tool("get_item", {"item_id": "ITM-001"})).structured_content
            expected = generate(0).items[0]
            assert item == expected.model_dump()

            missing = await c.call_tool("get_item", {"item_id": "ITM-999"})
            assert missing.is_error and "Unknown item id" in _text(missing)

            bad_category = await c.call_tool("search_items", {"query": "tent", "category": "food"})
            assert not bad_category.is_error and _text(bad_category).startswith("Error: unknown category")

            found = json.loads(_text(await c.call_tool("search_items", {"query": "TENT", "max_results": 2})))
            assert len(found["results"]) == 2
            matching = [i for i in generate(0).items if "tent" in f"{i.name} {i.category}".lower()]
            assert found["total_matches"] == len(matching)

            resources = {str(r.uri) for r in (await c.list_resources()).resources}
            assert "inventory://categories" in resources
            assert [p.name for p in (await c.list_prompts()).prompts] == ["restock_plan"]


async def test_inventory_orders_change_state_and_restart_resets_it():
    shop = generate(0)
    item = next(i for i in shop.items if i.stock >= 2)
    order = {"customer": {"name": "Ada"}, "lines": [{"item_id": item.id, "quantity": 2}], "coupon": "CAMP10"}
    with anyio.fail_after(TIMEOUT):
        async with stdio_session("examples.servers.inventory") as c:
            receipt = await c.call_tool("place_order", {"order": order})
            assert not receipt.is_error, _text(receipt)
            got = receipt.structured_content
            assert got["subtotal"] == round(item.price * 2, 2)
            assert got["discount"] == round(got["subtotal"] * 0.10, 2)
            assert got["total"] == round(got["subtotal"] - got["discount"] + got["shipping_cost"], 2)
            after = (await c.call_tool("get_item", {"item_id": item.id})).structured_content
            assert after["stock"] == item.stock - 2
            too_many = await c.call_tool("update_stock", {"item_id": item.id, "delta": -10_000})
            assert not too_many.is_error and _text(too_many).startswith("Error: cannot remove")
            deleted = await c.call_tool("delete_item", {"item_id": item.id})
            assert not deleted.is_error
            assert (await c.call_tool("get_item", {"item_id": item.id})).is_error
        async with stdio_session("examples.servers.inventory") as c:
            fresh = (await c.call_tool("get_item", {"item_id": item.id})).structured_content
            assert fresh["stock"] == item.stock


# ---- inventory over streamable HTTP -------------------------------------------------------------


async def test_inventory_http_matches_the_seed():
    with http_server("examples.servers.inventory", "--seed", "7") as (url, _):
        with anyio.fail_after(TIMEOUT):
            async with Client(streamable_http_client(url), read_timeout_seconds=10) as c:
                assert {t.name for t in (await c.list_tools()).tools} == INVENTORY_TOOLS
                result = await c.call_tool("filter_items", {"in_stock_only": True, "sort_by": "price"})
                got = result.structured_content["items"]
                want = sorted((i for i in generate(7).items if i.stock > 0), key=lambda i: (i.price, i.id))
                assert [i["id"] for i in got] == [i.id for i in want[:10]]
                swapped = await c.call_tool("filter_items", {"min_price": 50, "max_price": 10})
                assert swapped.is_error


def _outside_address() -> str | None:
    """This machine's address on its default route, if it has one (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere real
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def test_http_listens_on_loopback_only_by_default():
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no non-loopback address to test against")
    with http_server("examples.servers.inventory") as (url, _):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(OSError):
            socket.create_connection((outside, port), timeout=1).close()


# ---- faulty -----------------------------------------------------------------------------------


async def test_faulty_content_kinds_and_failure_modes():
    with anyio.fail_after(TIMEOUT):
        async with stdio_session("examples.servers.faulty") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            loose = tools["loose_schema"].input_schema
            assert loose["properties"]["value"]["type"] == ["string", "number", "null"]
            assert not tools["loose_schema"].description
            assert (await c.call_tool("echo", {"text": "héllo"})).content[0].text == "héllo"
            assert (await c.call_tool("fail", {})).is_error
            error_text = await c.call_tool("error_text", {})
            assert not error_text.is_error and _text(error_text) == "Error: something went wrong"
            assert len(_text(await c.call_tool("big_output", {"n_chars": 123_456}))) == 123_456
            png = (await c.call_tool("image", {})).content[0]
            assert png.type == "image" and base64.b64decode(png.data).startswith(b"\x89PNG")
            blocks = (await c.call_tool("resource_block", {})).content
            assert [b.type for b in blocks] == ["text", "resource"]


async def test_faulty_sleep_times_out_and_session_survives():
    with anyio.fail_after(TIMEOUT):
        async with stdio_session("examples.servers.faulty") as c:
            with pytest.raises(MCPError):
                await c.call_tool("sleep", {"seconds": 30}, read_timeout_seconds=0.5)
            assert _text(await c.call_tool("echo", {"text": "still here"})) == "still here"


async def test_faulty_crash_closes_the_connection_with_reason_on_stderr():
    with tempfile.TemporaryFile("w+") as errlog:
        with anyio.fail_after(TIMEOUT):
            async with stdio_session("examples.servers.faulty", "--crash-after", "2", errlog=errlog) as c:
                assert _text(await c.call_tool("echo", {"text": "one"})) == "one"
                with pytest.raises(MCPError, match="Connection closed"):
                    await c.call_tool("echo", {"text": "two"})
        errlog.seek(0)
        assert "--crash-after 2" in errlog.read()


def test_faulty_exit_at_start_says_why():
    done = subprocess.run(
        [sys.executable, "-m", "examples.servers.faulty", "--exit-at-start"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "refusing to start" in done.stderr and done.stdout == ""


async def test_faulty_over_http_crash_kills_the_process_mid_call():
    with http_server("examples.servers.faulty") as (url, proc):
        with anyio.fail_after(TIMEOUT):
            # Over HTTP the SDK client cancels the pending call and raises an ExceptionGroup
            # (httpx RemoteProtocolError) when the session is left: not an MCPError as on stdio.
            with pytest.raises(Exception):  # noqa: B017
                async with Client(streamable_http_client(url), read_timeout_seconds=5) as c:
                    assert _text(await c.call_tool("echo", {"text": "x"})) == "x"
                    await c.call_tool("crash", {})
        assert proc.wait(timeout=5) == CRASH_EXIT_CODE


async def test_inventory_in_process_matches_subprocess_listing():
    # The in-process server (used by fast tests elsewhere) must publish what the process does.
    with anyio.fail_after(TIMEOUT):
        async with Client(build_server(Store(0)), read_timeout_seconds=10) as local:
            names = {t.name for t in (await local.list_tools()).tools}
    assert names == INVENTORY_TOOLS

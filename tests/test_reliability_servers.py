"""Servers that fail in the real world, seen through the agent loop: every episode must end with a
recorded outcome and the episodes after it must still run.

Real server processes (the faulty example server) on real transports; the policy is the scripted
fake model of tests/rollout_fakes.py (it stands for a model that makes exactly these calls).
Already covered elsewhere, not repeated here: a crash with and without a restart budget
(test_rollout_loop.py), every failure kind on one session and the HTTP server that exits
(test_servers_live.py).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from conftest import FAULTY, start_http, stop
from mcp_rl.rollout import RolloutConfig, SessionPool, run_group, verify_trace
from mcp_rl.servers import CallStatus, ServerSpec
from mcp_rl.trajectory import Trajectory
from tests.rollout_fakes import FakeScriptedModel

pytestmark = pytest.mark.timeout(180)

MORE = f"{FAULTY} --more-faults"
ENDS = {"answer", "max_turns", "context", "server_error"}


def call(name: str, **args: object) -> str:
    return json.dumps({"name": name, "arguments": args})


def calls(*pairs: tuple[str, dict]) -> str:
    return "\n".join(json.dumps({"name": n, "arguments": a}) for n, a in pairs)


def child_pids(marker: str) -> list[int]:
    """Processes started by this test process whose command line contains `marker`."""
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and marker in cmd:
            out.append(int(d.name))
    return out


def episodes(
    server: str,
    model: FakeScriptedModel,
    n: int,
    *,
    between: Callable[[int], None] | None = None,
    call_timeout: float = 30.0,
    connect_timeout: float = 60.0,
    **cfg: object,
) -> list[Trajectory]:
    """`n` episodes of one task, one after another on one pooled session (reset between them)."""

    async def go() -> list[Trajectory]:
        out: list[Trajectory] = []
        spec = ServerSpec.parse(server)
        spec = spec.with_connection(call_timeout=call_timeout, connect_timeout=connect_timeout)
        async with SessionPool(spec, size=1) as pool:
            for k in range(n):
                if between:
                    between(k)
                out += await run_group(model, pool, "Task for the test.", n=1, config=RolloutConfig(**cfg))
        return out

    return anyio.run(go)


def assert_recorded(trajs: list[Trajectory], n: int) -> None:
    assert len(trajs) == n, "every episode produced a trajectory"
    for t in trajs:
        assert t.end in ENDS, t.end
        assert t.timings.get("total_s") is not None


def test_stdio_server_killed_mid_episode_then_the_next_episode_runs() -> None:
    killed: list[int] = []

    def reply(prompt: str, turn: int) -> str:
        if turn == 0:
            return call("sleep", seconds=20)
        return "done"

    async def killer() -> None:
        # Kill the server while the sleep call is in flight (SIGKILL: no goodbye on the pipe).
        with anyio.fail_after(30):
            while not (model.prompts and child_pids("examples.servers.faulty")):
                await anyio.sleep(0.1)
        await anyio.sleep(1.0)
        for pid in child_pids("examples.servers.faulty"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    model = FakeScriptedModel(reply)

    async def go() -> list[Trajectory]:
        async with SessionPool(ServerSpec.parse(MORE).with_connection(call_timeout=30), size=1) as pool:
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                first = await run_group(model, pool, "t", n=1, config=RolloutConfig(max_restarts=1))
            after = FakeScriptedModel([call("echo", text="back"), "done"])
            second = await run_group(after, pool, "t", n=1, config=RolloutConfig())
            return first + second

    t0 = time.monotonic()
    trajs = anyio.run(go)
    assert killed, "the server process was found and killed"
    assert time.monotonic() - t0 < 20, "a killed server is noticed at once, not after the 30 s call timeout"
    assert_recorded(trajs, 2)
    first, second = trajs
    (rec,) = first.tool_calls
    assert rec.status is CallStatus.CRASH and "server crashed" in rec.result_text
    assert first.metadata["restarts"] == 1 and first.end == "answer"
    assert second.end == "answer" and second.tool_calls[0].status is CallStatus.OK


def test_server_that_dies_at_every_second_start(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    model = FakeScriptedModel([call("echo", text="hi"), "done"])
    trajs = episodes(f"{MORE} --flaky-start {counter}", model, 5)
    assert_recorded(trajs, 5)
    ends = [t.end for t in trajs]
    # start 1 serves episode 1; every reset restarts the process and every second start fails
    assert ends.count("server_error") >= 1 and ends.count("answer") >= 2, ends
    for t in trajs:
        if t.end == "server_error":
            assert "failing this start" in t.metadata["error"] or "handshake" in t.metadata["error"]
        else:
            assert t.tool_calls[0].status is CallStatus.OK
    assert int(counter.read_text()) >= 5


def test_tool_that_hangs_past_its_timeout_ends_in_a_recorded_timeout() -> None:
    model = FakeScriptedModel([call("sleep", seconds=60), call("echo", text="after"), "done"])
    t0 = time.monotonic()
    (t,) = episodes(MORE, model, 1, call_timeout=2)
    assert time.monotonic() - t0 < 30
    assert [r.status for r in t.tool_calls] == [CallStatus.TIMEOUT, CallStatus.OK]
    assert "timed out" in t.tool_calls[0].result_text and t.end == "answer"


@pytest.mark.parametrize("how", ["sigstop", "blocked_handler"])
def test_http_server_that_stops_answering(how: str) -> None:
    proc, url = start_http("examples.servers.faulty", "--more-faults")
    try:

        def reply(prompt: str, turn: int) -> str:
            if turn == 0:
                if how == "sigstop":
                    os.kill(proc.pid, signal.SIGSTOP)
                    return call("echo", text="anyone there?")
                return call("freeze", seconds=12)
            if turn == 1:
                return call("echo", text="still frozen?")
            return "gave up"

        model = FakeScriptedModel(reply)
        t0 = time.monotonic()
        trajs = episodes(url, model, 2, call_timeout=2, connect_timeout=5, max_turns=3)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        stop(proc)
    assert_recorded(trajs, 2)
    assert took < 90, f"bounded by the timeouts, took {took:.0f} s"
    statuses = [r.status for t in trajs for r in t.tool_calls]
    assert CallStatus.TIMEOUT in statuses
    assert all(s in (CallStatus.TIMEOUT, CallStatus.OK, CallStatus.CRASH) for s in statuses), statuses
    for t in trajs:
        assert t.end in ("answer", "server_error")


def test_huge_image_and_not_utf8_results_reach_the_model_cut_and_readable() -> None:
    model = FakeScriptedModel(
        [calls(("big_output", {"n_chars": 5_000_000}), ("image", {}), ("invalid_utf8", {})), "done"]
    )
    (t,) = episodes(MORE, model, 1, max_context_tokens=8192)
    big, img, bad = t.tool_calls
    assert [r.status for r in t.tool_calls] == [CallStatus.OK] * 3
    assert len(big.result_text) < 5000 and "truncated: showing 4000 of 5000000" in big.result_text
    assert img.result_text.startswith("[image: image/png")
    assert "caf\ufffd" in bad.result_text  # undecodable bytes replaced, not fatal
    assert t.end == "answer"
    assert verify_trace(model, t.messages, t.metadata["tools"], t.token_ids, t.sampled_mask) == []


def test_tool_list_that_changes_between_episodes(tmp_path: Path) -> None:
    tool_set = tmp_path / "tools"
    tool_set.write_text("v1")

    def flip(k: int) -> None:
        tool_set.write_text("v2" if k == 1 else "v1")

    model = FakeScriptedModel([call("echo", text="x"), "done"])
    trajs = episodes(f"{MORE} --tool-set-file {tool_set}", model, 3, between=flip)
    assert_recorded(trajs, 3)
    names = [{tool["function"]["name"] for tool in t.metadata["tools"]} for t in trajs]
    assert "echo" in names[0] and "echo_v2" in names[1] and "echo" not in names[1] and "echo" in names[2]
    first, renamed, back = (t.tool_calls[0] for t in trajs)
    assert first.status is CallStatus.OK and back.status is CallStatus.OK
    assert renamed.status is CallStatus.INVALID and "echo_v2" in renamed.result_text  # told what exists


def test_tool_removed_while_the_server_runs() -> None:
    proc, url = start_http("examples.servers.faulty", "--more-faults")
    try:
        model = FakeScriptedModel([call("reshape_tools"), call("echo", text="x"), "done"])
        trajs = episodes(url, model, 2, max_turns=3)
    finally:
        stop(proc)
    assert_recorded(trajs, 2)
    statuses = [[r.status for r in t.tool_calls] for t in trajs]
    # the removed tool fails as a tool error in this episode and the next; nothing hangs or raises
    assert statuses[0] == [CallStatus.OK, CallStatus.TOOL_ERROR]
    assert statuses[1][1] in (CallStatus.TOOL_ERROR, CallStatus.PROTOCOL_ERROR)

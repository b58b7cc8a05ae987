"""A judge that misbehaves for a whole step: bad JSON, too few scores, an exception, nothing.
The step must complete with check-based rewards and the unscored groups counted.

Two fakes, named as such, both standing for a misbehaving LLM: `FakeScriptedJudge` (tests/judge_fakes.py,
the ChatModel protocol) for a step scored in process, and `FakeBrokenJudgeEndpoint` below, an
OpenAI-compatible HTTP endpoint on 127.0.0.1 that a real `mcp-rl train` process talks to through
the real API backend. Group-level cases (repair retries, one bad order of several, a slow judge)
are in tests/test_judges_ruler.py and are not repeated here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

from conftest import REPO
from judges import JudgeConfig, RewardConfig, Ruler, judge_trajectories
from mcp_rl.evaluate import decide_all
from mcp_rl.servers import CallStatus
from mcp_rl.task import Task
from mcp_rl.trajectory import ToolCallRecord, Trajectory
from scenario_gen.io import save_tasks
from tests.judge_fakes import FakeScriptedJudge

pytestmark = pytest.mark.timeout(300)

TASKS = {
    "g": Task(id="g", text="How many categories?", source="grounded", reference_answer="6", split="train"),
    "w": Task(id="w", text="Describe item ITM-001.", split="train"),
}


def step_of_trajectories() -> list[Trajectory]:
    """Two groups of three, as one training step makes: answers right, wrong and missing."""
    out = []
    for tid in TASKS:
        for k, answer in enumerate(["There are 6 categories.", "There are 4.", None]):
            call = ToolCallRecord(
                turn=1, name="list_categories", arguments={}, raw="", valid=True, status=CallStatus.OK,
                result_text='["tents", "sleeping bags", "backpacks", "stoves", "lights", "clothing"]',
            )  # fmt: skip
            messages = [{"role": "user", "content": TASKS[tid].text}]
            if answer:
                messages.append({"role": "assistant", "content": answer})
            out.append(
                Trajectory(
                    id=f"{tid}-{k}",
                    task_id=tid,
                    group_id=f"grp-{tid}",
                    task_text=TASKS[tid].text,
                    messages=messages,
                    tool_calls=[call],
                    final_answer=answer,
                    end="answer" if answer else "max_turns",
                    turns=1,
                )
            )
    return out


BROKEN = {
    "bad_json": ["{scores: [t1: 0.5,"],
    "too_few_scores": [json.dumps({"scores": [{"id": "t1", "score": 0.9, "explanation": "ok"}]})],
    "exception": [RuntimeError("the judge backend fell over")],
    "nothing": [None],
    "empty_text": [""],
}


@pytest.mark.parametrize("mode", list(BROKEN))
def test_a_whole_step_with_a_broken_judge_completes_on_checks(mode: str) -> None:
    trajs = step_of_trajectories()
    judge = FakeScriptedJudge(BROKEN[mode])

    async def go():
        ruler = Ruler(judge, JudgeConfig(max_retries=1, timeout_s=10))  # inside the loop (a semaphore)
        with anyio.fail_after(60):
            report = await judge_trajectories(trajs, TASKS, ruler, RewardConfig())
        await decide_all(trajs, TASKS, judge, None)
        return report

    report = anyio.run(go)
    assert report.unscored == 2 and len(report.groups) == 2, "both groups counted as unscored"
    assert all("unscored after 2 judge attempts" in r for r in report.unscored_reasons.values())
    assert len(judge.calls) >= 4, "each group was asked, then asked again (repair)"
    for t in trajs:
        assert t.reward is not None, "every trajectory still has a reward, from the checks"
        assert t.metadata["judge_unscored"]
    # the checks still tell a right answer from a wrong one and from none
    g = {t.id: t.reward for t in trajs if t.task_id == "g"}
    assert g["g-0"] > g["g-1"] >= g["g-2"]
    # success: the reference decides the grounded task; for the other, an episode that passes the
    # answer gates is left unknown by the broken judge, and one that fails them (an invented "4", no
    # answer) fails without a verdict
    assert [t.metadata["success"] for t in trajs if t.task_id == "g"] == [True, False, False]
    assert [t.metadata["success"] for t in trajs if t.task_id == "w"] == [None, False, False]


# --- a real `mcp-rl train` with a broken API judge ------------------------------------------------


class FakeBrokenJudgeEndpoint(BaseHTTPRequestHandler):
    """A fake OpenAI-compatible chat endpoint that answers every request badly, in turn: bad JSON,
    too few scores, an HTTP 500, and a reply with no choices at all."""

    modes = ("bad_json", "too_few_scores", "http_500", "no_choices")
    seen: ClassVar[list[str]] = []
    auth: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        cls = type(self)
        mode = cls.modes[len(cls.seen) % len(cls.modes)]
        cls.seen.append(mode)
        cls.auth.append(self.headers.get("authorization", ""))
        if mode == "http_500":
            self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
            return
        text = (
            "{scores: [t1: 0.5," if mode == "bad_json" else json.dumps({"scores": [{"id": "t1", "score": 1}]})
        )
        choices = [] if mode == "no_choices" else [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ]  # fmt: skip
        self._send(
            200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": choices}
        )

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def broken_judge() -> Iterator[str]:
    FakeBrokenJudgeEndpoint.seen, FakeBrokenJudgeEndpoint.auth = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeBrokenJudgeEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


KEY = "sk-planted-judge-key-5f2c9a"


@pytest.mark.slow
def test_train_with_a_broken_api_judge_finishes(
    tmp_path: Path, broken_judge: str, inventory_http: str
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    save_tasks(
        [
            Task(
                id="c1", text="How many categories?", source="grounded", reference_answer="6", split="train"
            ),
            Task(id="c2", text="What is the name of item ITM-001?", split="train"),
            Task(
                id="v1",
                text="How many categories are there?",
                source="grounded",
                reference_answer="6",
                split="val",
            ),
            Task(id="x1", text="Count the categories.", source="grounded", reference_answer="6", split="test"),
        ],
        tasks,
    )
    run_dir = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200", "OPENAI_BASE_URL": broken_judge, "OPENAI_API_KEY": KEY}
    r = subprocess.run(
        [sys.executable, "-m", "mcp_rl", "train", "--server", inventory_http, "--model", "tiny",
         "--tasks", str(tasks), "--judge", "openai:fake-broken-judge", "--max-steps", "2", "--eval-every", "2",
         "--max-new-tokens", "12", "--max-turns", "2", "--group-size", "2", "--tasks-per-step", "2",
         "--run-dir", str(run_dir)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if m["kind"] == "step"]
    assert [m["step"] for m in steps] == [1, 2]
    groups = [m["unscored_groups"] for m in steps]
    seen = set(FakeBrokenJudgeEndpoint.seen)
    assert {"bad_json", "too_few_scores", "http_500", "no_choices"} <= seen, seen
    # a group whose every order failed is counted; flat groups may be skipped before the judge
    assert sum(groups) >= 1 and all(g <= 2 for g in groups), groups
    assert all(m["reward_mean"] is not None for m in steps), "check-based rewards despite the judge"
    assert all(a == f"Bearer {KEY}" for a in FakeBrokenJudgeEndpoint.auth)  # the key was really used ...
    for f in run_dir.rglob("*"):  # ... and is in no file of the run, nor in its output
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f"API key leaked into {f}"
    assert KEY not in r.stdout + r.stderr


def test_grounded_groups_can_be_left_to_the_checks() -> None:
    # judge_grounded=False (the trainer's default): only the group without a reference goes to the
    # judge; the grounded one is graded by its reference check, and is not counted as unscored.
    trajs = step_of_trajectories()
    ids = [f"t{i + 1}" for i in range(3)]
    judge = FakeScriptedJudge([json.dumps({"scores": [{"id": i, "score": 0.5} for i in ids]})])

    async def go():
        return await judge_trajectories(
            trajs, TASKS, Ruler(judge, JudgeConfig()), RewardConfig(), judge_grounded=False
        )

    report = anyio.run(go)
    assert len(judge.calls) == 1 and TASKS["w"].text in json.dumps(judge.calls[0])
    assert TASKS["g"].text not in json.dumps(judge.calls[0])
    assert report.checked_only == 1 and report.unscored == 0 and len(report.groups) == 1
    for t in trajs:
        assert ("ruler" in t.reward_components) == (t.task_id == "w")
    g = {t.id: t.reward for t in trajs if t.task_id == "g"}
    assert g["g-0"] > g["g-1"] >= g["g-2"]

"""`mcp-rl dashboard` on a real run of the tiny model: the JSON API, the token, ids that try to leave
the runs folder, half-written files; and the page in a real headless Chromium (runs list, charts, a
group's attempts, compare, a new step appearing while the run writes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM, Browser
from starlette.testclient import TestClient
from test_train_cli import SECRET, _tasks, _train_args

from conftest import PY, REPO, free_port, stop, wait_for_port
from mcp_rl.dashboard import RunsRoot, create_app, mask_secrets


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder holding one real 3-step run of the tiny model on the inventory server."""
    root = tmp_path_factory.mktemp("runs")
    tasks = _tasks(root.parent / "tasks.jsonl")
    env = {**os.environ, "MCP_RL_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        _train_args(root / "tiny", tasks), cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return root


@pytest.fixture
def client(runs: Path) -> TestClient:
    return TestClient(create_app(RunsRoot(runs)))


def test_the_runs_list_shows_server_model_state_steps_and_test_figures(client):
    [run] = client.get("/api/runs").json()
    assert run["id"] == "tiny" and run["model"] == "tiny" and run["server"] == "examples.servers.inventory"
    assert run["state"] == "finished" and run["steps"] == 3
    assert "test_base" in run and "test_best" in run


def test_the_charts_are_svg_drawn_from_the_runs_metrics(client):
    charts = client.get("/api/runs/tiny/charts").json()
    assert {"success", "reward", "trainable", "calls", "judge", "phases"} <= set(charts)
    assert all(svg.startswith("<svg") for svg in charts.values())
    assert charts["reward"].count("<circle") == 3, "one point per training step"
    assert charts["phases"].count("<rect") == 3 * 3, "rollout, judge and train for each of 3 steps"


def test_calls_that_name_no_tool_get_a_labelled_bar():
    from mcp_rl.run_charts import run_charts

    per_tool = {"": {"calls": 4, "invalid": 4}, "get_item": {"calls": 2, "errors": 1}}
    svg = run_charts([{"kind": "step", "step": 1, "per_tool": per_tool}])["tools"]
    assert "(no tool named)" in svg and "get_item" in svg and "></text>" not in svg


def test_a_group_shows_every_attempt_with_rewards_advantages_and_whether_it_trained(client):
    assert client.get("/api/runs/tiny/steps").json() == [1, 2, 3]
    groups = client.get("/api/runs/tiny/steps/1/groups").json()
    assert len(groups) == 2 and all(len(g["rewards"]) == 4 for g in groups)
    g = client.get(f"/api/runs/tiny/steps/1/groups/{groups[0]['group_id']}").json()
    assert len(g["attempts"]) == 4
    a = g["attempts"][0]
    assert {
        "turns",
        "calls",
        "final_answer",
        "reward_components",
        "ruler",
        "judge_explanation",
        "advantage",
    } <= set(a)
    advantages = [x["advantage"] for x in g["attempts"]]
    if g["trained"]:
        assert abs(sum(advantages)) < 1e-6, "advantages are centred on the group mean"
    else:
        assert advantages == [None] * 4 and len(set(g["rewards"])) == 1


def test_base_against_best_is_given_for_val_and_test_tasks_only(client):
    pair = client.get("/api/runs/tiny/tasks/v1/base-vs-best").json()
    assert pair["base"]["task_id"] == "v1" and pair["best"]["task_id"] == "v1"
    assert client.get("/api/runs/tiny/tasks/x1/base-vs-best").json()["base"]["task_id"] == "x1"
    assert client.get("/api/runs/tiny/tasks/c1/base-vs-best").status_code == 404


def test_the_tasks_and_tools_tables_cover_every_task(client):
    tasks = {t["id"]: t for t in client.get("/api/runs/tiny/tasks").json()}
    assert set(tasks) == {"c1", "c2", "v1", "x1"}
    assert tasks["c1"]["grounded"] and not tasks["c2"]["grounded"] and tasks["v1"]["split"] == "val"
    assert tasks["c1"]["attempted_steps"] >= 1 and tasks["c1"]["pass_rate"] is not None
    assert tasks["v1"]["base"] is not None
    assert isinstance(client.get("/api/runs/tiny/tools").json(), list)


def test_no_secret_of_the_run_reaches_any_response(client):
    run = client.get("/api/runs/tiny").json()
    assert run["config"]["server"]["env"] == {"SHOP_API_KEY": "***"}
    assert run["prompt"]["system_prompt"]
    for path in ("/api/runs/tiny", "/api/runs/tiny/steps/1/groups", "/api/runs/tiny/metrics"):
        assert SECRET not in client.get(path).text


def test_masking_covers_env_headers_url_credentials_and_token_keys():
    cfg = {
        "server": {"url": "https://bob:hunter2@example.com/mcp", "env": {"A": "x"}, "headers": {"H": "y"}},
        "api_key": "sk-1",
        "judge": {"access_token": "t"},
        "note": "kept",
    }
    got = json.dumps(mask_secrets(cfg))
    assert "hunter2" not in got and "bob" not in got and '"x"' not in got and '"y"' not in got
    assert "sk-1" not in got and '"t"' not in got and "kept" in got and "example.com/mcp" in got


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/..", "/api/runs/%2e%2e/metrics", "/api/runs/..%2F..%2Fetc/metrics", "/api/runs/.hidden",
        "/api/runs/outside/metrics", "/static/..%2Fruns.py", "/static/runs.py", "/api/events?run=../tiny",
        "/api/runs/tiny/steps/..%2F1/groups", "/api/runs/tiny/steps/1/groups/..%2F..",
    ],
)  # fmt: skip
def test_ids_that_try_to_leave_the_runs_folder_are_refused(runs, path, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(runs / "tiny", outside)
    link = runs / "outside"  # a symlink out of the runs folder, named like a run
    link.symlink_to(outside)
    try:
        r = TestClient(create_app(RunsRoot(runs))).get(path)
        assert r.status_code == 404, r.text
    finally:
        link.unlink()


def test_a_token_is_required_on_every_request_when_set(runs):
    c = TestClient(create_app(RunsRoot(runs), token="s3cret-token"))
    assert c.get("/api/runs").status_code == 401
    assert c.get("/").status_code == 401
    assert c.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert "s3cret-token" not in c.get("/api/runs").text
    assert c.get("/api/runs", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    first = c.get("/?token=s3cret-token")  # the printed URL: sets the cookie the page then carries
    assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
    assert c.get("/api/runs").status_code == 200, "the cookie alone now admits the page's own requests"


def test_an_empty_token_variable_is_refused(runs):
    env = {**os.environ, "EMPTY_TOKEN": " "}
    r = subprocess.run(
        [PY, "-m", "mcp_rl", "dashboard", str(runs), "--token-env", "EMPTY_TOKEN"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "EMPTY_TOKEN" in r.stderr and "not set or empty" in r.stderr


def test_half_written_files_read_as_absent_and_nothing_is_written(runs, tmp_path):
    run = tmp_path / "runs" / "tiny"
    shutil.copytree(runs / "tiny", run)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"kind": "step", "step": 4, "rew')  # a line cut mid-write
    (run / "steps" / "000004.parquet").write_bytes(b"PAR1 cut")
    (run / "best.json").write_text('{"step": ')
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    c = TestClient(create_app(RunsRoot(run.parent)))
    assert [m["step"] for m in c.get("/api/runs/tiny/metrics").json() if m["kind"] == "step"] == [1, 2, 3]
    assert c.get("/api/runs/tiny/charts").status_code == 200
    assert c.get("/api/runs/tiny/steps/4/groups").status_code == 404
    assert c.get("/api/runs").json()[0]["steps"] == 3
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before, "reading changed nothing"


def test_one_run_directory_can_be_given_instead_of_a_folder(runs):
    c = TestClient(create_app(RunsRoot(runs / "tiny")))
    assert [r["id"] for r in c.get("/api/runs").json()] == ["tiny"]
    assert c.get("/api/runs/tiny/steps").json() == [1, 2, 3]


# --- the page in a real browser -------------------------------------------------------------------
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install -y chromium)")


def _cut_to_step(run: Path, last: int) -> list[str]:
    """Make the run look as it did after step `last`; returns the metrics lines held back."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    keep = [x for x in lines if json.loads(x)["step"] <= last and json.loads(x)["kind"] != "test_eval"]
    (run / "metrics.jsonl").write_text("".join(x + "\n" for x in keep))
    for f in (run / "steps").glob("*.parquet"):
        if int(f.stem) > last:
            f.rename(run / f".held-{f.name}")
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({**state, "completed_step": last, "stopped": None}))
    return [x for x in lines if x not in keep]


@pytest.fixture
def dashboard(runs: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`mcp-rl dashboard` as a user starts it, over a copy of the runs folder (two runs: compare)."""
    root = tmp_path / "runs"
    shutil.copytree(runs, root)
    shutil.copytree(root / "tiny", root / "tiny-earlier")
    port = free_port()
    proc = subprocess.Popen(
        [PY, "-m", "mcp_rl", "dashboard", str(root), "--port", str(port)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, proc, timeout=60)
        yield f"http://127.0.0.1:{port}/", root
    finally:
        stop(proc)


@needs_chromium
def test_the_page_shows_runs_charts_groups_and_compare_with_no_console_error(dashboard):
    url, _ = dashboard
    with Browser() as b:
        b.open(url)
        b.wait_for("document.body.dataset.view === 'runs'")
        assert b.eval("[...document.querySelectorAll('td a')].map(a => a.textContent)") == [
            "tiny",
            "tiny-earlier",
        ]
        assert "finished" in b.eval("document.body.innerText")

        b.open(url + "#/run/tiny")
        b.wait_for("document.querySelectorAll('[data-chart] svg').length >= 6")
        assert b.eval("document.querySelector('[data-chart=reward]').querySelectorAll('circle').length") == 3
        assert b.eval("document.querySelector('[data-chart=success] polygon') !== null"), "val interval band"

        b.eval("document.querySelector('[data-group]').click()")
        b.wait_for(
            "document.body.dataset.view === 'run' && document.querySelectorAll('.attempt').length === 4"
        )
        assert "final answer" in b.eval("document.querySelector('.attempt').innerText")

        b.open(url + "#/run/tiny/task/v1")
        b.wait_for("document.querySelectorAll('.attempt').length === 2")

        b.open(url + "#/compare/tiny,tiny-earlier")
        b.wait_for("document.querySelectorAll('[data-chart] svg').length === 3")
        assert "tiny-earlier" in b.eval("document.querySelector('[data-chart=reward]').innerHTML")
        assert b.errors == []


@needs_chromium
def test_a_new_step_appears_on_the_open_page_without_a_reload(dashboard):
    url, root = dashboard
    run = root / "tiny"
    held = _cut_to_step(run, 2)
    with Browser() as b:
        b.open(url + "#/run/tiny")
        b.wait_for("document.querySelector('#steps-done')?.dataset.steps === '2'")
        assert b.eval("document.querySelector('[data-chart=reward]').querySelectorAll('circle').length") == 2
        b.eval("window.notReloaded = true")
        # The run writes step 3 as the trainer does: trajectories, metrics, then the commit.
        (run / ".held-000003.parquet").rename(run / "steps" / "000003.parquet")
        with (run / "metrics.jsonl").open("a") as f:
            f.write("".join(x + "\n" for x in held))
        state = json.loads((run / "state.json").read_text())
        (run / "state.json").write_text(json.dumps({**state, "completed_step": 3}))
        b.wait_for("document.querySelector('#steps-done')?.dataset.steps === '3'", timeout=60)
        assert b.eval("document.querySelector('[data-chart=reward]').querySelectorAll('circle').length") == 3
        assert b.eval("window.notReloaded") is True
        assert b.errors == []


@pytest.mark.slow
def test_train_with_dashboard_prints_a_url_that_serves_the_live_run(tmp_path):
    import httpx

    tasks = _tasks(tmp_path / "tasks.jsonl")
    port = free_port()
    env = {**os.environ, "MCP_RL_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "300"}
    args = [*_train_args(tmp_path / "runs" / "live", tasks), "--dashboard", "--dashboard-port", str(port)]
    proc = subprocess.Popen(
        args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        url = ""
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("dashboard: "):
                url = line.split(" ", 1)[1].strip()
                break
        assert url.startswith(f"http://127.0.0.1:{port}/?token=") and url.endswith("#/run/live")
        deadline = time.monotonic() + 60
        while True:
            try:
                with httpx.Client() as c:
                    assert c.get(url.split("?")[0] + "api/runs").status_code == 401
                    assert c.get(url.split("#")[0]).status_code == 200
                    runs = c.get(url.split("?")[0] + "api/runs").json()  # the cookie carries the token
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the dashboard never listened"
                time.sleep(0.5)
        assert [r["id"] for r in runs] == ["live"]
        rest = proc.stdout.read()  # type: ignore[union-attr]
        assert proc.wait(timeout=600) == 0
        assert f"to read it again: mcp-rl dashboard {tmp_path / 'runs'}" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
    with pytest.raises(httpx.ConnectError):  # it stopped with the run
        httpx.get(url.split("?")[0] + "api/runs")

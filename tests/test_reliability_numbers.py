"""Bad numbers and bad things named as a server, a config or a model: each ends in one `error:`
message and exit code 2, before any model loads or any directory is made (issue 19, item 3).

Real `mcp-rl` processes, with the tiny model and the example inventory server. Every number is
checked against the bound its config field declares (RolloutConfig, GenerateConfig, JudgeConfig,
TrainConfig), so a bad one never reaches a library as a traceback; the cases the table of
tests/test_cli_settings.py already runs for `train` are not repeated.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INVENTORY, PY, REPO

pytestmark = pytest.mark.timeout(300)


def mcp_rl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "250"},
    )


def one_clear_error(r: subprocess.CompletedProcess, *words: str) -> str:
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-3000:]
    assert err.count("error:") == 1, err
    for w in words:
        assert w in err, (w, err)
    return err


ROLLOUT = ["rollout", "--server", INVENTORY, "--model", "tiny", "--task", "How many categories?"]
CHAT = ["chat", "--server", INVENTORY, "--model", "tiny", "--message", "hi"]
GENERATE = ["generate", "--server", INVENTORY, "--generator", "tiny", "-o", "{tmp}/t.jsonl"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # a bound only click knew (0 < top_p), or none at all (nan): a pydantic traceback before
        ([*ROLLOUT, "--top-p", "0"], ["--top-p 0.0", "greater than 0"]),
        ([*ROLLOUT, "--temperature", "nan"], ["--temperature nan", "finite number"]),
        ([*ROLLOUT, "--max-context", "10"], ["--max-context 10", "64"]),
        ([*CHAT, "--top-p", "1.5"], ["--top-p 1.5", "less than or equal to 1"]),
        ([*GENERATE, "--grounded-share", "nan"], ["--grounded-share nan", "finite number"]),
        ([*GENERATE, "--n-tasks", "0"], ["--n-tasks 0"]),
        # the option parser's own errors are one `error:` line too, not a box in another format
        ([*GENERATE, "--val-fraction", "0.95"], ["--val-fraction"]),
        (["train", "--server", INVENTORY, "--max-steps", "three"], ["--max-steps", "integer"]),
        (["train", "--server", INVENTORY, "--no-such-flag"], ["No such option: --no-such-flag"]),
        (["judge", "{tmp}/none.jsonl", "--timeout", "-1"], ["--timeout -1.0", "greater than 0"]),
        (["judge", "{tmp}/none.jsonl", "--timeout", "nan"], ["--timeout nan", "finite number"]),
    ],
)
def test_a_bad_number_for_any_command_is_one_message_naming_its_flag(args, words, tmp_path):
    one_clear_error(mcp_rl(*[a.replace("{tmp}", str(tmp_path)) for a in args]), *words)
    assert not (tmp_path / "t.jsonl").exists()


def test_a_directory_given_as_config_is_named_as_one(tmp_path):
    one_clear_error(mcp_rl("inspect", "--config", str(tmp_path)), "is a directory", str(tmp_path))


@pytest.mark.parametrize("url", ["ftp://example.com/mcp", "localhost:8000/mcp"])
def test_a_config_url_that_is_not_http_is_refused_not_run_as_a_command(url, tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"files": {"url": url}}}))
    err = one_clear_error(mcp_rl("inspect", "--config", str(cfg)), "server 'files'")
    assert "command not found" not in err


def test_a_server_url_with_another_scheme_is_refused():
    err = one_clear_error(mcp_rl("inspect", "--server", "ftp://example.com/mcp"), "unsupported server URL scheme 'ftp'")
    assert "command not found" not in err


def test_a_stdio_server_printing_garbage_names_its_stdout_as_not_mcp():
    # prints lines that are not JSON-RPC and never answers the handshake: before, the SDK's parse
    # traceback for every line, then "did not finish connecting" after the full timeout, no reason
    script = "import time\nfor i in range(3): print('Server listening on stdio', i, flush=True)\ntime.sleep(60)"
    server = f"{PY} -c {shlex.quote(script)}"
    err = one_clear_error(
        mcp_rl("inspect", "--server", server, "--connect-timeout", "50"),
        "its stdout is not MCP",
        "'Server listening on stdio 0'",
        "3 such lines",
    )
    assert "did not finish connecting" not in err  # told at once, not after the timeout


def test_a_banner_before_the_handshake_is_tolerated():
    server = f"sh -c 'echo starting; exec {INVENTORY}'"
    r = mcp_rl("inspect", "--server", server)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "list_categories" in r.stdout


def _broken_models(tmp_path: Path) -> dict[str, Path]:
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"this is not a gguf file at all")
    hf = tmp_path / "hf-dir"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen2"}))  # no weights, no tokenizer
    return {"gguf": gguf, "hf": hf}


@pytest.mark.parametrize("kind", ["gguf", "hf"])
def test_a_broken_model_file_or_directory_is_one_message_before_any_directory_is_made(kind, tmp_path):
    model = _broken_models(tmp_path)[kind]
    words = {"gguf": ["is not a GGUF file", "broken.gguf"], "hf": ["not a complete transformers model directory"]}
    run = tmp_path / "run"
    one_clear_error(
        mcp_rl("train", "--server", INVENTORY, "--model", str(model), "--judge", "none", "--run-dir", str(run)),
        *words[kind],
    )
    assert not run.exists()
    one_clear_error(mcp_rl(*ROLLOUT[:3], "--model", str(model), *ROLLOUT[5:]), *words[kind])


def test_a_bad_base_url_is_refused_without_echoing_it(tmp_path):
    err = one_clear_error(mcp_rl(*ROLLOUT, "--base-url", "ftp://user:sk-secret@host/v1"), "--base-url")
    assert "sk-secret" not in err
    run = tmp_path / "run"
    err = one_clear_error(
        mcp_rl("train", "--server", INVENTORY, "--base-url", "ftp://user:sk-secret@host/v1", "--run-dir", str(run)),
        "--base-url",
    )
    assert "sk-secret" not in err and not run.exists()

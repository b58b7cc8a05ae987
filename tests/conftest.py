"""Shared fixtures: our example servers as real processes on real transports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
INVENTORY = f"{PY} -m examples.servers.inventory"
FAULTY = f"{PY} -m examples.servers.faulty"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


def start_http(module: str, *args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [PY, "-m", module, "--transport", "http", "--port", str(port), *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
    except BaseException:
        proc.kill()
        raise
    return proc, f"http://127.0.0.1:{port}/mcp"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def inventory_http() -> Iterator[str]:
    proc, url = start_http("examples.servers.inventory")
    yield url
    stop(proc)


@pytest.fixture
def faulty_http() -> Iterator[tuple[subprocess.Popen, str]]:
    proc, url = start_http("examples.servers.faulty")
    yield proc, url
    stop(proc)


def have(cmd: str) -> bool:
    return shutil.which(cmd) is not None


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    # Servers are started as `python -m examples.servers...`: run from the repo root.
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

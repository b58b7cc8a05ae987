"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ending in NUL on file descriptors 3 and 4): no websocket client, no Playwright needed.

    with Browser() as b:
        b.open(url); b.wait_for("document.body.dataset.view === 'runs'"); b.errors  # console errors
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

CHROMIUM = next((p for p in ("chromium", "chromium-browser", "google-chrome") if shutil.which(p)), None)


def _onto_3_and_4(read_end: int, write_end: int) -> None:
    # Copies first: either end may itself be fd 3 or 4.
    a, b = os.dup(read_end), os.dup(write_end)
    os.dup2(a, 3)
    os.dup2(b, 4)


class Browser:
    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        assert CHROMIUM, "no chromium on PATH"
        self.profile = tempfile.mkdtemp(prefix="mcp-rl-chromium-")
        to_child, self._send_fd = os.pipe()
        self._recv_fd, from_child = os.pipe()
        # The child reads commands on fd 3 and writes replies on fd 4.
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4, to_child, from_child),
            preexec_fn=lambda: _onto_3_and_4(to_child, from_child),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buf = b""
        self._next = 0
        self.errors: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable", session=True)

    def _read(self, timeout: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._recv_fd], [], [], timeout)
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._recv_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def _note(self, msg: dict[str, Any]) -> None:
        """Collect what counts as a console error: exceptions, console.error, error log entries."""
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(json.dumps(params.get("args", []))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: bool = False, timeout: float = 60
    ) -> Any:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._send_fd, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._note(reply)

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)

    def eval(self, expression: str) -> Any:
        got = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        return got.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll a JS expression until it is truthy; the last value on timeout is in the error."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(
            f"never true: {expression} (last {value!r}; page: {self.eval('document.body.innerText')!r:.500})"
        )

    def screenshot(self, path: str) -> None:
        import base64

        data = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True
        )
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._send_fd)
        os.close(self._recv_fd)
        shutil.rmtree(self.profile, ignore_errors=True)

"""Ctrl-C: one line saying what was kept and how to go on, then exit code 130.

Measured before this handler: a `train` given SIGINT twice ran on for four more steps. asyncio's
default handler only cancels the main task, and the cancellation (or a KeyboardInterrupt raised
inside the event loop) was swallowed on its way out (a server connection task recorded any
exception as the server's failure) or, once it got out, ended in pages of task-group tracebacks.

So the entry point installs this handler. The first SIGINT prints the line; inside an event loop
(train, rollout, generate, chat: everything that runs long) the process then ends at once, which is
as safe as the kill -9 the run directory is built for (a step is committed only when all of it is
on disk, `--resume` removes anything newer, and a stdio server sees its stdin close and exits).
Outside one it raises KeyboardInterrupt for an orderly exit, and ends the process if it is still
alive `GRACE_S` later or on a second SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

GRACE_S = 15.0
EXIT_CODE = 130

_say: list[Callable[[], str]] = []
_told = threading.Event()


def on_interrupt(say: Callable[[], str]) -> None:
    """What a Ctrl-C should say (what was kept, how to go on) for the command running now."""
    _say[:] = [say]


def interrupt_line() -> str:
    if _say:
        try:
            return _say[0]()
        except Exception as e:  # the line must never turn an interrupt into a traceback
            return f"interrupted (what was kept could not be read: {type(e).__name__})"
    return "interrupted: nothing was written (this command writes its output only when it finishes)"


def tell() -> None:
    """Print the line, once."""
    if not _told.is_set():
        _told.set()
        sys.stderr.write(interrupt_line() + "\n")
        sys.stderr.flush()


def _hard_exit() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_CODE)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _told.is_set():  # a second Ctrl-C: the user means now
        _hard_exit()
    tell()
    if asyncio_loop_running():
        _hard_exit()
    timer = threading.Timer(GRACE_S, _hard_exit)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def asyncio_loop_running() -> bool:
    """Whether the main thread (where the handler runs) is inside an event loop."""
    return asyncio._get_running_loop() is not None


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """SIGINT handled here while the block runs (from the main thread only, where signals are
    handled); the previous handler is put back after, for callers that run `main()` in process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _handler)
    _told.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _say.clear()

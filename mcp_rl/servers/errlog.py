"""Where a stdio server's stderr goes: a log file, with secrets taken out before they reach the disk.

A server may print its environment or its headers (a debug line, a crash dump). When the spec holds
secret values, the server writes into a pipe instead of the file; a thread reads it line by line,
replaces every secret with `***` and appends the line to the log. Redacting as it is written (rather
than cleaning the file afterwards) means a training process killed with SIGKILL leaves no secret
behind either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_DRAIN_S = 5.0
"""How long closing waits for the last lines after the server is gone."""


def _copy_redacted(source: IO[str], log: IO[str], redact: Callable[[str], str]) -> None:
    with source, log:
        for line in source:
            log.write(redact(line))
            log.flush()


@contextmanager
def server_errlog(path: Path, redact: Callable[[str], str] | None) -> Iterator[IO[str]]:
    """A file object to hand to the server process as its stderr."""
    if redact is None:  # no secrets: the file itself
        with path.open("a", encoding="utf-8", errors="replace") as f:
            yield f
        return
    read_fd, write_fd = os.pipe()
    source = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
    log = path.open("a", encoding="utf-8", errors="replace")
    copier = threading.Thread(target=_copy_redacted, args=(source, log, redact), daemon=True)
    copier.start()
    writer = os.fdopen(write_fd, "w", encoding="utf-8")
    try:
        yield writer
    finally:
        writer.close()  # the copier ends once the server's copy of the pipe is closed too
        copier.join(_DRAIN_S)

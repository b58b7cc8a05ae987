"""Files written whole or not at all: every file mcp-rl writes for the user goes through `write_atomic`.

The data goes into a hidden temporary file beside the target (same directory, so the rename is
atomic on every POSIX file system), is flushed to the disk, and only then renamed over the target.
A failure of any kind (a full disk, a kill between two writes, a library's own writer raising)
removes the temporary file and leaves the target as it was: a reader sees the old file or the new
one, never half of one, and nothing named `*.tmp` is left behind.
"""

from __future__ import annotations

import errno
import io
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_rl.errors import OutputError

# errno values that mean "no room": a full disk, a quota, a file-size limit (RLIMIT_FSIZE).
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# Libraries that write in native code (safetensors, polars, torch) raise their own exception types
# and keep the errno only in the text ("... File too large (os error 27)").
_NO_ROOM_TEXT = re.compile(
    r"os error (28|27|122)\b|no space left on device|file too large|disk quota exceeded|file write failed",
    re.IGNORECASE,
)

Writer = Callable[[Path], None]
"""Writes the whole content to the path it is given (e.g. `lambda p: df.write_parquet(p)`)."""


def no_room(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it wraps) says the disk, a quota or a file-size limit is full."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _NO_ROOM:
            return True
        if not isinstance(e, OSError) and _NO_ROOM_TEXT.search(str(e)):
            return True
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend([e.__cause__, e.__context__])
    return False


def temp_path(path: Path) -> Path:
    """The hidden temporary name `path` is written under (the process id keeps two writers apart)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _write_bytes(data: bytes) -> Writer:
    def write(tmp: Path) -> None:
        with tmp.open("wb") as f:
            f.write(data)

    return write


def parquet_bytes(df: Any) -> bytes:
    """A polars DataFrame as Parquet bytes, for `write_atomic`. Written by our own `write` rather than
    polars' native one, whose errors on a full disk do not always say so ("Invalid thrift: transport
    error" for a file-size limit hit in the footer), so the disk being full is always recognized."""
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


def write_atomic(path: str | Path, data: bytes | str | Writer) -> Path:
    """Write `path` whole or not at all (see the module docstring). `data` is the content (str as
    UTF-8) or a writer given the temporary path. A full disk raises `OutputError` (its cause the
    original error); any other failure is re-raised as it was. Either way no temporary file is left."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write = data if callable(data) else _write_bytes(data.encode() if isinstance(data, str) else data)
    tmp = temp_path(path)
    try:
        write(tmp)
        with tmp.open("rb+") as f:  # on the disk before the rename makes it visible
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, Exception) and no_room(e):
            detail = getattr(e, "strerror", None) or str(e).splitlines()[0][:200]
            raise OutputError(
                f"no room left on the disk while writing {path}: {detail}",
                hint=f"free some space and run the command again (nothing was written; "
                f"an earlier {path.name}, if any, is unchanged)",
            ) from e
        raise
    return path

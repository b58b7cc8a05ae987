"""The output directory: checked before any work, written whole or not at all.

Everything is written into a hidden sibling directory, which replaces the target only once the
export is complete, so a failed or killed export never leaves a half-written model where a
loader would pick it up, and `--force` never deletes the old export before the new one exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mcp_rl.errors import ConfigError
from mcp_rl.rundir import no_room


def check_output(out: Path, force: bool) -> Path:
    """The absolute target; ConfigError if it is a file, a non-empty directory (without --force),
    or cannot be created."""
    out = out.expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"the output {out} is a file", hint="give -o a directory path")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(
            f"the output directory {out} exists and is not empty",
            hint="choose a new -o directory, or pass --force to replace it",
        )
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=f".{out.name}.probe-", dir=parent)
        os.rmdir(probe)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the output directory {out}: {exc.strerror or exc}",
            hint="choose an -o path in a writable directory",
        ) from None
    return out


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """Yield a temporary directory next to `out`; on success it replaces `out`."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        # mkdtemp makes the staging directory private (0700), and safetensors writes its files 0600;
        # an export is meant to be read by other programs, e.g. an inference service running as its
        # own user: the directory and every file get the usual modes (0755 and 0644 under umask 022).
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
        for f in tmp.rglob("*"):
            f.chmod((0o777 if f.is_dir() else 0o666) & ~umask)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except Exception as exc:
        # ENOSPC, a quota, a file-size limit; also native writers (safetensors, gguf) that report it in text
        if no_room(exc):
            detail = getattr(exc, "strerror", None) or str(exc).splitlines()[0][:200]
            raise ConfigError(
                f"no room left on the disk while writing {out}: {detail}",
                hint="free some space and export again (nothing was left behind)",
            ) from None
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)

"""Pick the dtype and thread count for running a model on this machine.

bf16 halves the bytes read per decoding step and, on CPUs with AVX512-BF16 or AMX, runs matrix
work about 4x faster than fp32 (FIELD_NOTES §1). On CPUs without those instructions torch emulates
bf16 and it is slower than fp32, so fp32 is used there.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch


def cpu_has_fast_bf16() -> bool:
    """True when the CPU has native bf16 matrix instructions (AVX512-BF16 or AMX-BF16)."""
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    if probe is not None:
        try:
            if probe():
                return True
        except RuntimeError:
            pass
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if amx is not None:
        try:
            if amx():
                return True
        except RuntimeError:
            pass
    # Fallback for torch builds without the probes: the kernel's flag list (Linux only).
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def best_dtype(device: torch.device | str | None = None) -> torch.dtype:
    """bf16 on GPUs that support it and on CPUs with native bf16, else fp32."""
    dev = torch.device(device) if device is not None else default_device()
    if dev.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32


def physical_cores() -> int:
    """Physical cores available to this process (hyperthread siblings counted once)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return max(1, (os.cpu_count() or 2) // 2)
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            pkg = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return max(1, len(cpus))
        cores.add((pkg, core))
    return max(1, len(cores))


def configure_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads: one per physical core (hyperthreads only add contention for
    matrix work). Env `MCP_RL_THREADS` overrides. Returns the count set."""
    env = os.environ.get("MCP_RL_THREADS")
    if n is None and env:
        try:
            n = int(env)
        except ValueError:
            n = None
    n = n or physical_cores()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def release_memory() -> None:
    """Give freed memory back to the operating system. On CPU, torch's freed tensors stay in the C
    allocator's per-thread arenas, so a training process's resident size only ever grows (measured:
    13 GB after two GRPO steps with the 0.5B policy and the 1.5B judge, most of it free inside the
    process). glibc's malloc_trim returns it; elsewhere this only collects garbage."""
    import contextlib
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)

"""Map the GPU ids a worker was given (CUDA_VISIBLE_DEVICES entries) to NVIDIA device nodes."""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache


@lru_cache(maxsize=1)
def _inventory() -> tuple[tuple[str, str, int], ...]:
    """(index, uuid, minor number) of every GPU the driver lists; empty without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,minor_number", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].isdigit():
            rows.append((parts[0], parts[1], int(parts[2])))
    return tuple(rows)


def device_minors(gpu_ids: list[str] | tuple[str, ...]) -> list[int]:
    """Minor numbers (``/dev/nvidiaN``) of the GPUs named by index or UUID (nvidia-smi's PCI order)."""
    minors = []
    for gpu in gpu_ids:
        for index, uuid, minor in _inventory():
            if gpu == index or (gpu.startswith("GPU-") and uuid.startswith(gpu)):
                minors.append(minor)
                break
    return minors

"""The machine's NVIDIA GPUs as the driver lists them, and the device nodes a sandbox needs to use some of them.

A worker is given GPUs by their nvidia-smi index (or UUID); the sandbox binds only those GPUs' nodes
(``/dev/nvidiaN``, N the minor number, which need not equal the index), so inside it CUDA numbers what it can
open from 0. The experiment is therefore told its GPUs by UUID (``cuda_ids``): whatever the numbering
inside, ``CUDA_VISIBLE_DEVICES=GPU-...`` names the same device, and with the sandbox's nodes it is device 0.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

# where the host's device nodes are; tests point it at a folder of stand-ins
DEV_ROOT = Path("/dev")
# besides each GPU's own node, what the CUDA driver opens: the control node always, the unified memory
# nodes for any allocation, modeset on some drivers, the capability folder for MIG
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")
UVM_FIX = ("load it on the host before the run: `nvidia-modprobe -u -c=0` (or `sudo modprobe nvidia-uvm`, "
           "or start any CUDA program once outside the sandbox)")
_QUERY = "index,uuid,minor_number,name,memory.total,driver_version"


class GpuInfo(BaseModel):
    """One GPU as nvidia-smi lists it."""

    index: str
    uuid: str
    minor: int
    name: str = ""
    memory_mib: int | None = None
    driver: str = ""

    @property
    def node(self) -> str:
        return f"nvidia{self.minor}"


def parse_inventory(text: str) -> tuple[GpuInfo, ...]:
    """nvidia-smi's ``--query-gpu`` CSV rows (``_QUERY``'s columns; the last three may be absent)."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[2].isdigit():
            continue
        extra = parts[3:6] + [""] * (3 - len(parts[3:6]))
        memory = extra[1].split()[0] if extra[1] else ""
        rows.append(GpuInfo(index=parts[0], uuid=parts[1], minor=int(parts[2]), name=extra[0],
                            memory_mib=int(memory) if memory.isdigit() else None, driver=extra[2]))
    return tuple(rows)


@lru_cache(maxsize=1)
def inventory() -> tuple[GpuInfo, ...]:
    """Every GPU the driver lists (nvidia-smi ignores CUDA_VISIBLE_DEVICES); empty without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return parse_inventory(out)


def find(gpu: str) -> GpuInfo | None:
    """The GPU an id names: an nvidia-smi index, or a UUID (or its unambiguous prefix, as CUDA accepts)."""
    for info in inventory():
        if gpu == info.index or (gpu.startswith("GPU-") and info.uuid.startswith(gpu)):
            return info
    return None


def device_minors(gpu_ids: list[str] | tuple[str, ...]) -> list[int]:
    """Minor numbers (``/dev/nvidiaN``) of the GPUs named by index or UUID (nvidia-smi's PCI order)."""
    return [info.minor for info in map(find, gpu_ids) if info is not None]


def cuda_ids(gpu_ids: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The GPUs as ``CUDA_VISIBLE_DEVICES`` should name them: by UUID where the driver lists them (an index
    would be renumbered inside the sandbox), else as given."""
    return tuple(info.uuid if (info := find(gpu)) is not None else gpu for gpu in gpu_ids)


@lru_cache(maxsize=1)
def load_uvm() -> bool:
    """Create ``/dev/nvidia-uvm`` where the driver has not made it yet (it appears on the first CUDA use on
    the host, and nothing inside the sandbox may load a module or make a node). nvidia-modprobe is the
    driver's setuid helper for this; True when the node exists afterwards."""
    node = DEV_ROOT / "nvidia-uvm"
    if not node.exists() and shutil.which("nvidia-modprobe"):
        try:
            subprocess.run(["nvidia-modprobe", "-u", "-c=0"], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            pass
    return node.exists()


def missing_nodes(gpu_ids: list[str] | tuple[str, ...]) -> list[str]:
    """What the host lacks for CUDA to use these GPUs in a sandbox, one phrase each (empty: nothing)."""
    missing: list[str] = []
    for gpu in gpu_ids:
        info = find(gpu)
        if info is None:
            missing.append(f"GPU {gpu} is not in nvidia-smi's list" if shutil.which("nvidia-smi") else
                           f"nvidia-smi is not on PATH, so GPU {gpu}'s device node cannot be found (install the "
                           "NVIDIA driver's utilities)")
        elif not (DEV_ROOT / info.node).exists():
            missing.append(f"{DEV_ROOT / info.node} (GPU {gpu}'s node) does not exist")
    if gpu_ids and not (DEV_ROOT / "nvidiactl").exists():
        missing.append(f"{DEV_ROOT / 'nvidiactl'} does not exist (is the NVIDIA driver loaded?)")
    if gpu_ids and not load_uvm():
        missing.append(f"{DEV_ROOT / 'nvidia-uvm'} does not exist: {UVM_FIX}")
    return missing

"""What a shared table must disclose to be compared with another: the machine it ran on, the time it was
given, whether the sandbox and the network were on, and which agent code produced it."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..record import GpuHeld, RunHardware
from .provenance import instruction_set


class Hardware(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_gb: float | None = None
    # every GPU the machine has (nvidia-smi's names), and which of them this session could use
    gpu_models: list[str] = []
    gpu_count: int = 0
    cuda_visible_devices: str | None = None
    # the CPU's vector extensions and any kernel pins (provenance.instruction_set); [] in older summaries
    instruction_set: list[str] = []


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _gpu_models() -> list[str]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def hardware() -> Hardware:
    gpus = _gpu_models()
    return Hardware(cpu_model=_cpu_model(), cpu_count=os.cpu_count(), memory_gb=_memory_gb(), gpu_models=gpus,
                    gpu_count=len(gpus), cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                    instruction_set=instruction_set())


def run_hardware(held: list[str]) -> RunHardware:
    """The machine one run runs on, and the GPUs it holds (``held``: indices or UUIDs, as its record's
    ``devices``), with their names and memory from nvidia-smi."""
    from ..isolation.gpu import inventory

    gpus = [GpuHeld(name=gpu.name, memory_mib=gpu.memory_mib, uuid=gpu.uuid) for gpu in (inventory() if held else ())
            if gpu.index in held or gpu.uuid in held]
    return RunHardware(host=socket.gethostname(), cpu_model=_cpu_model(), cpu_count=os.cpu_count(), gpus=gpus)


def code_sha256(paths: list[Path]) -> str | None:
    """sha256 over the files under ``paths`` (names relative to each path's folder, and contents), byte
    code and caches left out; None when there is nothing to hash."""
    digest = hashlib.sha256()
    found = False
    for root in paths:
        root = Path(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for path in files:
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                continue
            name = path.name if path == root else str(path.relative_to(root))
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
            found = True
    return digest.hexdigest() if found else None


def agent_code_sha256(settings) -> str | None:
    """The hash of the agent's own code, from where its process would load it (``RunSettings``); a built-in
    agent is its module file. None for an external program, or where the code cannot be found."""
    from ..agentkit.loading import AgentLoadError, agents_dir

    if settings.agent_mode == "external":
        return None
    try:
        locator = settings.locator()
        if locator is None and settings.agent_cls is not None:
            from ..agent_host.locate import locate_class

            locator = locate_class(settings.agent_cls)
    except AgentLoadError:
        return None
    if locator is None:
        return None
    if locator.builtin_dir:
        module = Path(agents_dir()) / (locator.spec.replace("-", "_") + ".py")
        return code_sha256([module]) if module.is_file() else code_sha256([Path(p) for p in locator.code])
    return code_sha256([Path(p) for p in locator.code])

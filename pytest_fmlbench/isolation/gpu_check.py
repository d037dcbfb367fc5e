"""Before a GPU task's first step: does torch, inside the sandbox, see the GPUs this worker was given?

Every full task's ``train.py`` picks "cuda if available, else cpu": a GPU the sandbox hides would turn a run
into hours of CPU training that ends in timeouts. So a task that declares GPUs (``resources.gpus >= 1``, at
full scale) has its GPUs checked once, inside the sandbox the experiments get, with the framework they use;
where torch does not see exactly the assigned devices the item errors with one line naming the device and
what is missing. The probe runs ahead of the sandbox's self-check in the same sandbox start
(``probe_argv`` hands over to it with ``exec``).
"""

from __future__ import annotations

import os
import shutil
import sys

from pydantic import BaseModel, ValidationError

from . import SandboxUnavailable, gpu

MARKER = "fmlbench-gpu-probe "

# runs with the experiment's interpreter; prints one MARKER line, then execs the rest of its arguments
_PROBE = r"""
import json, os, sys, warnings
seen = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "devices": []}
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
        seen["torch"] = torch.__version__
        seen["cuda"] = torch.version.cuda
        for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
            props = torch.cuda.get_device_properties(i)
            seen["devices"].append({"name": props.name, "uuid": str(getattr(props, "uuid", "") or ""),
                                    "memory_mib": int(props.total_memory) >> 20})
    seen["warnings"] = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()][:3]
except Exception as exc:
    seen["error"] = (f"{type(exc).__name__}: {exc}".strip().splitlines() or ["?"])[0][:300]
try:
    import ctypes
    version = ctypes.c_int(0)
    if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
        seen["driver_cuda"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
except Exception:
    pass
print("fmlbench-gpu-probe " + json.dumps(seen), flush=True)
if len(sys.argv) > 1:
    os.execv(sys.argv[1], sys.argv[1:])
"""


class GpuUnavailable(SandboxUnavailable):
    """A task declares GPUs and the sandbox does not show them; the message is one line with the fix."""


class SeenDevice(BaseModel):
    name: str = ""
    uuid: str = ""
    memory_mib: int | None = None


class GpuView(BaseModel):
    """What the probe saw inside the sandbox."""

    visible: str | None = None
    torch: str | None = None
    cuda: str | None = None
    driver_cuda: str | None = None
    devices: list[SeenDevice] = []
    warnings: list[str] = []
    error: str | None = None


def required(gpus_declared: int, scale: str | None) -> bool:
    """Whether a run must have its GPUs: declared ones, except at smoke scale (small stand-ins, run on CPUs)."""
    return gpus_declared >= 1 and scale != "smoke"


def probe_argv(then: list[str], python: str = sys.executable) -> list[str]:
    """The probe, followed (by exec, in the same process and sandbox) by ``then`` when given."""
    return [python, "-c", _PROBE, *then]


def parse(output: str) -> GpuView | None:
    """The probe's report from a command's output; None when it printed none."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                return GpuView.model_validate_json(line[len(MARKER):])
            except ValidationError:
                return None
    return None


def none_assigned(declared: int) -> str:
    """The line for a GPU task on a worker given no GPU at all."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) is not None and not gpu.inventory():
        why = f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} names none"
    elif shutil.which("nvidia-smi") is None:
        why = "nvidia-smi is not on PATH: no NVIDIA driver here"
    else:
        why = "nvidia-smi lists no GPU"
    return (f"the task declares {declared} GPU(s) and this machine gives it none ({why}); run it on a GPU machine "
            "(`fmlbench doctor` shows what the sandbox sees there), or try it on CPUs with --scale=smoke")


def _same(assigned: str, seen_uuid: str) -> bool:
    def bare(uuid: str) -> str:
        return uuid.lower().removeprefix("gpu-")

    return bare(seen_uuid).startswith(bare(assigned))


def _named(gpu_id: str) -> str:
    info = gpu.find(gpu_id)
    if info is None:
        return f"GPU {gpu_id}"
    return f"GPU {info.index} ({info.name or 'unnamed'}, {info.uuid}, {gpu.DEV_ROOT / info.node})"


def problem(assigned: tuple[str, ...], output: str) -> str | None:
    """The one line saying which assigned GPU the sandbox's torch does not see and why; None when it sees
    exactly them (by UUID where both sides know it, else by count)."""
    view = parse(output)
    names = ", ".join(_named(g) for g in assigned)
    if view is None:
        tail = (output.strip().splitlines() or ["no output"])[-1][:300]
        return f"the GPU check inside the sandbox did not report ({tail}); assigned: {names}"
    seen = view.devices
    known = all(g.startswith("GPU-") for g in assigned) and all(d.uuid for d in seen)
    matches = len(seen) == len(assigned) and (not known or all(_same(a, d.uuid) for a, d in zip(assigned, seen)))
    if matches and view.error is None:
        return None
    if view.error is not None:
        sight = f"torch cannot be used there ({view.error})"
    else:
        sight = (f"torch {view.torch} (CUDA {view.cuda}) sees {len(seen)} device(s)"
                 + (f" ({', '.join(d.uuid or d.name for d in seen)})" if seen else ""))
    driver = f"the driver's CUDA {view.driver_cuda}" if view.driver_cuda else "the driver"
    causes = gpu.missing_nodes(assigned) or view.warnings or [
        f"CUDA reports no usable device (is {driver} as new as torch's CUDA {view.cuda}?)"]
    return (f"the task declares a GPU; inside the sandbox {sight}, not the assigned {names} "
            f"(CUDA_VISIBLE_DEVICES={view.visible}): {'; '.join(causes)}")

"""Which GPUs (and how many CPU threads) an experiment gets, from the xdist worker running it."""

from __future__ import annotations

import os
from functools import lru_cache

from .isolation import gpu


@lru_cache(maxsize=1)
def visible_gpus() -> tuple[str, ...]:
    """GPU ids this process may use: an existing CUDA_VISIBLE_DEVICES wins, else what nvidia-smi lists."""
    restricted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if restricted is not None:
        return tuple(d.strip() for d in restricted.split(",") if d.strip() and d.strip() != "-1")
    return tuple(info.index for info in gpu.inventory())


def worker_index() -> tuple[int, int]:
    """(index, count) of this xdist worker; (0, 1) without xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return int(worker.removeprefix("gw") or 0), max(1, count)


def assigned_gpus(gpus_per_task: int) -> tuple[str, ...]:
    """This worker's slice of the visible GPUs (wrapping round when workers outnumber slices)."""
    gpus = visible_gpus()
    if not gpus or gpus_per_task <= 0:
        return ()
    per = min(gpus_per_task, len(gpus))
    slots = len(gpus) // per
    index, _ = worker_index()
    start = (index % slots) * per
    return gpus[start : start + per]


def auto_workers(gpus_per_task: int) -> int | None:
    """`-n auto` on a GPU machine: one worker per GPU slice; None lets xdist count CPUs."""
    gpus = visible_gpus()
    if not gpus:
        return None
    return max(1, len(gpus) // max(1, gpus_per_task))


def experiment_env(gpus_per_task: int) -> dict[str, str]:
    """Variables to add to an experiment's environment for this worker."""
    env: dict[str, str] = {}
    if visible_gpus():
        # by UUID: the sandbox binds only these GPUs' nodes, and CUDA inside numbers them from 0, so an
        # nvidia-smi index other than 0 would name no device there (isolation.gpu)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu.cuda_ids(assigned_gpus(max(1, gpus_per_task))))
        # an index the driver does not list stays an index, in nvidia-smi's (PCI) order
        env["CUDA_DEVICE_ORDER"] = os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if "OMP_NUM_THREADS" not in os.environ:
        # several workers on one box must not each spin up one thread per core
        _, count = worker_index()
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // count))
    return env

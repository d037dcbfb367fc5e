"""A full-profile task's declared GPUs reach a Slurm job's request and the worker's CUDA_VISIBLE_DEVICES."""

from types import SimpleNamespace

from pytest_fmlbench import devices
from pytest_fmlbench.slurm.controller import SlurmController
from pytest_fmlbench.slurm.config import SlurmConfig
from pytest_fmlbench.spec import load_task

from conftest import REPO

FULL = load_task(REPO / "task_suites" / "privacy_opacus" / "full" / "task.yaml")


def test_a_slurm_job_asks_for_the_gpus_and_memory_its_task_declares(tmp_path):
    # the controller's request builder alone (a whole controller takes over the process's signals)
    controller = SimpleNamespace(bench=SimpleNamespace(settings=SimpleNamespace(steps=2)),
                                 slurm=SlurmConfig(partition="gpu", time_min=None))
    request = SlurmController._request(controller, SimpleNamespace(task=FULL, seed=0))
    resources = FULL.spec.resources
    assert request["gpus_per_node"] == resources.gpus == 1
    assert request["cpus_per_task"] == resources.cpus
    assert request["mem"] == f"{resources.memory_mb + 2048}MB" and request["partition"] == "gpu"
    # (steps + final val + test) x twice the expected duration, plus setup
    assert request["time"] == -(-(2 + 2) * FULL.spec.expected_duration_s * 2 // 60) + 10


def test_each_xdist_worker_gets_its_own_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    devices.visible_gpus.cache_clear()
    try:
        seen = []
        for worker in range(4):
            monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
            monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
            seen.append(devices.experiment_env(FULL.spec.resources.gpus)["CUDA_VISIBLE_DEVICES"])
        assert seen == ["0", "1", "2", "3"] and devices.auto_workers(FULL.spec.resources.gpus) == 4
    finally:
        devices.visible_gpus.cache_clear()

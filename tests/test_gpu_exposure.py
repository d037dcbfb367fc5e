"""A worker's GPUs inside the sandbox: only their device nodes bound, named by UUID, and checked with the
framework before the first step. No real GPU: device nodes are stand-in files in a folder, nvidia-smi and
nvidia-modprobe are scripts on PATH, and torch is a stub package that sees what it is told to."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pytest_fmlbench import devices, isolation
from pytest_fmlbench.isolation import gpu, gpu_check

from conftest import load_record

UUIDS = ("GPU-0a0a0a0a-1111-2222-3333-444444444444", "GPU-1b1b1b1b-5555-6666-7777-888888888888")


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Two GPUs as the driver would show them: nodes under a stand-in /dev, nvidia-smi answering for them."""
    dev, bin_dir = tmp_path / "dev", tmp_path / "bin"
    dev.mkdir()
    bin_dir.mkdir()
    for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia1"):
        (dev / node).touch()
    rows = "\n".join(f"{i}, {uuid}, {i}, NVIDIA H100 80GB HBM3, 81559, 550.54.15" for i, uuid in enumerate(UUIDS))
    _script(bin_dir / "nvidia-smi", f"cat <<'EOF'\n{rows}\nEOF\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu, "DEV_ROOT", dev)
    caches = (gpu.inventory, gpu.load_uvm, devices.visible_gpus)
    for cache in caches:
        cache.cache_clear()
    yield dev
    for cache in caches:
        cache.cache_clear()


def _view(tmp_path: Path, gpus: tuple[str, ...]) -> isolation.ExperimentView:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "out").mkdir(exist_ok=True)
    return isolation.ExperimentView(tmp_path / "ws", tmp_path / "out", [], [], gpus=gpus)


def _gpu_binds(argv: list[str]) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, word in enumerate(argv) if word == "--dev-bind"]


def test_worker_gw1_sees_gpu_1_as_its_only_device(machine, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    env = devices.experiment_env(1)
    # by UUID: inside, where only /dev/nvidia1 exists, CUDA's device 0 is this GPU; an index 1 would name none
    assert env["CUDA_VISIBLE_DEVICES"] == UUIDS[1]
    argv = isolation.bwrap_argv(_view(tmp_path, (env["CUDA_VISIBLE_DEVICES"],)), ["true"])
    binds = _gpu_binds(argv)
    assert (str(machine / "nvidia1"), "/dev/nvidia1") in binds
    assert not any(target == "/dev/nvidia0" for _, target in binds)
    assert {target for _, target in binds} == {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                               "/dev/nvidia-modeset", "/dev/nvidia1"}


def test_a_gpu_node_whose_minor_differs_from_its_index_is_bound_by_minor(machine, tmp_path):
    (machine / "nvidia1").unlink()
    (machine / "nvidia7").touch()
    gpu.inventory.cache_clear()
    _script(Path(shutil.which("nvidia-smi")), f"echo '0, {UUIDS[0]}, 7, NVIDIA A100, 40960, 550.54.15'\n")
    binds = _gpu_binds(isolation.bwrap_argv(_view(tmp_path, ("0",)), ["true"]))
    assert (str(machine / "nvidia7"), "/dev/nvidia7") in binds and gpu.cuda_ids(("0",)) == (UUIDS[0],)


def test_missing_uvm_node_is_created_on_the_host_before_the_sandbox_is_built(machine, tmp_path):
    (machine / "nvidia-uvm").unlink()
    (machine / "nvidia-uvm-tools").unlink()
    # the driver's helper makes the nodes on the first CUDA use; here a stand-in that does what it does
    _script(Path(shutil.which("nvidia-smi")).with_name("nvidia-modprobe"),
            f'[ "$1" = -u ] && touch {machine}/nvidia-uvm {machine}/nvidia-uvm-tools\n')
    binds = _gpu_binds(isolation.bwrap_argv(_view(tmp_path, (UUIDS[0],)), ["true"]))
    assert (str(machine / "nvidia-uvm"), "/dev/nvidia-uvm") in binds
    assert gpu.missing_nodes((UUIDS[0],)) == []


def test_uvm_that_cannot_be_created_is_named_with_its_fix(machine, tmp_path):
    (machine / "nvidia-uvm").unlink()
    _script(Path(shutil.which("nvidia-smi")).with_name("nvidia-modprobe"), "exit 1\n")
    binds = _gpu_binds(isolation.bwrap_argv(_view(tmp_path, (UUIDS[1],)), ["true"]))
    assert "/dev/nvidia-uvm" not in {target for _, target in binds}
    seen_nothing = gpu_check.MARKER + '{"torch": "2.5.1", "cuda": "12.4", "devices": [], "visible": "%s"}' % UUIDS[1]
    line = gpu_check.problem((UUIDS[1],), seen_nothing)
    assert "\n" not in line
    assert f"not the assigned GPU 1 (NVIDIA H100 80GB HBM3, {UUIDS[1]}, {machine / 'nvidia1'})" in line
    assert f"{machine / 'nvidia-uvm'} does not exist: load it on the host before the run: `nvidia-modprobe -u -c=0`" in line


@pytest.fixture
def stub_torch(tmp_path):
    """A torch package that sees the devices $STUB_CUDA_DEVICES lists (UUIDs without the GPU- prefix, as
    torch writes them), or none."""
    package = tmp_path / "stub" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent("""
        import os, types
        __version__ = "2.5.1+stub"
        version = types.SimpleNamespace(cuda="12.4")
        _uuids = [u for u in os.environ.get("STUB_CUDA_DEVICES", "").split(",") if u]
        def _props(i):
            return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", uuid=_uuids[i], total_memory=80 << 30)
        cuda = types.SimpleNamespace(is_available=lambda: bool(_uuids), device_count=lambda: len(_uuids),
                                     get_device_properties=_props)
    """))
    return package.parent


def _probe(stub: Path, devices_seen: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(stub), "STUB_CUDA_DEVICES": devices_seen, "CUDA_VISIBLE_DEVICES": UUIDS[1]}
    then = [sys.executable, "-c", "print('the self-check ran')"]
    done = subprocess.run(gpu_check.probe_argv(then), capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "the self-check ran"  # handed over in the same process
    return done.stdout


def test_the_probe_accepts_exactly_the_assigned_gpu(machine, stub_torch):
    output = _probe(stub_torch, UUIDS[1].removeprefix("GPU-"))
    view = gpu_check.parse(output)
    assert view.torch == "2.5.1+stub" and view.visible == UUIDS[1] and view.devices[0].memory_mib == 80 << 10
    assert gpu_check.problem((UUIDS[1],), output) is None
    # another GPU than the one assigned is no pass either
    other = _probe(stub_torch, UUIDS[0].removeprefix("GPU-"))
    assert "sees 1 device(s) (0a0a0a0a-" in gpu_check.problem((UUIDS[1],), other)


def test_the_probe_reports_a_sandbox_that_hides_the_gpu(machine, stub_torch):
    line = gpu_check.problem((UUIDS[1],), _probe(stub_torch, ""))
    assert line.startswith("the task declares a GPU; inside the sandbox torch 2.5.1+stub (CUDA 12.4) sees 0 device(s), "
                           f"not the assigned GPU 1 (NVIDIA H100 80GB HBM3, {UUIDS[1]}")
    assert "\n" not in line


def test_no_gpu_check_at_smoke_scale_or_without_declared_gpus():
    assert gpu_check.required(1, "full") and gpu_check.required(1, None)
    assert not gpu_check.required(1, "smoke") and not gpu_check.required(0, "full")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_gpu_task_on_a_machine_without_gpu_errors_in_one_line_before_any_step(pytester, toy, bench, monkeypatch):
    spec = yaml.safe_load((toy / "task.yaml").read_text())
    spec["resources"] = {"gpus": 1}
    (toy / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "nvidia-smi").exists()))
    result = bench("--agent=baseline", "--steps=2", "toy_task")
    result.assert_outcomes(errors=1)
    why = "the task declares 1 GPU(s) and this machine gives it none (nvidia-smi is not on PATH: no NVIDIA driver here)"
    result.stdout.fnmatch_lines([f"*toy_task: {why}; run it on a GPU machine*--scale=smoke"])
    record = load_record(pytester.path)
    assert record["status"] == "error" and record["error"].startswith(why)
    [run_dir] = (pytester.path / "reports/fmlbench/runs/toy_task").iterdir()
    assert not (run_dir / "steps.jsonl").exists() or not (run_dir / "steps.jsonl").read_text().strip()


def test_a_runs_hardware_names_the_gpus_it_held_with_their_memory(machine):
    """Compute beside the score: the run's record names the GPUs it held (by index or UUID), not the others."""
    from pytest_fmlbench.reports.disclosure import run_hardware

    held = run_hardware(["1"])
    assert [(g.name, g.memory_mib, g.uuid) for g in held.gpus] == [("NVIDIA H100 80GB HBM3", 81559, UUIDS[1])]
    assert [g.uuid for g in run_hardware([UUIDS[0]]).gpus] == [UUIDS[0]]
    assert run_hardware([]).gpus == [] and held.cpu_count == os.cpu_count()

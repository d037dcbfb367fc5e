"""On-demand benchmarks of the harness's own per-step work (not the experiments').

    .venv/bin/python -m pytest benchmarks --benchmark-only

Target: a step's snapshot costs the same whatever the size of the task's data (it holds the editable
files only); the protected-file check grows with the data, linearly (it must read what it hashes).
"""

import shutil

import pytest

from pytest_fmlbench.integrity import Manifest
from pytest_fmlbench.record import RunStore

TOY = __import__("pathlib").Path(__file__).parent.parent / "tests" / "data" / "toy_task"
EDITABLE = ["algorithm.py", "config.json", "split_config.json"]


@pytest.fixture(params=[1, 64], ids=lambda mb: f"data{mb}MB")
def workspace(request, tmp_path):
    ws = tmp_path / "workspace"
    shutil.copytree(TOY / "workspace", ws)
    (ws / "data" / "dev.npz").write_bytes(b"\0" * (request.param << 20))
    return ws


def test_snapshot(benchmark, workspace, tmp_path):
    store = RunStore(tmp_path / "run")
    files = {name: (workspace / name).read_text() for name in EDITABLE}
    name, _ = benchmark(store.write_snapshot, 1, files)
    assert (store.dir / name).stat().st_size < 4096  # editable files only, whatever the data size


def test_manifest_take_and_verify(benchmark, workspace):
    manifest = Manifest.take(workspace, ["train.py", "data/**"], TOY / "harness", EDITABLE)
    assert benchmark(manifest.verify) == []


def test_live_progress_update(benchmark, tmp_path):
    """What live progress adds to a step: two small atomic file writes (start and end)."""
    from pytest_fmlbench.progress import LiveFile

    live = LiveFile(tmp_path, "run", "task[seed0]", 50, 0.5, "higher", 1.0)
    benchmark(live.update, step=3, done=2, action="improve", best_val=0.6, failed=1, tokens=1200, cost_usd=0.01)

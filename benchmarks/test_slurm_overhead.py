"""On-demand benchmark of --slurm: a job's overhead over the same item run locally (goal: at most 3 s per
item on an idle one-node cluster), and the makespan of N short items on the cluster against one item.

    make slurm-up
    .venv/bin/python -m pytest benchmarks/test_slurm_overhead.py --benchmark-only

Each round is the whole command (a pytest process on the toy task with the baseline agent, one step,
--fresh), so pytest's own start-up is in both timings and cancels out of the difference. The makespan
test's ``extra_info`` holds N, the cluster's slots for such items and the ratio makespan / (N/slots × one
item); 1.0 means the jobs ran perfectly side by side.
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOY = Path(__file__).parent.parent / "tests" / "data" / "toy_task"
N_ITEMS = 4

pytestmark = pytest.mark.skipif(
    subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0 if shutil.which("sinfo") else True,
    reason="no Slurm cluster answers (make slurm-up starts a one-node one)")


@pytest.fixture
def project(tmp_path):
    shutil.copytree(TOY, tmp_path / "toy_task")
    return tmp_path


def run(project: Path, *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "toy_task",
                           "--agent=baseline", "--steps=1", "--fresh", *args], cwd=project, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    return time.perf_counter() - started


def test_item_locally(benchmark, project):
    benchmark.pedantic(run, args=(project,), rounds=3, iterations=1)


def test_item_as_a_slurm_job(benchmark, project):
    benchmark.pedantic(run, args=(project, "--slurm"), rounds=3, iterations=1)


def test_makespan_of_n_items_on_the_cluster(benchmark, project):
    one = min(run(project, "--slurm") for _ in range(2))
    cpus = int(subprocess.run(["sinfo", "-h", "-o", "%C"], capture_output=True, text=True).stdout.split("/")[-1])
    slots = max(1, cpus // 2)  # the toy task asks for its default 2 CPUs
    makespan = benchmark.pedantic(run, args=(project, "--slurm", f"--seeds={N_ITEMS}"), rounds=2, iterations=1)
    best = benchmark.stats.stats.min
    benchmark.extra_info.update(items=N_ITEMS, slots=slots, one_item_s=round(one, 2),
                                ratio=round(best / (max(1, N_ITEMS / slots) * one), 3))
    assert makespan > 0

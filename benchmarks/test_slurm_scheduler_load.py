"""On-demand benchmark of what a --slurm session asks of the scheduler (issue 49): sdiag's request counts
over a session of N tiny items, and the controller's own CPU time.

    make slurm-up
    .venv/bin/python -m pytest benchmarks/test_slurm_scheduler_load.py -s -p no:cacheprovider -k items50
    .venv/bin/python -m pytest benchmarks/test_slurm_scheduler_load.py -s -p no:cacheprovider -k items500  # ~25 min
    FMLBENCH_SCHED_ITEMS=200 .venv/bin/python -m pytest benchmarks/test_slurm_scheduler_load.py -s  # any other size
    # the same session with the code of another revision (e.g. before job arrays), for a before/after:
    FMLBENCH_SCHED_REV=6332fa3 FMLBENCH_SCHED_ITEMS=50 .venv/bin/python -m pytest benchmarks/test_slurm_scheduler_load.py -s

Needs root on the cluster (``sdiag -r`` resets the counters) and the cluster to itself while it runs: sdiag
counts every client's requests, not this session's alone. Each session is the toy task with the baseline
agent, one step, ``--seeds=N``, ``--slurm`` (with FMLBENCH_SCHED_POLL, default: the option's default).
The goals of issue 49: at most one job-state query per poll interval (30 s by default) for one array, one
submission per array, and the controller's CPU time under 2% of the session's wall time.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOY = REPO / "tests" / "data" / "toy_task"
# the session sizes measured: 50 (a few minutes) and 500 (the goal), or the one FMLBENCH_SCHED_ITEMS names
SIZES = [int(os.environ["FMLBENCH_SCHED_ITEMS"])] if os.environ.get("FMLBENCH_SCHED_ITEMS") else [50, 500]
POLL = os.environ.get("FMLBENCH_SCHED_POLL")
REV = os.environ.get("FMLBENCH_SCHED_REV")
# sdiag's message types, as the issue counts them
COUNTED = {"job-info": ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_JOB_USER_INFO"),
           "node-info": ("REQUEST_NODE_INFO",), "partition-info": ("REQUEST_PARTITION_INFO",),
           "submissions": ("REQUEST_SUBMIT_BATCH_JOB",)}

pytestmark = pytest.mark.skipif(
    shutil.which("sdiag") is None or subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0,
    reason="no Slurm cluster answers (make slurm-up starts a one-node one)")


def rpc_counts() -> dict[str, int]:
    """sdiag's count per RPC message type."""
    text = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = text.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)}


def logged_commands(folder: Path, log: Path) -> str:
    """Wrappers of Slurm's client commands that log each call of this session: its own requests, which sdiag
    (counting every client of the cluster) cannot tell apart from other users'. Returns the PATH to use."""
    folder.mkdir()
    for name in ("sbatch", "scontrol", "squeue", "sinfo", "sacct", "scancel"):
        wrapper = folder / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec {shutil.which(name)} "$@"\n')
        wrapper.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def own_calls(log: Path) -> dict[str, int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {"own job-state queries": sum(1 for line in lines if line.startswith(("scontrol -o show job", "squeue",
                                                                                   "sacct"))),
            "own sinfo calls": sum(1 for line in lines if line.startswith("sinfo")),
            "own sbatch calls": sum(1 for line in lines if line.startswith("sbatch"))}


def run_session(project: Path, code: Path | None, items: int) -> tuple[dict[str, float | int | str], str]:
    """The session's figures, and its output's end where it did not pass whole (else "")."""
    env = dict(os.environ)
    log = project / "slurm-calls.log"
    env["PATH"] = logged_commands(project / "wrappers", log)
    if code is not None:  # the other revision's package first on the path
        env["PYTHONPATH"] = f"{code}{os.pathsep}{env.get('PYTHONPATH', '')}"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "toy_task", "--agent=baseline",
            "--steps=1", f"--seeds={items}", "--fresh", "--slurm", *([f"--slurm-poll={POLL}"] if POLL else [])]
    subprocess.run(["sdiag", "-r"], check=True, capture_output=True)
    # the controller's CPU time: its own and that of the Slurm commands it ran (children it waited for);
    # the jobs run under slurmd, not here
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = rpc_counts()
    figures: dict[str, float | int | str] = {name: sum(counts.get(t, 0) for t in types)
                                             for name, types in COUNTED.items()}
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    figures.update(own_calls(log))
    figures.update(items=items, wall_s=round(wall, 1), controller_cpu_s=round(cpu, 2),
                   controller_cpu_share=round(cpu / wall, 4),
                   job_info_per_30s=round(figures["job-info"] / (wall / 30), 2))
    # the figures stand whatever became of an item (a harness error on a busy machine): they are printed first
    summary = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else ["no output"]
    figures["session"] = summary[0]
    return figures, "" if done.returncode == 0 else done.stdout[-3000:]


@pytest.fixture
def project(tmp_path):
    shutil.copytree(TOY, tmp_path / "toy_task")
    return tmp_path


@pytest.fixture
def code(tmp_path):
    """The package of FMLBENCH_SCHED_REV (a git worktree), or None for this checkout's."""
    if not REV:
        yield None
        return
    tree = tmp_path / "rev"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), REV], check=True,
                   capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


@pytest.mark.parametrize("items", SIZES, ids=[f"items{n}" for n in SIZES])
def test_scheduler_requests_and_controller_cpu_of_a_session(project, code, items):
    before = rpc_counts()
    figures, failed = run_session(project, code, items)
    print(f"\nrevision {REV or 'this checkout'}: {figures}\n(sdiag before the reset: "
          f"{ {name: sum(before.get(t, 0) for t in types) for name, types in COUNTED.items()} })")
    assert not failed, failed
    if REV:
        return  # the figures of another revision are for comparison only
    assert figures["own sbatch calls"] <= -(-items // 1001)  # one per array (MaxArraySize 1001 here)
    assert figures["own job-state queries"] <= figures["wall_s"] / 30 + 2  # default poll: one array, one query
    if items >= 200:  # below that, pytest's own start and the final tables (~2.5 s of CPU) dominate
        assert figures["controller_cpu_share"] < 0.02

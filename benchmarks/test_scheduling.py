"""On-demand benchmark of the session scheduler on items of very different lengths (issue 12, item 2).

    .venv/bin/python -m pytest benchmarks/test_scheduling.py --benchmark-only -s

Target: a session finishes within 10% of max(longest item, total / N), N workers. Three real tasks
(privacy_opacus, causality_gcastle, fairness_fairlearn) run with ``--agent=baseline``: first each one
alone (its duration, and the earlier run the scheduler then reads its expected duration from), then
all three with ``-n 2``, once with the plugin's scheduling (longest-expected first, work stealing) and
once with xdist's ``--dist load`` for comparison. A session's length is its makespan, from the first
run's start to the last run's end in the run records (pytest's and the workers' start-up excluded);
the whole command's wall time is reported beside it. Meaningful on a quiet machine only: two items
that share two busy cores each take longer than alone. The load average is reported with the figures.
"""

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
TASKS = ["privacy_opacus", "causality_gcastle", "fairness_fairlearn"]
WORKERS = 2
TARGET = 1.10


def run_pytest(out: Path, tasks: list[str], *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           # the tables' exploration metrics are not what is measured here
           "FMLBENCH_ENCODER": "none"}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--agent=baseline",
            f"--fmlbench-out={out}", *args, *(str(REPO / "task_suites" / t) for t in tasks)]
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return wall


def best_possible(durations: list[float], workers: int) -> float:
    """The shortest makespan any assignment of these indivisible items to the workers achieves (they are
    few: try them all). max(longest, total/N) is a lower bound that uneven items may not reach."""
    from itertools import product

    best = float("inf")
    for assignment in product(range(workers), repeat=len(durations)):
        loads = [0.0] * workers
        for worker, duration in zip(assignment, durations):
            loads[worker] += duration
        best = min(best, max(loads))
    return best


def spans(out: Path, tasks: list[str] = TASKS) -> dict[str, tuple[datetime, datetime]]:
    """Each task's (started, finished) from its run record."""
    out_spans = {}
    for task in tasks:
        (record,) = (out / "runs" / task).glob("*/record.json")
        data = json.loads(record.read_text())
        out_spans[task] = (datetime.fromisoformat(data["started_at"]), datetime.fromisoformat(data["finished_at"]))
    return out_spans


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """Each item alone: its duration in seconds; the run directory keeps its record for the scheduler."""
    out = tmp_path_factory.mktemp("fmlbench")
    durations = {}
    for task in TASKS:
        run_pytest(out, [task])
        start, end = spans(out, [task])[task]
        durations[task] = (end - start).total_seconds()
    return out, durations


@pytest.mark.parametrize("dist", ["plugin", "load"], ids=["longest-first-worksteal", "dist-load"])
def test_uneven_session_finishes_near_the_bound(benchmark, alone, dist):
    out, durations = alone
    args = ["-n", str(WORKERS), "--fresh"] + (["--dist", "load"] if dist == "load" else [])
    wall = benchmark.pedantic(run_pytest, args=(out, TASKS, *args), rounds=1, iterations=1)
    session = spans(out)
    makespan = (max(e for _, e in session.values()) - min(s for s, _ in session.values())).total_seconds()
    bound = max(max(durations.values()), sum(durations.values()) / WORKERS)
    ratio = makespan / bound
    load1, load5, _ = os.getloadavg()
    order = sorted(session, key=lambda t: session[t][0])
    info = {"alone_s": {t: round(d, 1) for t, d in durations.items()}, "bound_s": round(bound, 1),
            "best_possible_s": round(best_possible(list(durations.values()), WORKERS), 1),
            "makespan_s": round(makespan, 1), "command_wall_s": round(wall, 1), "ratio": round(ratio, 3),
            "start_order": order, "in_session_s": {t: round((e - s).total_seconds(), 1) for t, (s, e) in session.items()},
            "loadavg_1_5": [round(load1, 2), round(load5, 2)], "cpus": os.cpu_count()}
    benchmark.extra_info.update(info)
    print(f"\n[{dist}] {json.dumps(info)}")
    if dist == "plugin":
        assert ratio <= TARGET, f"target: makespan <= {TARGET} x max(longest, total/{WORKERS}); got {info}"

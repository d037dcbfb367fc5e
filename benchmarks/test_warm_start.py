"""On-demand benchmarks of warm interpreters (issue 23): a small step costs its compute, not Python's start-up.

    .venv/bin/python -m pytest benchmarks/test_warm_start.py --benchmark-only -s

Both compare warm against cold in one run, alternating, so that the machine's load falls on both alike
(figures from a busy machine are relative figures: the same run, the same load).

* ``test_fairness_step_share``: validation steps of ``fairness_fairlearn`` (the experiment in its
  sandbox, then the pristine evaluator, and the harness's own work between them), warm and cold.
  A copy of the task times its runner's and its evaluator's ``main()``: that is the step's compute;
  the rest of the step's wall time is start-up and harness. Target: at most 10% of a warm step.
* ``test_lite_random_search``: ``--agent=random-search --steps=10`` on every ``lite`` task, one task at
  a time, warm then ``--cold-start``, each a fresh run (prepare, 10 steps, final validation and test).
  Target: the warm session at least 3 times faster than the cold one.

Measured once (2 cores shared with other work; both tests in one session, 67 min), neither target met:

* fairness step (load average 8.4): warm 2.30 s a step of which 1.21 s compute (start-up and harness
  48.6%), cold 13.28 s of which 1.04 s compute (92.3%): warm steps 5.8 times faster. What is left is
  mostly the interpreter's exit (a fork's finalization copies, page by page, the ~70 MB of the parent
  it touches: 0.15-0.25 s per command) and the step's bubblewrap sandbox (~40 ms per experiment).
* lite random search (load average from 8.0 down to 1.1 while it ran, so per-task pairs are noisy): warm
  1788 s, cold 2143 s, 1.2 times. Per task, warm/cold in s: continual_learning_pycil 363.5/450.2,
  data_efficiency_usb 532.7/553.2, generalization_domainbed 107.5/196.9, generalization_domainbed_officehome
  478.8/384.8 (the warm session ran under the higher load), privacy_opacus 74.0/228.0, privacy_privacymeter
  60.4/93.9, robustness_and_reliability_art 127.6/151.8, robustness_openood 43.6/84.1. These steps spend
  tens of seconds training: start-up is a small part of them, so 3x cannot come from start-up alone.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace

REPO = Path(__file__).parent.parent
STEPS = 6
SHARE_TARGET = 0.10
SPEEDUP_TARGET = 3.0

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# appended to a copy of the runner and of the evaluator: how long main() itself took
TIMED_MAIN = '''
if __name__ == "__main__":
    import json as _json, sys as _sys, time as _time
    _started = _time.perf_counter()
    main()
    _spent = _time.perf_counter() - _started
    _where = _sys.argv[_sys.argv.index("{flag}") + 1]
    open({target}, "w").write(_json.dumps(_spent))
'''


def _timed_task(tmp_path: Path) -> Path:
    task = tmp_path / "fairness_fairlearn"
    shutil.copytree(REPO / "task_suites" / "fairness_fairlearn", task)
    for path, flag, target in ((task / "workspace" / "train.py", "--out", '_where + "/compute.json"'),
                               (task / "harness" / "evaluate.py", "--result", '_where + ".compute.json"')):
        source = path.read_text()
        cut = source.rindex('if __name__ == "__main__":')
        path.write_text(source[:cut] + TIMED_MAIN.format(flag=flag, target=target))
    return task


def _step(ws: Workspace, name: str) -> dict:
    started = time.perf_counter()
    outcome = ws.run_split("val", name)
    wall = time.perf_counter() - started
    assert outcome.success, outcome.error
    experiment = json.loads((ws.root / "out" / "val" / "compute.json").read_text())
    evaluator = json.loads((ws.root / "verdicts" / "val.json.compute.json").read_text())
    return {"step_s": wall, "compute_s": experiment + evaluator, "metric": outcome.metric}


def test_fairness_step_share(benchmark, tmp_path):
    task = load_task(_timed_task(tmp_path) / "task.yaml")
    env = scrubbed_env({})
    lines: list[str] = []
    pool = warm.pool_for(task, tmp_path / "logs", lines.append, True, hidden=[task.root, tmp_path], gpus=False)
    try:
        hot = Workspace.create(task, tmp_path / "warm", env, tmp_path / "logs", True, pool)
        cold = Workspace.create(task, tmp_path / "cold", env, tmp_path / "logs", True, None)
        _step(hot, "warm_up")  # waits for the experiments' parent to finish its imports
        steps: dict[str, list[dict]] = {"warm": [], "cold": []}

        def alternate():
            for i in range(STEPS):
                steps["cold"].append(_step(cold, f"cold_{i}"))
                steps["warm"].append(_step(hot, f"warm_{i}"))

        benchmark.pedantic(alternate, rounds=1, iterations=1)
    finally:
        pool.close()
    assert lines == [], lines  # every warm command started warm
    assert {s["metric"] for s in steps["warm"] + steps["cold"]} == {task.spec.baseline.val}
    info = {}
    for mode, runs in steps.items():
        step = statistics.median(s["step_s"] for s in runs)
        compute = statistics.median(s["compute_s"] for s in runs)
        share = statistics.median(1 - s["compute_s"] / s["step_s"] for s in runs)
        info[mode] = {"step_s": round(step, 3), "compute_s": round(compute, 3), "startup_and_harness_share": round(share, 3)}
    info["speedup"] = round(info["cold"]["step_s"] / info["warm"]["step_s"], 1)
    info["loadavg_1_5"] = [round(x, 2) for x in os.getloadavg()[:2]]
    info["cpus"] = os.cpu_count()
    benchmark.extra_info.update(info)
    print(f"\n[fairness_fairlearn validation step, median of {STEPS}] {json.dumps(info)}")
    assert info["warm"]["startup_and_harness_share"] <= SHARE_TARGET, info


LITE = sorted(p.parent.name for p in (REPO / "task_suites").glob("*/task.yaml")
              if "lite" in load_task(p).spec.markers)


def _session(out: Path, task: str, *args: str) -> float:
    env = {**os.environ, "FMLBENCH_ENCODER": "none"}  # the tables' exploration metrics are not measured
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--agent=random-search", "--steps=10",
            "--fresh", f"--fmlbench-out={out}", *args, str(REPO / "task_suites" / task)]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return wall


def _record(out: Path, task: str) -> dict:
    (path,) = (out / "runs" / task).glob("*/record.json")
    return json.loads(path.read_text())


def test_lite_random_search(benchmark, tmp_path):
    walls: dict[str, dict[str, float]] = {"warm": {}, "cold": {}}

    def both():
        for task in LITE:
            walls["warm"][task] = _session(tmp_path / "warm", task)
            walls["cold"][task] = _session(tmp_path / "cold", task, "--cold-start")
            print(f"\n[lite random search] {task}: warm {walls['warm'][task]:.1f} s, cold {walls['cold'][task]:.1f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)

    benchmark.pedantic(both, rounds=1, iterations=1)
    for task in LITE:
        hot, cold = _record(tmp_path / "warm", task), _record(tmp_path / "cold", task)
        # the same seeds give the same knobs: warm or cold, every step scores the same
        assert (hot["best_val"], hot["test_metric"]) == (cold["best_val"], cold["test_metric"]), task
    totals = {mode: sum(w.values()) for mode, w in walls.items()}
    info = {"tasks": LITE, "per_task_s": {t: [round(walls["warm"][t], 1), round(walls["cold"][t], 1)] for t in LITE},
            "warm_s": round(totals["warm"], 1), "cold_s": round(totals["cold"], 1),
            "speedup": round(totals["cold"] / totals["warm"], 2),
            "loadavg_1_5": [round(x, 2) for x in os.getloadavg()[:2]], "cpus": os.cpu_count()}
    benchmark.extra_info.update(info)
    print(f"\n[lite random search, 10 steps, warm vs cold] {json.dumps(info)}")
    assert info["speedup"] >= SPEEDUP_TARGET, info

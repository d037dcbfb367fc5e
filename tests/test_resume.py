"""A killed session loses at most the step in flight; re-running resumes, then reuses; --fresh recomputes."""

import json
import os
import signal
import subprocess
import sys
import time

from conftest import load_record

ARGS = ["-m", "pytest", "-p", "no:cacheprovider", "--agent=random-search", "--steps=6", "toy_task"]


def steps_file(project):
    found = list((project / "reports" / "fmlbench" / "runs" / "toy_task").glob("*/steps.jsonl"))
    return found[0] if found else None


def test_kill_then_resume_then_reuse_then_fresh(pytester, toy):
    proc = subprocess.Popen([sys.executable, *ARGS], cwd=pytester.path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        path = steps_file(pytester.path)
        if path and len(path.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(steps_file(pytester.path).read_text().splitlines())
    assert 2 <= killed_at < 6
    assert load_record(pytester.path)["status"] == "running"
    first_logs = {p.name: p.stat().st_mtime_ns for p in steps_file(pytester.path).parent.glob("logs/step_*_val.log")}
    first_steps = [json.loads(line) for line in steps_file(pytester.path).read_text().splitlines()]

    resumed = pytester.runpytest_subprocess(*ARGS[2:])
    resumed.assert_outcomes(passed=1)
    resumed.stdout.fnmatch_lines([f"*resumed toy_task[[]seed0] after {killed_at} recorded step(s)*"])
    record = load_record(pytester.path)
    assert record["status"] == "finished" and record["steps_used"] == 6 and record["resumed_from_step"] == killed_at
    steps = [json.loads(line) for line in steps_file(pytester.path).read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert steps[:killed_at] == first_steps[:killed_at]  # replayed, identical
    # recorded steps were not executed again
    for name, mtime in first_logs.items():
        if int(name.split("_")[1]) <= killed_at:
            assert (steps_file(pytester.path).parent / "logs" / name).stat().st_mtime_ns == mtime

    again = pytester.runpytest_subprocess(*ARGS[2:])
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*reused 1 finished run(s) recorded earlier (pass --fresh to recompute): toy_task[[]seed0]*"])
    assert load_record(pytester.path)["started_at"] == record["started_at"]

    fresh = pytester.runpytest_subprocess(*ARGS[2:], "--fresh")
    fresh.assert_outcomes(passed=1)
    assert "reused" not in fresh.stdout.str()
    fresh_record = load_record(pytester.path)
    assert fresh_record["started_at"] != record["started_at"] and fresh_record["resumed_from_step"] is None


def test_a_changed_budget_is_a_different_run(pytester, toy, bench):
    bench("--agent=baseline", "toy_task").assert_outcomes(passed=1)
    result = bench("--agent=random-search", "--steps=2", "toy_task")
    assert "reused" not in result.stdout.str()

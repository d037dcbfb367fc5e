"""--slurm on a real one-node Slurm cluster (scripts/slurm-local.sh), with the toy task.

Skipped where Slurm's binaries are absent; FMLBENCH_REQUIRE_SLURM=1 (set by .ci/run) turns that skip
into a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import REPO, junit_props, load_record

from pytest_fmlbench.slurm import cluster

FAKE_KEY = "sk-fmlbench-fake-0123456789abcdefghijklmnop"

SLOW_AGENT = """
    import hashlib, os, time
    from pytest_fmlbench import Agent

    class Slow(Agent):
        name = "slow"

        def run(self, session):
            # the key must reach the job through its environment; only whether it did is written down
            key = hashlib.sha256(os.environ.get("OPENAI_API_KEY", "").encode()).hexdigest()
            seen = "key-present" if key == {key!r} else "key-absent"
            while True:
                time.sleep(float(os.environ.get("FMLBENCH_TEST_STEP_SLEEP", "1.5")))
                session.run_step("baseline", plan=seen)
""".replace("{key!r}", repr(hashlib.sha256(FAKE_KEY.encode()).hexdigest()))


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        reason = "Slurm is not installed (slurmctld, munged): `make slurm-up` installs and starts a one-node cluster"
        if os.environ.get("FMLBENCH_REQUIRE_SLURM") == "1":
            pytest.fail(f"FMLBENCH_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)
    # xdist workers share one cluster: one of them starts it
    with FileLock("/tmp/fmlbench-slurm-up.lock"):
        subprocess.run([str(REPO / "scripts" / "slurm-local.sh"), "up"], check=True, capture_output=True)


@pytest.fixture
def project(pytester: pytest.Pytester, toy: Path, slurm_cluster) -> Path:
    return pytester.path


def jobs_of(project: Path, out: str = "reports/fmlbench") -> dict[str, str]:
    path = project / out / "slurm" / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def steps_of(project: Path, out: str = "reports/fmlbench") -> list[dict]:
    files = list((project / out / "runs" / "toy_task").glob("*/steps.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def start(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_for(condition, timeout: float = 120, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def active(job_ids) -> dict[str, str]:
    return {jid: s for jid, s in cluster.states(list(job_ids)).items() if s in cluster.ACTIVE}


def test_two_items_side_by_side_match_local_run(project: Path, bench) -> None:
    common = ("toy_task", "--agent=baseline", "--steps=2", "--seeds=2", "-o", "junit_family=xunit1")
    on_slurm = bench(*common, "--slurm", "--junitxml=slurm.xml")
    on_slurm.assert_outcomes(passed=2)
    on_slurm.stdout.fnmatch_lines(["*slurm: submitted 2 job(s), re-attached to 0*",
                                   "*toy_task?seed0? slurm job * done*", "*Raw Performance*"])
    local = bench(*common, "--fmlbench-out=local", "--junitxml=local.xml")
    local.assert_outcomes(passed=2)
    for seed in (0, 1):
        remote_props = junit_props(project / "slurm.xml", f"toy_task[seed{seed}]")
        local_props = junit_props(project / "local.xml", f"toy_task[seed{seed}]")
        assert set(remote_props) == set(local_props)
        for key in ("test_metric", "best_val", "final_val", "baseline_test"):
            assert float(remote_props[key]) == pytest.approx(float(local_props[key]), abs=1e-9), key
        assert remote_props["status"] == local_props["status"] == "finished"
        assert remote_props["sandbox"] == local_props["sandbox"]
    # both jobs ran at the same time
    records = [json.loads(p.read_text()) for p in (project / "reports/fmlbench/runs/toy_task").glob("*/record.json")]
    (a_start, a_end), (b_start, b_end) = sorted((r["started_at"], r["finished_at"]) for r in records)
    assert b_start < a_end, "the two items' jobs did not overlap"
    assert len(jobs_of(project)) == 2


def test_scancel_fails_the_item_in_one_line_and_a_rerun_resumes(project: Path, bench, write_agent) -> None:
    agent = write_agent(SLOW_AGENT, cls="Slow")
    args = ("toy_task", f"--agent={agent}", "--steps=4", "--slurm")
    proc = start(project, *args)
    wait_for(lambda: len(steps_of(project)) >= 1, what="a first recorded step")
    (job_id,) = jobs_of(project).values()
    subprocess.run(["scancel", job_id], check=True)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    line = next(l for l in out.splitlines() if f"Slurm job {job_id} is CANCELLED" in l)
    assert f"{job_id}_0_log.err" in line and "run the same command again" in line
    recorded = len(steps_of(project))
    assert 1 <= recorded < 4
    rerun = bench(*args)
    rerun.assert_outcomes(passed=1)
    rerun.stdout.fnmatch_lines(["*resumed toy_task?seed0? after * recorded step(s)*"])
    record = load_record(project)
    assert record["resumed_from_step"] >= 1 and record["status"] == "finished"
    assert sorted(s["step"] for s in steps_of(project)) == [1, 2, 3, 4]  # nothing ran twice
    assert jobs_of(project)[record["run_id"]] != job_id  # a new job resumed the run


def test_scontrol_requeue_resumes_from_the_step_records(project: Path, write_agent) -> None:
    agent = write_agent(SLOW_AGENT, cls="Slow")
    proc = start(project, "toy_task", f"--agent={agent}", "--steps=4", "--slurm", "-rA")
    wait_for(lambda: len(steps_of(project)) >= 1, what="a first recorded step")
    (job_id,) = jobs_of(project).values()
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    record = load_record(project)
    assert record["status"] == "finished" and record["resumed_from_step"] >= 1, record
    assert sorted(s["step"] for s in steps_of(project)) == [1, 2, 3, 4]
    assert list(jobs_of(project).values()) == [job_id]  # the same job, requeued: nothing submitted twice


SIGINT_BIT = 1 << (signal.SIGINT - 1)


def sigint_state(pid: int) -> dict[str, bool]:
    """How the process's main thread treats SIGINT: ignored, blocked, caught (from /proc/PID/status)."""
    masks = {k: int(v, 16) for k, v in (line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
             if k in ("SigIgn", "SigBlk", "SigCgt")}
    return {"ignored": bool(masks["SigIgn"] & SIGINT_BIT), "blocked": bool(masks["SigBlk"] & SIGINT_BIT),
            "caught": bool(masks["SigCgt"] & SIGINT_BIT)}


def jobs_from(project: Path) -> list[str]:
    """Every job Slurm knows that was submitted from this project folder (recorded by us or not)."""
    listed = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True, check=True).stdout
    return [jid for jid, _, workdir in (line.partition(" ") for line in listed.splitlines())
            if Path(workdir.strip()) == project]


@pytest.mark.parametrize("moment", ["during submission", "while waiting for jobs"])
def test_ctrl_c_cancels_every_submitted_job(project: Path, write_agent, moment) -> None:
    agent = write_agent(SLOW_AGENT, cls="Slow")
    seeds = 6 if moment == "during submission" else 2
    proc = start(project, "toy_task", f"--agent={agent}", "--steps=20", f"--seeds={seeds}", "--slurm")
    if moment == "during submission":
        deadline = time.monotonic() + 120
        while not jobs_of(project) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert jobs_of(project), "no job was submitted"
    else:
        wait_for(lambda: len(jobs_of(project)) == 2 and len(steps_of(project)) >= 1, what="two running jobs")
    # whatever the process that started it did to SIGINT, the controller takes Ctrl-C
    assert sigint_state(proc.pid) == {"ignored": False, "blocked": False, "caught": True}
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED and "KeyboardInterrupt" in out, out
    assert "[fmlbench] Ctrl-C: cancelled this session's Slurm jobs (" in out, out
    wait_for(lambda: not jobs_from(project), timeout=30, what="the session's jobs to leave the queue")
    assert set(jobs_of(project).values()) <= set(re.findall(r"\d+", out.split("cancelled this session's Slurm jobs")[1].splitlines()[0]))


def test_a_controller_started_with_sigint_ignored_and_blocked_still_takes_ctrl_c(project: Path, write_agent) -> None:
    """A shell's background job, a supervisor or a test runner's worker can hand SIGINT on ignored or blocked."""
    agent = write_agent(SLOW_AGENT, cls="Slow")

    def deaf_to_ctrl_c() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "toy_task", f"--agent={agent}",
                             "--steps=20", "--slurm"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=deaf_to_ctrl_c)
    wait_for(lambda: len(steps_of(project)) >= 1, what="a first recorded step")
    assert sigint_state(proc.pid) == {"ignored": False, "blocked": False, "caught": True}
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED and "KeyboardInterrupt" in out, out
    wait_for(lambda: not jobs_from(project), timeout=30, what="the session's jobs to leave the queue")


def test_detach_then_reattach_submits_nothing_twice_and_no_key_in_files(project: Path, bench, write_agent,
                                                                       monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    agent = write_agent(SLOW_AGENT, cls="Slow")
    # in the harness's process, the agent sees the job's environment (an agent's own process never holds a
    # key: tests/test_agent_sandbox.py); so the key is shown to reach the job, and still no file
    args = ("toy_task", f"--agent={agent}", "--agent-in-process", "--steps=3", "--seeds=2", "--slurm", "-rs")
    detached = bench(*args, "--slurm-detach")
    detached.assert_outcomes(skipped=2)
    detached.stdout.fnmatch_lines(["*slurm: submitted 2 job(s), re-attached to 0*",
                                   "*--slurm-detach: submitted Slurm job * run the same command again*"])
    submitted = jobs_of(project)
    assert len(submitted) == 2 and active(submitted.values())
    again = bench(*args, "--slurm-detach")  # the jobs are still running: re-attached, not resubmitted
    again.stdout.fnmatch_lines(["*slurm: submitted 0 job(s), re-attached to 2*"])
    attached = bench(*args)
    attached.assert_outcomes(passed=2)
    assert jobs_of(project) == submitted
    assert len(list((project / "reports/fmlbench/slurm").glob("*_submitted.pkl"))) == 2
    collected = bench(*args)  # everything finished: collected from the records, no job
    collected.assert_outcomes(passed=2)
    collected.stdout.fnmatch_lines(["*reused 2 finished run(s)*"])
    assert {s["plan"] for s in steps_of(project)} == {"key-present"}
    # the whole project: the output folder (records, submitit's pickles and logs) and everything beside it
    leaks = [str(p) for p in project.rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()]
    assert not leaks, leaks


@pytest.mark.parametrize("extra, message", [
    (("-n", "2"), "--slurm runs each item as its own Slurm job: drop -n*"),
    (("--slurm-opt", "colour=blue"), "*--slurm-opt: unknown Slurm parameter 'colour'*"),
    (("--slurm-partition", "nowhere"), "*--slurm-partition: no partition 'nowhere' on this cluster (it has: debug)*"),
])
def test_bad_slurm_input_is_one_line_and_writes_nothing(project: Path, bench, extra, message) -> None:
    result = bench("toy_task", "--agent=baseline", "--steps=1", "--slurm", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *{message}"])
    assert not (project / "reports").exists()


def test_slurm_not_reachable_is_one_line(project: Path, bench, monkeypatch) -> None:
    conf = project / "elsewhere.conf"
    # a controller on a port nobody listens on
    conf.write_text(Path("/etc/slurm/slurm.conf").read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
                    .replace("MessageTimeout", "#"))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    result = bench("toy_task", "--agent=baseline", "--steps=1", "--slurm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --slurm: the Slurm controller does not answer*"])
    assert not (project / "reports").exists()
    # a controller that stops answering while items wait: their jobs may be running, so nothing fails
    assert cluster.states(["1"]) == {"1": cluster.UNREACHABLE} and cluster.UNREACHABLE in cluster.ACTIVE


def test_readme_cluster_command_on_two_real_tasks(pytester: pytest.Pytester, slurm_cluster) -> None:
    """The README's commands, as written (the repository's pytest configuration: testpaths = task_suites)."""
    readme = (REPO / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("pytest ") and "--slurm" in line
                and "continual_learning" in line]
    assert len(commands) == 2, commands
    out = pytester.path / "out"
    detach_cmd, run_cmd = sorted(commands, key=lambda c: "--slurm-detach" not in c)

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(f"{sys.executable} -m {command} -p no:cacheprovider --fmlbench-out={out} -rA",
                              shell=True, cwd=REPO, capture_output=True, text=True, timeout=900)

    detached = run(detach_cmd)
    submitted = json.loads((out / "slurm" / "jobs.json").read_text())
    assert detached.returncode == 0, detached.stdout[-3000:]
    assert "slurm: submitted 2 job(s)" in detached.stdout
    finished = run(run_cmd)
    assert finished.returncode == 0, finished.stdout[-3000:]
    # the detached jobs, re-attached or (when they were quicker) collected from their records: none submitted again
    assert "slurm: submitted 0 job(s)" in finished.stdout
    assert json.loads((out / "slurm" / "jobs.json").read_text()) == submitted
    records = [json.loads(p.read_text()) for p in out.glob("runs/*/*/record.json")]
    assert sorted(r["task"] for r in records) == ["continual_learning_continual_learning", "robustness_openood"]
    assert all(r["status"] == "finished" and r["test_metric"] is not None for r in records), records
    assert "Raw Performance" in finished.stdout

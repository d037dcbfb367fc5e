import os
import sys
import time

import pytest

from pytest_fmlbench import devices
from pytest_fmlbench.executor import format_command, run_command, scrubbed_env


def test_secrets_never_reach_experiments():
    env = scrubbed_env(base={"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "a", "MY_SECRET": "s",
                             "GITHUB_TOKEN": "t", "OPENROUTER_API_KEY": "o", "PATH": "/bin", "HOME": "/root"})
    assert set(env) >= {"PATH", "HOME"}
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_SECRET", "GITHUB_TOKEN", "OPENROUTER_API_KEY"} & set(env)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = run_command([sys.executable, "-c", script], cwd=tmp_path, env=dict(os.environ), timeout_s=2,
                         log_path=tmp_path / "log.txt")
    assert result.timed_out and not result.ok
    assert time.monotonic() - start < 30
    assert "timed out after 2 s" in result.describe_failure("val run", 2)
    child = int(pid_file.read_text())
    # SIGKILL is sent before run_command returns; the child dies when next scheduled, which a busy machine
    # delays. Left alive it would sleep for 60 s, well past this wait.
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the experiment's child process survived the timeout"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_output_tail_and_exit_code(tmp_path):
    argv = format_command("{python} -c {code}", {"code": "import sys; print('x' * 5000); sys.exit('boom')"})
    result = run_command(argv, cwd=tmp_path, env=dict(os.environ), timeout_s=30, log_path=tmp_path / "l.log")
    # stdout and stderr come through two pipes read by two threads: the log interleaves them as they
    # arrive, in an order no one can know (here Python writes "boom" before it flushes stdout at exit,
    # and either reader may get its chunk first); the 5,000 x's may push "boom" out of the log's tail
    assert result.returncode == 1 and len(result.output_tail) == 1500 and result.stderr == "boom\n"
    # the failure a user reads ends with the error, whichever stream came last
    described = result.describe_failure("val run", 30)
    assert described.startswith("val run exited with code 1\n") and described.endswith("boom")
    assert "x" * 1000 in described


def test_stderr_is_kept_apart_from_stdout_with_its_head_and_tail(tmp_path):
    from pytest_fmlbench.executor import STDERR_KEEP_CHARS

    code = ("import sys; print('OUT'); sys.stderr.write('HEAD' + 'e' * 100000 + 'TAIL'); sys.stdout.flush(); "
            "sys.exit(3)")
    argv = format_command("{python} -c {code}", {"code": code})
    result = run_command(argv, cwd=tmp_path, env=dict(os.environ), timeout_s=30, log_path=tmp_path / "l.log")
    assert result.returncode == 3 and "OUT" not in result.stderr
    head, cut, tail = result.stderr.split("\n")
    assert head == "HEAD" + "e" * (STDERR_KEEP_CHARS - 4) and cut == "[... middle of the output cut ...]"
    assert tail == "e" * (STDERR_KEEP_CHARS - 4) + "TAIL"
    # both streams still go to the one log
    log = (tmp_path / "l.log").read_text()
    assert "OUT" in log and "HEAD" in log and "TAIL" in log
    short = run_command(format_command("{python} -c {code}", {"code": "import sys; sys.stderr.write('oops')"}),
                        cwd=tmp_path, env=dict(os.environ), timeout_s=30, log_path=tmp_path / "m.log")
    assert short.ok and short.stderr == "oops"


def test_old_records_read_without_the_new_fields():
    from pytest_fmlbench.agentkit import run_error
    from pytest_fmlbench.record import RunRecord, StepRecord

    old_step = StepRecord.model_validate({"step": 1, "action": "draft", "success": False, "error": "val run exited "
                                          "with code 1\nboom", "started_at": "2026-01-01T00:00:00Z",
                                          "snapshot": "snapshots/step_0001.json", "snapshot_sha256": "0" * 64})
    assert old_step.stderr is None and run_error(old_step) == "val run exited with code 1\nboom"
    new_step = old_step.model_copy(update={"stderr": "Traceback: boom"})
    assert run_error(new_step) == "Traceback: boom"
    assert run_error(new_step.model_copy(update={"success": True})) == ""
    fields = RunRecord.model_fields
    assert fields["llm_failed_calls"].default == 0 and not fields["llm_failed_calls"].is_required()


def test_worker_gpu_assignment(monkeypatch):
    devices.visible_gpus.cache_clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    try:
        assert devices.assigned_gpus(2) == ("6", "7")
        assert devices.assigned_gpus(1) == ("5",)
        assert devices.auto_workers(2) == 2
        assert devices.experiment_env(1)["CUDA_VISIBLE_DEVICES"] == "5"
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        devices.visible_gpus.cache_clear()
        assert devices.assigned_gpus(1) == () and devices.auto_workers(1) is None
        assert "CUDA_VISIBLE_DEVICES" not in devices.experiment_env(1)
    finally:
        devices.visible_gpus.cache_clear()


def test_closing_a_step_s_group_ends_what_is_left_in_it_and_removes_it(tmp_path):
    """What a step left in its control group (a process that ignores SIGTERM and one that takes its time
    to end) is killed, and the group's folders are gone once close returns."""
    import signal
    import subprocess

    import pytest

    from pytest_fmlbench import isolation

    try:
        group = isolation.step_limits(256, 64, False)
    except isolation.limits.LimitsUnavailable as exc:
        pytest.skip(str(exc))
    if group.backend == "rlimit":
        pytest.skip("no control group here: rlimits bound a step")
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)\n"
    procs = [subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, preexec_fn=group.enter)
             for _ in range(2)]
    for proc in procs:
        assert proc.stdout.readline() == b"ready\n"
    assert all(str(proc.pid) in (group.dirs[-1] / "cgroup.procs").read_text().split() for proc in procs)
    group.close()
    assert [proc.wait(timeout=5) for proc in procs] == [-signal.SIGKILL] * 2
    assert not any(directory.exists() for directory in group.dirs)


def test_a_deferred_group_is_made_only_for_a_command_that_runs_in_it(tmp_path, monkeypatch):
    """A step's group asked for ahead of a command that may bring its own (a warm step built ahead) is
    made only when a command is started in it: closed unused, nothing was ever made; a cold command
    started with it joins it, and it is removed once the command ended.

    What was made is counted at ``limits.create``, not by listing the parent group: other xdist workers
    make and remove groups of their own there meanwhile (CI failed once on such a listing)."""
    import pytest

    from pytest_fmlbench import isolation
    from pytest_fmlbench.isolation import limits

    try:
        unused = isolation.step_limits(256, 64, False, deferred=True)
    except isolation.limits.LimitsUnavailable as exc:
        pytest.skip(str(exc))
    if unused.backend == "rlimit":
        pytest.skip("no control group here: rlimits bound a step")
    unused.close()

    made: list = []
    create = limits.create

    def counted_create(*args, **kwargs):
        made.append(create(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(limits, "create", counted_create)
    never_used = isolation.step_limits(256, 64, False, deferred=True)
    assert isinstance(never_used, limits.Deferred) and never_used.made is not None
    never_used.close()
    assert made == []
    group = isolation.step_limits(256, 64, False, deferred=True)
    code = "print(open('/proc/self/cgroup').read())"
    result = run_command([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), timeout_s=30,
                         log_path=tmp_path / "log.txt", group=group)
    assert result.ok, result.output_tail
    assert len(made) == 1 and group.now() is made[0]
    assert made[0].dirs[-1].name in result.output_tail
    assert not any(directory.exists() for directory in made[0].dirs)


def test_a_group_closed_unwaited_is_emptied_at_once_and_removed_before_the_harness_ends(tmp_path):
    """A step whose own processes are known to be gone closes its group without waiting: what is left in
    it is killed at once, and the group is removed meanwhile, at the latest when the harness ends."""
    import signal
    import subprocess

    import pytest

    from pytest_fmlbench import isolation
    from pytest_fmlbench.isolation import limits

    groups = []
    for _ in range(3):
        try:
            groups.append(isolation.step_limits(256, 64, False))
        except isolation.limits.LimitsUnavailable as exc:
            pytest.skip(str(exc))
    if groups[0].backend == "rlimit":
        pytest.skip("no control group here: rlimits bound a step")
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)\n"
    procs = [subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, preexec_fn=group.enter)
             for group in groups]
    for proc in procs:
        assert proc.stdout.readline() == b"ready\n"
    for group in groups:
        group.close(wait=False)
    assert [proc.wait(timeout=5) for proc in procs] == [-signal.SIGKILL] * 3
    limits.finish_closing()
    assert not any(directory.exists() for group in groups for directory in group.dirs)


def test_meanwhile_runs_while_the_command_runs_and_what_it_raises_ends_it(tmp_path):
    """The harness's own work that need not wait for a command (the integrity check while the evaluator
    runs) is done while it runs: here the command waits for a file that only ``meanwhile`` makes. What
    ``meanwhile`` raises ends the command and reaches the caller."""
    flag = tmp_path / "flag"
    waits = [sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\n"
                                   "print('saw it')"]
    result = run_command(waits, cwd=tmp_path, env=scrubbed_env({}), timeout_s=60, log_path=tmp_path / "a.log",
                         meanwhile=flag.touch)
    assert result.ok and "saw it" in result.output_tail

    flag.unlink()
    pid_file = tmp_path / "pid"
    forever = [sys.executable, "-c", f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                                     "time.sleep(600)"]

    def fails() -> None:
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.01)
        raise RuntimeError("tampered")

    with pytest.raises(RuntimeError, match="tampered"):
        run_command(forever, cwd=tmp_path, env=scrubbed_env({}), timeout_s=600, log_path=tmp_path / "b.log",
                    meanwhile=fails)
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)


def test_a_commands_cpu_time_is_read_from_its_step_group(tmp_path):
    """A command started afresh (no warm parent's report) has its CPU time from its step's control group,
    its children's included: what compute beside the score counts."""
    import pytest

    from pytest_fmlbench import isolation

    try:
        group = isolation.step_limits(256, 64, False)
    except isolation.limits.LimitsUnavailable as exc:
        pytest.skip(str(exc))
    if group.cpu_seconds() is None:
        group.close()
        pytest.skip("no control group here counts a step's CPU time (rlimits, or cgroup v1 without cpuacct)")
    # a child of the command spends at least 0.3 s of CPU time by its own clock
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time\\n"
            "while time.process_time() < 0.3: pass'], check=True)")
    result = run_command([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), timeout_s=60,
                         log_path=tmp_path / "log.txt", group=group)
    assert result.ok, result.output_tail
    assert result.cpu_s is not None and result.cpu_s >= 0.3

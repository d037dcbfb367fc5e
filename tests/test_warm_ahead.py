"""Warm interpreters (isolation.warm), the next step built ahead of its request: it sees what a cold step
sees, is built when nothing runs or beside another command, and is discarded when anything it was built
from changed."""

import os
import re
import shutil
import time
import uuid
from pathlib import Path

import pytest

from leftover_processes import host_processes_with, none_left_with

from conftest import DATA
from warm_support import children_of, is_running, probe_of, run_experiment, run_steps, task_with_runner, warm_pool
from warm_probes import INTROSPECT

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.isolation.warm import built_ahead
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def test_a_step_built_ahead_sees_what_a_cold_step_sees(tmp_path, monkeypatch):
    """Once a step has ended, the next one's sandbox, control group, init and command process are built
    while nothing waits for them; the request then only says go. That step sees what a cold one sees.
    The control group the harness asks for at the request is then never made: the step runs in the one
    built with it, with the same limits."""
    from pytest_fmlbench.isolation import limits

    task = task_with_runner(tmp_path, INTROSPECT)
    cold, cold_log = run_experiment(task, tmp_path / "run", use_warm=False)
    asked: list[limits.StepGroup] = []
    monkeypatch.setattr(limits, "create", lambda *made, create=limits.create: asked.append(create(*made)) or asked[-1])
    lines: list[str] = []
    steps, used, discarded = run_steps(task, tmp_path / "run", 3, lines=lines)
    assert cold.ok and all(result.ok for result, _ in steps), [log[-2000:] for _, log in steps]
    assert (used, discarded) == (2, 0) and lines == []
    # the first step's own (nothing was built ahead of it); the next two ran in the groups built ahead
    assert len(asked) == 1, asked
    assert not steps[0][1].startswith("[warm] [built ahead]")
    for _, log in steps[1:]:
        assert log.startswith("[warm] [built ahead] [sandbox: bwrap] $ "), log[:200]
        before, after = probe_of(cold_log), probe_of(log)
        assert {key: (before[key], after[key]) for key in before if before[key] != after.get(key)} == {}
        assert after["pid"] == 2 and after["ppid"] == 1 and after["pids"] == [1, 2]
        assert after["proc_1_cmdline"][0] == "bwrap" and after["shm"] == after["home"] == after["var_tmp"] == []


def test_a_step_built_ahead_is_built_while_the_harness_waits_for_another_command(tmp_path, monkeypatch):
    """Built as soon as a command ended, the next step took the harness's interpreter lock while the
    harness finished that command and started the next one. Where the steps follow one another at once,
    it is built once the harness has started its next command (the experiment's next step while the
    evaluator runs, the evaluator's while the next experiment runs), or when that very step is asked for."""
    monkeypatch.setattr(built_ahead, "AHEAD_IDLE_S", 3600.0)  # never for the harness's idleness here
    monkeypatch.setattr(built_ahead, "AHEAD_GAP_S", 3600.0)   # every request comes right after the last command
    task = load_task(DATA / "toy_task" / "task.yaml")
    lines: list[str] = []
    pool = warm_pool(task, tmp_path, tmp_path / "logs", lines)
    try:
        ws = Workspace.create(task, tmp_path / "search", scrubbed_env({}), tmp_path / "logs", True, pool)
        manifest = ws.take_manifest()
        assert ws.run_split("val", "step0", manifest=manifest).success
        discarded = pool.ahead_discarded  # the prepare command's next run, not asked for again
        experiment, evaluator = pool.ahead["experiment"], pool.ahead["harness"]
        # the evaluator's start let the experiment's next step be built; beside it, it copies none of
        # the parent's memory (that would take a processor from the evaluator)
        assert experiment.released
        experiment.thread.join()
        assert experiment.failure is None and experiment.pid is not None and experiment.own_up_to == 0
        # nothing started since the evaluator ended: its next step waits, with nothing made yet
        assert not evaluator.released and evaluator.thread.is_alive()
        assert evaluator.pid is None and evaluator.group is None and evaluator.holder is None
        assert ws.run_split("val", "step1", manifest=manifest).success
        assert (pool.ahead_used, pool.ahead_discarded) == (2, discarded) and lines == []
        for name in ("step1_val.log", "step1_val_evaluate.log"):
            assert (tmp_path / "logs" / name).read_text().startswith("[warm] [built ahead]")
        # one experiment right after another: the step waiting to be built is built when asked for
        from pytest_fmlbench.workspace import _emptied

        out = ws.out_dir("val")
        _emptied(out)
        assert ws.experiment("val", out, "again0").ok
        waiting = pool.ahead["experiment"]
        assert not waiting.released and waiting.pid is None
        _emptied(out)
        assert ws.experiment("val", out, "again1").ok
        assert pool.ahead_used == 4 and (tmp_path / "logs" / "again1.log").read_text().startswith("[warm] [built ahead]")
    finally:
        pool.close()
    assert all(not ahead.thread.is_alive() for ahead in (experiment, evaluator, waiting))


def test_steps_that_come_after_a_pause_are_built_while_nothing_runs(tmp_path, monkeypatch):
    """Where the harness was idle before a kind's last request (the agent thinks between steps), its next
    step is not built while a command of another kind runs (it would take a processor from it), but
    once no command has run for a moment: the next experiment and the next evaluator both then."""
    monkeypatch.setattr(built_ahead, "AHEAD_GAP_S", 0.0)  # every request comes after some idleness
    monkeypatch.setattr(built_ahead, "AHEAD_IDLE_S", 3600.0)
    task = load_task(DATA / "toy_task" / "task.yaml")
    lines: list[str] = []
    for idle_s in (3600.0, 0.01):
        monkeypatch.setattr(built_ahead, "AHEAD_IDLE_S", idle_s)
        root = tmp_path / str(idle_s)
        pool = warm_pool(task, root, root / "logs", lines)
        try:
            ws = Workspace.create(task, root / "search", scrubbed_env({}), root / "logs", True, pool)
            manifest = ws.take_manifest()
            assert ws.run_split("val", "step0", manifest=manifest).success
            experiment, evaluator = pool.ahead["experiment"], pool.ahead["harness"]
            if idle_s > 1:
                # the evaluator ran, and nothing was built meanwhile, nor since
                assert not experiment.released and experiment.pid is None and experiment.thread.is_alive()
                assert not evaluator.released and evaluator.pid is None
            else:
                for ahead in (experiment, evaluator):
                    ahead.thread.join(timeout=60)
                    assert not ahead.thread.is_alive() and not ahead.released
                    assert ahead.failure is None and ahead.pid is not None
                    # built while nothing runs, it copies the parent's pages it shares before go
                    assert ahead.own_up_to > 0
            assert ws.run_split("val", "step1", manifest=manifest).success
            assert pool.ahead_used == 2 and lines == []
        finally:
            pool.close()


def test_what_changed_since_a_step_was_built_ahead_reaches_it(tmp_path):
    """Built before the agent's next edit, a step sees that edit: the workspace is bound as a folder. A
    file the sandbox binds by itself that was replaced since (a protected file, ``out``) would show the
    old one there: that step is discarded and built afresh, as is one whose request differs."""
    runner = ("import sys, pathlib\nimport algorithm\n"
              "sys.stderr.write(f'SEES {algorithm.MARK} {pathlib.Path(\"data/extra.txt\").read_text()}\\n')\n")
    task = task_with_runner(tmp_path, runner)
    (task / "workspace" / "algorithm.py").write_text("MARK = 0\n")
    (task / "workspace" / "data" / "extra.txt").write_text("first")

    def change(ws, step):
        # after the next step was built: a change made while it is built may reach it either way
        ws.warm.ahead["experiment"].thread.join()
        edited = ws.path / "algorithm.py.new"
        edited.write_text(f"MARK = {step}\n")
        os.replace(edited, ws.path / "algorithm.py")  # as an editor saves: a new file under the old name
        if step == 2:
            # in a protected folder, bound read-only as a folder: seen as it is now
            (ws.path / "data" / "extra.txt").write_text("second")
            # protected, bound read-only by itself: the same text under a new inode (a restore, say)
            runner = ws.path / "train.py"
            copy = ws.path / "train.py.new"
            shutil.copy2(runner, copy)
            os.replace(copy, runner)

    steps, used, discarded = run_steps(task, tmp_path / "run", 4, between=change)
    seen = [re.search(r"^SEES .*$", log, re.MULTILINE).group(0) for _, log in steps]
    assert seen == ["SEES 0 first", "SEES 1 first", "SEES 2 second", "SEES 3 second"], seen
    ahead = [log.startswith("[warm] [built ahead]") for _, log in steps]
    assert ahead == [False, True, False, True] and (used, discarded) == (2, 1)


def test_a_step_built_ahead_runs_its_script_as_it_reads_at_go(tmp_path):
    """A step built ahead compiles its script while it waits for its request. What runs is the script as
    it reads at go: an edit in place since (the same file, so the step built ahead is kept) runs, and a
    script whose compilation warns prints that warning once, when it starts, as a cold start does."""
    warns = "import sys\nsys.stderr.write(f'VERSION 2 {1 is 1}\\n')\n"  # SyntaxWarning: "is" with a literal

    def edit(ws, step):
        ahead = ws.warm.ahead["experiment"]
        ws.warm._times.release(ahead)
        ahead.thread.join()  # built, and compiled, from the text before this edit
        runner = ws.path / "train.py"
        inode = runner.stat().st_ino
        runner.write_text(warns if step == 2 else f"import sys\nsys.stderr.write('VERSION {step}\\n')\n")
        assert runner.stat().st_ino == inode

    task = task_with_runner(tmp_path, "import sys\nsys.stderr.write('VERSION 0\\n')\n")
    steps, used, discarded = run_steps(task, tmp_path / "run", 3, between=edit)
    logs = [log for _, log in steps]
    assert all(result.ok for result, _ in steps), logs
    assert (used, discarded) == (2, 0) and all(log.startswith("[warm] [built ahead]") for log in logs[1:])
    assert [re.findall(r"^VERSION .*$", log, re.MULTILINE) for log in logs] == [
        ["VERSION 0"], ["VERSION 1"], ["VERSION 2 True"]], logs
    assert logs[2].count("SyntaxWarning") == 1 and '"is" with a literal' in logs[2], logs[2]
    assert "SyntaxWarning" not in logs[0] + logs[1]
    cold, cold_log = run_experiment(task_with_runner(tmp_path / "cold", warns), tmp_path / "cold_run", use_warm=False)
    assert cold.ok and cold_log.count("SyntaxWarning") == 1


def test_a_step_built_ahead_reads_a_script_that_is_no_regular_file_only_at_go(tmp_path, monkeypatch):
    """A script that is a FIFO is not compiled ahead: opened then, it would take for the waiting step what
    its writer writes for the command, and leave the command nothing to read. The step built ahead reads
    it at go, as a cold start does."""
    import threading

    from pytest_fmlbench.workspace import _emptied

    monkeypatch.setattr(built_ahead, "AHEAD_IDLE_S", 3600.0)  # built when this test lets it
    task = load_task(task_with_runner(tmp_path, "# replaced by a FIFO\n") / "task.yaml")
    root = tmp_path / "run"
    pool = warm_pool(task, root, root / "logs")
    logs = []
    try:
        ws = Workspace.create(task, root / "search", scrubbed_env({}), root / "logs", True, pool)
        runner = ws.path / "train.py"
        runner.unlink()
        os.mkfifo(runner)
        for step in range(2):
            # the writer waits until something opens the FIFO to read it, then writes this step's script
            script = f"import sys\nsys.stderr.write('FROM THE FIFO {step}\\n')\n"
            writer = threading.Thread(target=runner.write_text, args=(script,), daemon=True)
            writer.start()
            if step:
                ahead = pool.ahead["experiment"]
                pool._times.release(ahead)
                ahead.thread.join()  # built and ready, the writer still waiting
                assert ahead.failure is None and writer.is_alive()
            out = ws.out_dir("val")
            _emptied(out)
            result = ws.experiment("val", out, f"step{step}")
            writer.join(timeout=10)
            logs.append((root / "logs" / f"step{step}.log").read_text())
            assert result.ok and not writer.is_alive(), logs[-1][-2000:]
        assert pool.ahead_used == 1 and logs[1].startswith("[warm] [built ahead]"), logs[1][:300]
    finally:
        pool.close()
    assert [re.findall(r"^FROM THE FIFO \d$", log, re.MULTILINE) for log in logs] == [
        ["FROM THE FIFO 0"], ["FROM THE FIFO 1"]], logs


def test_closing_the_pool_ends_a_step_built_ahead(tmp_path):
    """A step built ahead that no request takes (the last of a search) holds processes, a control group
    and a bubblewrap holder: closing the run's pool ends and removes them all, and none of its code ran."""
    marker = f"fmlbench-ahead-{uuid.uuid4().hex}"
    task = task_with_runner(tmp_path, f"import sys\nsys.stderr.write('RAN {marker}\\n')\n")
    loaded = load_task(task / "task.yaml")
    pool = warm_pool(loaded, tmp_path, tmp_path / "logs")
    try:
        ws = Workspace.create(loaded, tmp_path / "search", scrubbed_env({"FMLBENCH_TEST_MARK": marker}),
                              tmp_path / "logs", True, pool)
        result = ws.experiment("val", ws.out_dir("val"), "step0")
        assert result.ok and f"RAN {marker}" in result.output_tail
        ahead = pool.ahead["experiment"]
        ahead.thread.join()
        assert ahead.failure is None, ahead.failure
        group_dirs = list(ahead.group.dirs) if hasattr(ahead.group, "dirs") else []
        built = [pid for pid in children_of(ahead.pid)] + [ahead.pid]
        assert all(Path(f"/proc/{pid}").exists() for pid in built)
    finally:
        pool.close()
    assert none_left_with(str(tmp_path / "search")), "a process built ahead outlived the pool"
    deadline = time.monotonic() + 30
    while any(map(is_running, built)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(is_running, built)), built
    assert not any(directory.exists() for directory in group_dirs)
    logs = sorted(p.name for p in (tmp_path / "logs").glob("step*"))
    assert logs == ["step0.log"], logs


LEAVES_A_DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: its parent is gone, the namespace's init inherits it
        os.execv(sys.executable, [sys.executable, "-c", "import time\\ntime.sleep(60)", "MARKER"])
    os._exit(0)
time.sleep(0.2)
"""


def test_nothing_of_a_step_runs_once_its_end_is_reported(tmp_path, monkeypatch):
    """A sandboxed step's end is reported by its namespace's init once it has killed and reaped every
    other process there: when the harness reads that report, a daemon the command left is gone already,
    in a step built on request and in one built ahead."""
    marker = f"fmlbench-daemon-{uuid.uuid4().hex}"
    task = task_with_runner(tmp_path, LEAVES_A_DAEMON.replace("MARKER", marker))
    alive_at_end = []
    real_wait = warm.WarmProcess.wait

    def wait(self, timeout=None):
        code = real_wait(self, timeout)
        alive_at_end.append(host_processes_with(marker))
        return code

    monkeypatch.setattr(warm.WarmProcess, "wait", wait)
    steps, used, _ = run_steps(task, tmp_path / "run", 3)
    assert all(result.ok for result, _ in steps) and used == 2
    assert len(alive_at_end) >= 3 and not any(alive_at_end), alive_at_end
    assert none_left_with(marker)


def test_a_step_built_ahead_that_was_killed_while_it_waited_is_built_again(tmp_path):
    """A signal for the whole job (Slurm's scancel, say) may kill what was built ahead while it waits:
    the next request is then served as any other, warm, with no error (it once failed the run with a
    broken pipe when the harness said go)."""
    import signal

    task = task_with_runner(tmp_path, "import sys\nsys.stderr.write('RAN\\n')\n")

    def kill_what_was_built(ws, step):
        ahead = ws.warm.ahead["experiment"]
        ahead.thread.join()
        assert ahead.failure is None, ahead.failure
        ahead.group.kill_all(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while is_running(ahead.pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    steps, used, discarded = run_steps(task, tmp_path / "run", 3, between=kill_what_was_built)
    assert [result.ok for result, _ in steps] == [True] * 3, [log[-1500:] for _, log in steps]
    assert all(log.startswith("[warm] [sandbox: bwrap]") and "RAN" in log for _, log in steps)
    assert (used, discarded) == (0, 2)

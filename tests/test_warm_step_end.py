"""Warm interpreters (isolation.warm), a step's end and its limits: the CPU time reported, the memory
keeper that holds nothing and is reaped, nothing of a step left open or running, the step's control
group and task limit, and a sandbox that does not start."""

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA
from warm_support import children_of, is_running, run_experiment, run_steps, task_with_runner, warm_pool

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def test_a_warm_command_s_cpu_time_is_reported(tmp_path):
    """What the benchmarks and compute beside the score measure where wall time is stretched by other work:
    the CPU time of a command's processes, as the kernel counted them: a warm command's from its parent's
    report, a cold one's (whose times stay inside bubblewrap's namespace) from its step's control group."""
    task = task_with_runner(tmp_path, "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 0.3:\n    pass\n")
    cold, _ = run_experiment(task, tmp_path / "cold", use_warm=False)
    hot, log = run_experiment(task, tmp_path / "hot", use_warm=True)
    assert log.startswith("[warm]") and hot.warm and not cold.warm
    from pytest_fmlbench.isolation import limits

    # a control group counts it: v2's cpu.stat, or v1's cpuacct hierarchy where groups can be made in it
    counted_cold = limits.backend() == "cgroup2" or limits._v1_cpuacct_parent() is not None
    assert hot.cpu_s >= 0.3 and (cold.cpu_s >= 0.3 if counted_cold else cold.cpu_s is None), (cold.cpu_s, hot.cpu_s)


# takes a lock that only the end of the process holding it releases: a descriptor left open past the
# exit (a memory keeper's copy of it) would keep it taken
TAKES_A_LOCK = """
import fcntl, os, numpy
kept = numpy.ones(1 << 25)  # 256 MiB: tens of milliseconds to release
fcntl.flock(os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT), fcntl.LOCK_EX)  # a descriptor, not a file object: it ends short
"""


def _lock_is_free(path: Path) -> bool:
    import fcntl

    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def _blocked_signals(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)


def test_a_command_s_memory_keeper_holds_nothing_and_is_killed_and_reaped(tmp_path):
    """A command that ends short exits before its memory is released: a keeper made with that memory and
    nothing else holds it past the exit. It holds no descriptor (the command's lock is free the moment
    its exit is reported), blocks every signal that can be, is killed as the exit is reported, and the
    parent reaps it at the next command's end: one per command, none left running, none piling up."""
    import signal

    from pytest_fmlbench.workspace import HARNESS_PYTHON

    lock = tmp_path / "lock"
    script = tmp_path / "takes_a_lock.py"
    script.write_text(TAKES_A_LOCK.replace("LOCK_PATH", repr(str(lock))))
    argv = [*HARNESS_PYTHON, str(script)]
    # fcntl imported by the parent: a library loaded after the fork has the C library's exit run in full
    pool = warm.WarmPool([], [("numpy", []), ("fcntl", [])], False, tmp_path / "logs", [].append)
    keepers = []
    try:
        for _ in range(4):
            proc = pool.launcher("harness", argv, tuple(HARNESS_PYTHON[1:]), tmp_path, scrubbed_env({}))(None)
            assert proc is not None
            assert proc.wait(60) == 0, proc.stderr.read()
            assert _lock_is_free(lock)
            assert proc.stdout.read() == b""
            proc.stdout.close()
            proc.stderr.close()
            parent = next(iter(pool.parents.values())).proc.pid
            # the keepers of the commands before were reaped at this one's end
            assert [pid for pid in keepers if Path(f"/proc/{pid}").exists()] == []
            # the command ran in a session of its own: what of it is the parent's child is its keeper
            mine = [pid for pid in children_of(parent) if os.getpgid(pid) == proc.pid]
            assert len(mine) == 1, mine
            keeper = mine[0]
            deadline = time.monotonic() + 30
            while is_running(keeper) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not is_running(keeper)
            blocked = _blocked_signals(keeper)
            assert all(blocked & (1 << (sig - 1)) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                                               signal.SIGUSR1, signal.SIGCHLD)), hex(blocked)
            keepers.append(keeper)
    finally:
        pool.close()


def test_a_sandboxed_step_s_end_leaves_nothing_open(tmp_path, monkeypatch):
    """In a sandboxed step, the namespace's init reports the end while the command's memory keeper may
    still be releasing that memory: the lock the command took is free when the end is reported."""
    lock_name = "step.lock"
    task = task_with_runner(tmp_path, "import sys, pathlib\nLOCK_PATH = str(pathlib.Path(sys.argv[sys.argv.index('--out') + 1]) / "
                             f"{lock_name!r})\n" + TAKES_A_LOCK)
    with open(task / "task.yaml", "a") as spec:
        spec.write("warm: [numpy, fcntl]\n")  # nothing loaded after the fork: the command ends short, with a keeper
    free_at_end = []
    real_wait = warm.WarmProcess.wait
    outs = []

    def wait(self, timeout=None):
        code = real_wait(self, timeout)
        if self.ended_whole:  # a sandboxed step's (the harness's own commands run unsandboxed)
            free_at_end.append(_lock_is_free(outs[-1] / lock_name))
        return code

    monkeypatch.setattr(warm.WarmProcess, "wait", wait)
    real_experiment = Workspace.experiment

    def experiment(self, split, out, log_name):
        outs.append(out)
        return real_experiment(self, split, out, log_name)

    monkeypatch.setattr(Workspace, "experiment", experiment)
    steps, used, _ = run_steps(task, tmp_path / "run", 3)
    assert all(result.ok for result, _ in steps), [log for _, log in steps]
    assert used == 2 and len(free_at_end) >= 3 and all(free_at_end), free_at_end


# fills the step's control group up to its task limit (the child outside the namespace is one of them),
# with children that wait to be killed, then ends
FILLS_ITS_TASK_LIMIT = """
import os, signal
tasks = sum(len(os.listdir(f"/proc/{pid}/task")) for pid in os.listdir("/proc") if pid.isdigit())
for _ in range(LIMIT - 1 - tasks):
    if os.fork() == 0:
        signal.pause()
        os._exit(0)
"""


def test_a_step_at_its_task_limit_as_it_ends_is_not_failed_by_its_memory_keeper(tmp_path):
    """A memory keeper is one more task in the step's control group: a step that ends with its group
    full is not made to pass its limit (which would fail it with "too many processes", as no cold step
    would be). A step that tries to pass it is still failed so."""
    task = task_with_runner(tmp_path, FILLS_ITS_TASK_LIMIT.replace("LIMIT", "24"))
    with open(task / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24}\n")
    steps, used, _ = run_steps(task, tmp_path / "run", 2)
    assert [(result.ok, result.limit) for result, _ in steps] == [(True, None), (True, None)], [log for _, log in steps]
    assert used == 1
    over = task_with_runner(tmp_path / "over", FILLS_ITS_TASK_LIMIT.replace("LIMIT", "25"))
    with open(over / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24}\n")
    steps, _, _ = run_steps(over, tmp_path / "run_over", 1)
    assert steps[0][0].limit == "too many processes", steps[0][1]


PASSES_ITS_LIMITS_WHEN_TOLD = """
import os, signal
if os.path.exists("storm"):
    for _ in range(64):
        if os.fork() == 0:
            signal.pause()
            os._exit(0)
if os.path.exists("hog"):
    hoard = [bytearray(32 << 20) for _ in range(64)]
"""


@pytest.mark.parametrize("attack, limit", [("storm", "too many processes"), ("hog", "out of memory")])
def test_a_step_built_ahead_is_bounded_by_the_limits_it_was_built_with(tmp_path, attack, limit):
    """A step built ahead runs in the control group built with it (the one the harness asks for at the
    request is never made): a step that passes the task's limits there is failed for it, as a cold one."""
    task = task_with_runner(tmp_path, PASSES_ITS_LIMITS_WHEN_TOLD)
    with open(task / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24, memory_mb: 300}\n")

    def told(ws, step):
        (ws.path / attack).write_text("")

    steps, used, discarded = run_steps(task, tmp_path / "run", 2, between=told)
    assert (used, discarded) == (1, 0)
    assert steps[1][1].startswith("[warm] [built ahead]")
    assert [(result.ok, result.limit) for result, _ in steps] == [(True, None), (False, limit)], [log for _, log in steps]


def test_a_sandbox_that_does_not_start_means_one_cold_command(tmp_path):
    """The child is spawned while bubblewrap builds the step's sandbox: if it never holds its namespaces,
    the child is told so and ends without entering anything, that command starts cold with one line,
    and the next one starts warm."""
    from pytest_fmlbench import isolation

    task = load_task(DATA / "toy_task" / "task.yaml")
    lines: list[str] = []
    pool = warm_pool(task, tmp_path, tmp_path / "logs", lines)
    try:
        ws = Workspace.create(task, tmp_path / "search", scrubbed_env({}), tmp_path / "logs", True, pool)
        out = ws.out_dir("val")
        argv = [sys.executable, "train.py", "--split", "val", "--out", str(out)]
        view = isolation.ExperimentView(ws.path, out, [], [task.root, tmp_path])
        holder = isolation.bwrap_argv(view, warm.HOLDER)
        broken = [holder[0], "--ro-bind", str(tmp_path / "missing"), "/missing", *holder[1:]]

        def launch(bwrap):
            return pool.launcher("experiment", argv, (), ws.path, isolation.sandbox_env(ws.env), bwrap=bwrap,
                                 cold_bwrap=isolation.bwrap_argv(view, argv))(None)

        assert launch(broken) is None
        assert [line for line in lines if "sandbox did not start" in line] == [
            next(line for line in lines if line.startswith("experiment command starts cold: the step's sandbox did not start"))]
        parent = next(p for key, p in pool.parents.items() if key.kind == "experiment")
        # the failed child is gone (once it ended and its parent reaped it, which a busy machine delays); a
        # spare may wait
        deadline = time.monotonic() + 30
        while len(children_of(parent.proc.pid)) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(children_of(parent.proc.pid)) <= 1
        proc = launch(holder)
        assert proc is not None, lines
        proc.stdout.read()
        assert proc.wait(60) == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    finally:
        pool.close()

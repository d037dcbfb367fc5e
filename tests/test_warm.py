"""Warm interpreters (isolation.warm): a step forked from a warm parent sees what a cold step sees, leaves
nothing behind for the next step, cannot reach the parent, and falls back to a cold start where forking
would be unsafe."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from leftover_processes import host_processes_with, none_left_with
import yaml

from conftest import DATA, REPO, load_record
from isolation_attacks import AGENT
from warm_probes import CHECK, INTROSPECT, LEAVE, PARENT_ATTACK

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import TaskSpecError, load_task
from pytest_fmlbench.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


# -- a step sees what it saw before -----------------------------------------------------------------


def _task_with_runner(tmp_path: Path, runner: str) -> Path:
    task = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task)
    (task / "workspace" / "train.py").write_text(runner)
    return task


def _pool(task, root: Path, logs: Path, lines: list[str] | None = None) -> warm.WarmPool:
    return warm.pool_for(task, logs, (lines if lines is not None else []).append, True,
                         hidden=[task.root, root], gpus=False)


def _experiment(task_dir: Path, root: Path, use_warm: bool, lines: list[str] | None = None):
    """(result, log text) of one sandboxed val run of ``task_dir``'s runner, warm or cold."""
    task = load_task(task_dir / "task.yaml")
    logs = root / "logs"
    pool = _pool(task, root, logs, lines) if use_warm else None
    try:
        ws = Workspace.create(task, root / "search", scrubbed_env({}), logs, True, pool)
        out = ws.out_dir("val")
        shutil.rmtree(out)
        out.mkdir(parents=True)
        result = ws.experiment("val", out, "probe")
    finally:
        if pool is not None:
            pool.close()
    return result, (logs / "probe.log").read_text()


def _probe(log: str) -> dict:
    [line] = [line for line in log.splitlines() if line.startswith("PROBE ")]
    return json.loads(line[len("PROBE "):])


def test_a_warm_step_sees_what_a_cold_step_sees(tmp_path):
    task = _task_with_runner(tmp_path, INTROSPECT)
    cold, cold_log = _experiment(task, tmp_path / "cold", use_warm=False)
    lines: list[str] = []
    hot, hot_log = _experiment(task, tmp_path / "cold", use_warm=True, lines=lines)
    assert cold.ok and hot.ok, (cold_log, hot_log)
    assert not cold_log.startswith("[warm]") and hot_log.startswith("[warm] [sandbox: bwrap] $ "), lines
    before, after = _probe(cold_log), _probe(hot_log)
    assert before.keys() == after.keys()
    different = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    assert different == {}
    # what is checked: the same process layout, credentials and view, not merely no crash
    assert after["pid"] == 2 and after["ppid"] == 1 and after["pids"] == [1, 2]
    assert set(after["caps"]) == {"0000000000000000"} and after["no_new_privs"] == "1"
    assert after["shm"] == after["home"] == after["var_tmp"] == [] and after["net"] == ["lo"]
    assert after["cmdline"][1:3] == ["train.py", "--split"] and after["proc_1_cmdline"][0] == "bwrap"



# the command is pid 2 of its namespace: at its first line it may read what its init (pid 1) shows
READS_ITS_INIT = ("import sys\n"
                  "sys.stderr.write('INIT %r %r\\n' % (open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0], "
                  "open('/proc/1/comm').read().strip()))\n"
                  "open(sys.argv[sys.argv.index('--out') + 1] + '/written', 'w').write('here')\n")


def test_a_command_never_sees_its_init_before_the_init_shows_bubblewrap(tmp_path):
    """The init shows bubblewrap's command line before the command exists. It used to present itself
    after forking the command: a command that got a core first read the warm parent's command line
    (its path and descriptor number) at /proc/1 (4 steps in 400 at load average 5, and
    test_a_step_cannot_reach_the_warm_parent's 'ATTACK FOUND a warm parent' once). Many short steps,
    each reading /proc/1 at its first line: every one sees bubblewrap, and writes into the ``out`` the
    step was given. A third of them empty ``out`` in place: what was built ahead is used. A third
    remove it and make it again once the next step was built: what was built ahead binds the old
    folder and is discarded (when only inode numbers were compared, the new folder often got the old
    one's back and the command wrote into a folder nobody reads). A third remove it while the next
    step is being built: either is right, as long as what the command writes reaches ``out``."""
    from pytest_fmlbench.workspace import _emptied

    task = load_task(_task_with_runner(tmp_path, READS_ITS_INIT) / "task.yaml")
    logs = tmp_path / "logs"
    pool = _pool(task, tmp_path, logs)
    seen = []
    try:
        ws = Workspace.create(task, tmp_path / "search", scrubbed_env({}), logs, True, pool)
        for step in range(120):
            out = ws.out_dir("val")
            if step % 3 == 1:
                _emptied(out)
            else:
                if step % 3 == 0 and step:
                    pool.ahead["experiment"].thread.join()
                shutil.rmtree(out)
                out.mkdir(parents=True)
            ws.experiment("val", out, f"step{step}")
            log = (logs / f"step{step}.log").read_text()
            assert log.startswith("[warm]"), log[-2000:]
            assert (out / "written").read_text() == "here", (step, log[-2000:])
            seen += [line for line in log.splitlines() if line.startswith("INIT ")]
    finally:
        pool.close()
    assert len(seen) == 120 and set(seen) == {"INIT b'bwrap' 'bwrap'"}, sorted(set(seen))
    # step 0 has nothing built ahead; 40 steps emptied in place, 39 removed after the build
    assert pool.ahead_used >= 40 and pool.ahead_discarded >= 39, (pool.ahead_used, pool.ahead_discarded)
    assert pool.ahead_used + pool.ahead_discarded == 119


ERRORS = {
    "exception": "import sys\nprint('out')\nraise ValueError('boom')\n",
    "exit-message": "import sys\nsys.exit('a message')\n",
    "exit-code": "import sys, atexit\natexit.register(lambda: print('atexit ran', flush=True))\nsys.exit(3)\n",
    "syntax": "x = (\n",
    "unflushed-file": "f = open(__import__('sys').argv[-1] + '/left-open.txt', 'w')\nf.write('kept')\n",
    "non-daemon-thread": ("import threading, time\n"
                          "threading.Thread(target=lambda: (time.sleep(0.5), print('thread done', flush=True))).start()\n"),
    "killed": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    # what the command leaves to the interpreter's finalization, in its own namespace or on a library's
    "library-holds-a-file": ("import numpy, sys\n"
                             "numpy._fmlbench_left = open(sys.argv[-1] + '/left-open.txt', 'w')\n"
                             "numpy._fmlbench_left.write('kept')\n"),
    "library-holds-a-finalizer": ("import json, sys\n"
                                  "class Noisy:\n    def __del__(self):\n        sys.stderr.write('finalized\\n')\n"
                                  "json._fmlbench_noisy = Noisy()\n"),
    "daemon-thread": ("import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nprint('out')\n"),
    "keyboard-interrupt": "raise KeyboardInterrupt\n",
    "exit-bool": "import sys\nsys.exit(True)\n",
    # finalizers of what the script itself holds run at exit, with its globals still there
    "script-holds-a-finalizer": ("import sys\n"
                                 "class Noisy:\n    def __del__(self):\n        sys.stderr.write(f'finalized {self.name}\\n')\n"
                                 "b = Noisy(); b.name = 'b'\n_a = Noisy(); _a.name = '_a'\n"),
    "library-holds-a-generator": ("import json, sys\n"
                                  "def gen():\n    try:\n        yield 1\n    finally:\n        sys.stderr.write('generator closed\\n')\n"
                                  "json._fmlbench_gen = gen(); next(json._fmlbench_gen)\n"),
    "never-awaited": "import json\nasync def work():\n    pass\njson._fmlbench_coroutine = work()\n",
    "cyclic-garbage-with-finalizer": ("import gc, sys\ngc.disable()\n"
                                      "class Noisy:\n    def __del__(self):\n        sys.stderr.write(f'finalized {sys.is_finalizing()}\\n')\n"
                                      "n = Noisy(); n.me = n; del n\n"),
    "stdout-cannot-flush": "import os, sys\nsys.stdout.write('pending')\nos.close(1)\n",
    # what an interpreter's teardown does that could be seen, besides finalizers: each ends in full
    "sqlite-uncommitted": ("import sqlite3, sys\ncon = sqlite3.connect(sys.argv[-1] + '/db.sqlite')\n"
                           "con.execute('create table t (x)')\ncon.commit()\ncon.execute('insert into t values (1)')\n"),
    "gc-callback": ("import gc, os, sys\n"
                    "gc.callbacks.append(lambda phase, info, w=os.write, f=sys.is_finalizing: f() and w(2, f'gc {phase}\\n'.encode()))\n"),
    "audit-hook": ("import os, sys\nsys.addaudithook(lambda event, args, w=os.write: "
                   "event == 'cpython.PyInterpreterState_Clear' and w(2, b'interpreter cleared\\n'))\n"),
    "weakref-callback": ("import json, os, sys, weakref\nclass Held:\n    pass\njson._fmlbench_held = Held()\n"
                         "sys._fmlbench_ref = weakref.ref(json._fmlbench_held, lambda ref, w=os.write: w(2, b'called back\\n'))\n"),
    "resource-warning-shown": "import sys, warnings\nwarnings.simplefilter('default')\nkept = open(sys.argv[0])\n",
    "exit-out-of-range": "import sys\nsys.exit(2 ** 40)\n",
    # ends short: what is left to do is the C library's (its buffered output) and the atexit handlers'
    "c-level-buffer": ("import ctypes, sys\nlibc = ctypes.CDLL(None)\nlibc.fopen.restype = ctypes.c_void_p\n"
                       "libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]\n"
                       "libc.fputs(b'kept', libc.fopen((sys.argv[-1] + '/left-open.txt').encode(), b'w'))\n"),
    "finalize-at-exit": ("import json, weakref\nclass Held:\n    pass\njson._fmlbench_held = Held()\n"
                         "weakref.finalize(json._fmlbench_held, print, 'out', flush=True)\n"),
    "read-only-file-left-open": "import sys\nkept = open(sys.argv[0])\nprint('out')\n",
    # the C library's exit runs a handler the command registered: its output comes after the script's
    "c-exit-handler": ("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.strdup.restype = ctypes.c_void_p\n"
                       "libc.__cxa_atexit(libc.puts, ctypes.c_void_p(libc.strdup(b'atexit ran')), None)\n"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_a_warm_script_ends_as_a_cold_one(tmp_path, name):
    """Exceptions, exit codes, atexit handlers, unclosed files and thread joins: the interpreter's own
    ending, with the traceback starting in the script."""
    task = _task_with_runner(tmp_path, ERRORS[name])
    # the same root both times: paths in tracebacks are the same
    cold, _ = _experiment(task, tmp_path / "run", use_warm=False)
    cold_file = (tmp_path / "run" / "search" / "out" / "val" / "left-open.txt")
    cold_file = cold_file.read_text() if cold_file.exists() else None
    out = tmp_path / "run" / "search" / "out" / "val"
    cold_listing = sorted(os.listdir(out))
    hot, log = _experiment(task, tmp_path / "run", use_warm=True)
    hot_file = (tmp_path / "run" / "search" / "out" / "val" / "left-open.txt")
    assert log.startswith("[warm]")
    assert (hot.returncode, hot.stderr) == (cold.returncode, cold.stderr)
    for line in ("out", "atexit ran", "thread done"):
        assert (line in hot.output_tail) == (line in cold.output_tail), line
    assert (hot_file.read_text() if hot_file.exists() else None) == cold_file
    assert sorted(os.listdir(out)) == cold_listing
    if name == "c-exit-handler":
        assert "atexit ran" in hot.output_tail, hot.output_tail
    if name == "exception":
        assert hot.stderr.startswith("Traceback (most recent call last):\n  File \"") and "warm_parent" not in hot.stderr


# -- nothing crosses from one step to the next -------------------------------------------------------

STEPS_AGENT = '''
from pytest_fmlbench import Agent, WholeFile

PAYLOADS = {payloads!r}


class MyAgent(Agent):
    def run(self, session):
        base = session.files["algorithm.py"]
        for payload in PAYLOADS:
            edit = session.edit([WholeFile("algorithm.py", base + "\\n\\n" + payload + "\\n")])
            assert edit.applied, edit.error
            session.run_step("improve", edit=edit)
'''


def _steps_agent(pytester, payloads: list[str]) -> str:
    (pytester.path / "steps_agent.py").write_text(STEPS_AGENT.replace("{payloads!r}", repr(payloads)))
    return "--agent=steps_agent.py:MyAgent"


def _step_logs(project: Path, task: str, pattern: str = "step_*_val.log") -> list[str]:
    run = next((project / "reports" / "fmlbench" / "runs" / task).glob("*"))
    return [p.read_text() for p in sorted((run / "logs").glob(pattern))]


def test_nothing_a_step_does_reaches_the_next(pytester, toy, bench):
    """Files in /tmp, /dev/shm, /var/tmp and $HOME, a System V shared memory segment, patched modules
    (numpy, this package, json, builtins), sys.path and import hooks, a signal handler, the collector,
    seeded generators, threads, child processes (one in its own session, one daemonised by a double
    fork) and environment changes: step 2 finds none of step 1's, and no process of step 1 is alive
    anywhere on the host once its step ended."""
    marker = f"fmlbench-leak-{uuid.uuid4().hex}"
    result = bench(_steps_agent(pytester, [LEAVE.replace("MARKER", marker), CHECK]), "--steps=2", "toy_task")
    result.assert_outcomes(passed=1)
    first, second = _step_logs(pytester.path, "toy_task")
    assert first.startswith("[warm]") and second.startswith("[warm]"), (first[:300], second[:300])
    assert "LEAK left" in first, first[-2000:]
    [found_line] = [line for line in second.splitlines() if line.startswith("LEAK found")]
    found, draws = [json.loads(part) for part in re.findall(r"\{[^{}]*\}", found_line)]
    assert found == {key: ([] if isinstance(value, list) else False) for key, value in found.items()}, found
    left = json.loads(re.search(r"\{[^{}]*\}", first[first.index("LEAK left"):]).group(0))
    # step 1 did leave them: its two marked processes ran, its segment existed
    assert left["marked_processes"] == 2 and left["sysv_shm"] == 1, left
    # generators start from fresh entropy in every step, never from what a step seeded
    assert draws["numpy_draw"] != left["numpy_draw_after_seed"]
    assert draws["random_draw"] != left["random_draw_after_seed"]
    assert none_left_with(marker), "a process of step 1 outlived its step"
    record = load_record(pytester.path)
    assert record["valid_steps"] == 2 and record["integrity"] == "ok"


def test_two_steps_draw_different_numbers_from_unseeded_generators(pytester, toy, bench):
    """Every child is a copy of one parent: numpy's global generator, seeded once at its import, must be
    reseeded per step (Python's own reseeds at fork), or every step would draw the same numbers."""
    draw = "import numpy, random, sys\nsys.stderr.write(f'DRAW {numpy.random.random_sample()} {random.random()}\\n')\n"
    bench(_steps_agent(pytester, [draw, draw]), "--steps=2", "toy_task").assert_outcomes(passed=1)
    draws = [re.search(r"^DRAW .*$", log, re.MULTILINE).group(0) for log in _step_logs(pytester.path, "toy_task")]
    assert len(set(draws)) == 2, draws


# -- the warm parent is out of reach -----------------------------------------------------------------


@pytest.mark.parametrize("task_name", ["toy_task", "fairness_fairlearn"])
def test_a_step_cannot_reach_the_warm_parent(pytester, bench, task_name):
    """Signals to everything visible (and kill(-1)), ptrace, /proc/<pid>/mem, environ, fd and root of
    every visible process: the parent is not among them, the namespace's init shrugs everything off,
    and the next steps still fork from the same warm parent and score the baseline."""
    source = DATA / "toy_task" if task_name == "toy_task" else DATA.parent.parent / "task_suites" / task_name
    shutil.copytree(source, pytester.path / task_name)
    result = bench(_steps_agent(pytester, [PARENT_ATTACK, ""]), "--steps=2", task_name)
    result.assert_outcomes(passed=1)
    attacked, after = _step_logs(pytester.path, task_name)
    assert attacked.startswith("[warm]") and after.startswith("[warm]")
    assert "ATTACK done" in attacked, attacked[-3000:]
    assert "ATTACK visible pids [1, 2] ppid 1" in attacked
    assert "ATTACK guessed pids []" in attacked
    for forbidden in ("ATTACK FOUND", "ATTACK traced", "ATTACK opened", "ATTACK root of"):
        assert forbidden not in attacked, attacked[-3000:]
    record = load_record(pytester.path, task_name)
    spec = yaml.safe_load((pytester.path / task_name / "task.yaml").read_text())
    assert record["valid_steps"] == 2 and record["integrity"] == "ok"
    assert record["test_metric"] == pytest.approx(spec["baseline"]["test"], abs=1e-9)
    final = _step_logs(pytester.path, task_name, "final_*.log")
    assert all(log.startswith("[warm]") for log in final), [log[:80] for log in final]


# -- when forking is not safe, or not wanted ---------------------------------------------------------


def _plain_parent(tmp_path: Path, module_source: str, guard: dict | None = None) -> warm.WarmParent:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fmlwarm_probe.py").write_text(module_source)
    env = {**scrubbed_env({}), "PYTHONPATH": str(lib)}
    key = warm.ParentKey("experiment", (), tuple(sorted(env.items())), guard is not None)
    return warm.WarmParent(key, [("fmlwarm_probe", [])], False, guard, tmp_path / "parent.log")


def test_a_closed_parent_s_log_is_whole(tmp_path, monkeypatch):
    """The parent's log is written by a reader of its output: once the parent is closed, the log holds all
    of it, also when that reader runs late (a loaded machine; seen as an empty log in a test run)."""
    from pytest_fmlbench import executor

    drain = executor.CappedLog.drain

    def late_drain(self, stream, also=None):
        time.sleep(0.5)
        drain(self, stream, also)

    monkeypatch.setattr(executor.CappedLog, "drain", late_drain)
    # printed before the parent reports its imports: in the pipe by the time refusal() returns
    parent = _plain_parent(tmp_path, "print('fmlwarm_probe imported', flush=True)\n")
    assert parent.refusal(60) is None
    parent.close()
    log = (tmp_path / "parent.log").read_text()
    assert log.startswith("warm parent (experiment): fmlwarm_probe\n") and "fmlwarm_probe imported\n" in log, log


@pytest.mark.parametrize("source, reason", [
    ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
     "thread(s) started while importing keep running across a fork"),
    ("import os\nKEEP = os.open('/dev/null', os.O_RDONLY)\n", "importing left descriptors open"),
    ("import mmap\nSHARED = mmap.mmap(-1, 4096)\n", "writable shared mapping"),
    ("raise RuntimeError('broken at import')\n", "importing fmlwarm_probe failed: RuntimeError: broken at import"),
])
def test_a_parent_that_cannot_fork_safely_is_refused(tmp_path, source, reason):
    parent = _plain_parent(tmp_path, source)
    try:
        assert reason in (parent.refusal(60) or "")
    finally:
        parent.close()


@pytest.mark.parametrize("source, reason", [
    ("open('/tmp/fmlwarm-written', 'w').write('x')\n", "writes /tmp/fmlwarm-written"),
    ("import socket\nsocket.getaddrinfo('localhost', 80)\n", "uses the network"),
    # a program of the system's trees may run (ctypes.util.find_library runs gcc); one from elsewhere not
    ("import subprocess\nsubprocess.run(['true'])\nsubprocess.run(['TOOL'])\n", "starts a process (subprocess.Popen 'TOOL')"),
    ("open('SECRET_FILE').read()\n", "reads SECRET_FILE"),
])
def test_importing_may_not_do_what_the_sandbox_would_answer_differently(tmp_path, source, reason):
    """The experiments' parent imports outside the sandbox: its guard refuses what would have gone
    otherwise inside (a read of a file the sandbox hides, a write, a process, the network)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden from experiments")
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    source = source.replace("SECRET_FILE", str(secret)).replace("TOOL", str(tool))
    reason = reason.replace("SECRET_FILE", str(secret)).replace("TOOL", str(tool))
    trees = warm.sandbox_trees([tmp_path], (), gpus=False)
    guard = trees.guard()
    guard["read"].append(str(tmp_path / "lib"))  # the probe module itself is importable
    parent = _plain_parent(tmp_path, source, guard)
    try:
        assert reason in (parent.refusal(60) or "")
    finally:
        parent.close()
    assert not Path("/tmp/fmlwarm-written").exists()


def test_what_importing_may_do_in_the_sandbox_s_scratch_folders(tmp_path):
    """tempfile's probe of /tmp (a file made and removed), an unnamed temporary file and a cache folder
    in /tmp (made again in every child's own /tmp) are fine; a file left behind is not."""
    name = f"fmlwarm-{uuid.uuid4().hex}"
    source = (f"import os, tempfile\ntempfile.gettempdir()\ntempfile.TemporaryFile().close()\n"
              f"os.makedirs('/tmp/{name}', exist_ok=True)\n")
    guard = warm.sandbox_trees([tmp_path], (), gpus=False).guard()
    guard["read"].append(str(tmp_path / "lib"))
    parent = _plain_parent(tmp_path, source, guard)
    try:
        assert parent.refusal(60) is None
        assert [path for path, _ in parent._report["made"]] == [f"/tmp/{name}"]
    finally:
        parent.close()
        os.rmdir(f"/tmp/{name}")
    left = tmp_path / "left"
    left.mkdir()
    parent = _plain_parent(left, f"open('/tmp/{name}-left', 'x').write('x')\n", guard | {"read": guard["read"] + [str(left / "lib")]})
    try:
        assert f"left /tmp/{name}-left behind" in (parent.refusal(60) or "")
    finally:
        parent.close()
        os.unlink(f"/tmp/{name}-left")


def test_a_refused_parent_means_cold_steps_and_one_line(tmp_path):
    """A task whose declared warm module cannot be imported: its steps run cold, score the same, and the
    log says why, once."""
    task_dir = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task_dir)
    (task_dir / "task.yaml").write_text((task_dir / "task.yaml").read_text() + "warm: [numpy, fmlwarm_not_installed]\n")
    task = load_task(task_dir / "task.yaml")
    lines: list[str] = []
    pool = _pool(task, tmp_path, tmp_path / "logs", lines)
    try:
        ws = Workspace.create(task, tmp_path / "search", scrubbed_env({}), tmp_path / "logs", True, pool)
        outcomes = [ws.run_split("val", f"step_{i}") for i in range(2)]
    finally:
        pool.close()
    assert all(o.success and o.metric == pytest.approx(0.76) for o in outcomes)
    heads = [(tmp_path / "logs" / f"step_{i}_val.log").read_text().splitlines()[0] for i in range(2)]
    assert not any(head.startswith("[warm]") for head in heads)
    off = [line for line in lines if line.startswith("warm start off for experiment commands")]
    assert off == ["warm start off for experiment commands, they start cold: importing fmlwarm_not_installed "
                   "failed: ModuleNotFoundError: No module named 'fmlwarm_not_installed'"], lines


def test_a_workspace_module_that_shadows_a_warm_one_starts_cold(tmp_path):
    """A cold start would import the workspace's json.py in place of the standard library's: the
    parent holds the latter, so that step starts cold (and the next one, without the file, warm)."""
    task_dir = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task_dir)
    task = load_task(task_dir / "task.yaml")
    lines: list[str] = []
    pool = _pool(task, tmp_path, tmp_path / "logs", lines)
    try:
        ws = Workspace.create(task, tmp_path / "search", scrubbed_env({}), tmp_path / "logs", True, pool)
        (ws.path / "json.py").write_text("from importlib import import_module as _i\nSHADOW = True\n")
        shadowed = ws.run_split("val", "shadowed")
        (ws.path / "json.py").unlink()
        plain = ws.run_split("val", "plain")
    finally:
        pool.close()
    assert not (tmp_path / "logs" / "shadowed_val.log").read_text().startswith("[warm]")
    assert (tmp_path / "logs" / "plain_val.log").read_text().startswith("[warm]")
    assert any("holds module(s) json that the warm parent has imported" in line for line in lines), lines
    assert plain.success


def test_cold_start_option_turns_warm_starts_off(pytester, toy, bench):
    bench("--agent=baseline", "--steps=1", "--cold-start", "toy_task").assert_outcomes(passed=1)
    logs = _step_logs(pytester.path, "toy_task", "*.log")
    assert logs and not any(log.startswith("[warm]") for log in logs)
    assert load_record(pytester.path)["test_metric"] == pytest.approx(0.72)


def test_by_default_experiments_and_harness_commands_start_warm(pytester, toy, bench):
    bench("--agent=baseline", "--steps=1", "toy_task").assert_outcomes(passed=1)
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / "toy_task").glob("*"))
    heads = {p.name: p.read_text().splitlines()[0] for p in (run / "logs").glob("*.log")
             if not p.name.startswith(("warm_parent", "agent", "search_sandbox_check"))}
    cold = {name: head for name, head in heads.items() if not head.startswith("[warm]")}
    # the first prepare waits for nothing: it is the harness parent's first command all the same
    assert cold == {}, cold
    assert load_record(pytester.path)["test_metric"] == pytest.approx(0.72)


# -- task.yaml and learning --------------------------------------------------------------------------


def test_learned_imports_are_the_installed_modules_the_baseline_imports():
    task = load_task(DATA.parent.parent / "task_suites" / "fairness_fairlearn" / "task.yaml")
    learned = dict(warm.learn_imports(task.workspace_dir))
    assert {"numpy", "pandas", "sklearn.linear_model", "pytest_fmlbench.evalkit"} <= set(learned)
    # the workspace's own modules, the standard library and __future__ are left out
    assert not {"algorithm", "json", "pathlib", "__future__"} & {m.partition(".")[0] for m in learned}
    assert learned["sklearn.linear_model"] == ["LogisticRegression"]
    harness = dict(warm.learn_imports(task.harness_dir))
    assert "fairlearn.metrics" in harness and "evaluate" not in harness


@pytest.mark.parametrize("value, message", [
    ("[numpy, 'not a module']", "field 'warm': 'not a module' is not a module name"),
    ("[algorithm]", "field 'warm': 'algorithm' is a module of the task's workspace"),
    ("numpy", "field 'warm': Input should be a valid list"),
])
def test_a_bad_warm_field_is_one_line(tmp_path, value, message):
    task_dir = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task_dir)
    (task_dir / "task.yaml").write_text((task_dir / "task.yaml").read_text() + f"warm: {value}\n")
    with pytest.raises(TaskSpecError) as err:
        load_task(task_dir / "task.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_warm_empty_list_means_cold_experiments(tmp_path):
    task_dir = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task_dir)
    (task_dir / "task.yaml").write_text((task_dir / "task.yaml").read_text() + "warm: []\n")
    result, log = _experiment(task_dir, tmp_path / "run", use_warm=True)
    assert result.ok and not log.startswith("[warm]")


def test_a_parent_imports_what_its_libraries_import_on_first_use(tmp_path):
    """torch imports torch._dynamo (hundreds of modules) when an optimizer is made, numpy its random
    module when it is first named: every command would import them again after the fork. A parent
    that holds them, asked for them or not (the linear probe's evaluator imports torch through the
    task kit), imports them too; one that holds neither does not."""
    pytest.importorskip("torch")
    pool = warm.WarmPool([("torch.nn", [])], [("json", [])], False, tmp_path / "logs", [].append)
    try:
        experiment = pool.parent("experiment", (), scrubbed_env({}), False)
        harness = pool.parent("harness", ("-s", "-E", "-B"), scrubbed_env({}), False)
        assert experiment.refusal() is None and harness.refusal() is None
        assert experiment._report["imported"] == ["torch.nn", "numpy.random", "torch._dynamo"]
        assert harness._report["imported"] == ["json"]
    finally:
        pool.close()


def test_commands_of_another_form_start_cold():
    python = sys.executable
    cwd = Path("/work")
    assert warm.script_command([python, "train.py", "--split", "val"], (), cwd) == \
        ("/work/train.py", ["train.py", "--split", "val"])
    assert warm.script_command([python, "-s", "-E", "-B", "/h/evaluate.py"], ("-s", "-E", "-B"), cwd) == \
        ("/h/evaluate.py", ["/h/evaluate.py"])
    for argv in ([python, "-c", "pass"], [python, "-m", "module"], ["/usr/bin/python3", "train.py"], [python],
                 [python, "-u", "train.py"], ["bash", "run.sh"]):
        assert warm.script_command(argv, (), cwd) is None, argv


# -- a command's ending ------------------------------------------------------------------------------


def _ending_usage(tmp_path: Path, scripts: dict[str, str], imports=(("numpy", []),),
                  lib: Path | None = None) -> tuple[dict, str]:
    """Each script run as a harness command forked from one parent that imported ``imports`` (numpy), or
    with ``lib`` as an experiment whose parent imports them from there: its usage, and the parent's log."""
    from pytest_fmlbench.workspace import HARNESS_PYTHON

    wanted = [(module, list(names)) for module, names in imports]
    pool = warm.WarmPool(wanted if lib else [], [] if lib else wanted, False, tmp_path / "logs", [].append)
    env = scrubbed_env({"PYTHONPATH": str(lib)} if lib else {})
    kind, python = ("experiment", [sys.executable]) if lib else ("harness", HARNESS_PYTHON)
    usage = {}
    try:
        for name, source in scripts.items():
            script = tmp_path / f"{name}.py"
            script.write_text(source)
            proc = pool.launcher(kind, [*python, str(script)], tuple(python[1:]), tmp_path, env)(None)
            assert proc is not None, name
            proc.stdout.read()
            assert proc.wait(120) == 0, proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
            usage[name] = proc.usage
    finally:
        pool.close()
    return usage, "".join(p.read_text() for p in (tmp_path / "logs").glob("warm_parent_*.log"))


def test_a_command_whose_end_nobody_could_see_skips_the_teardown(tmp_path):
    """Freeing the parent's objects at exit writes to the pages the command shares with the parent (each
    copied on write): a command that leaves nothing whose end could be seen skips that, one that leaves
    a finalizer to run (a generator suspended in a try on a library: closing it runs its finally) ends
    in full. One suspended outside any try is closed without running anything of its own."""
    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\n"
    usage, log = _ending_usage(tmp_path, {
        "short": work,
        "short-generator": work + "import json\ndef gen():\n    while True:\n        yield 1\n"
                                  "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n",
        "full": work + ("import json\ndef gen():\n    try:\n        yield 1\n    finally:\n        print('closed')\n"
                        "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n"),
        # no try around its yield from, but what it delegates to is closed first
        "full-delegating": work + ("import json\nclass Closes:\n    def __iter__(self):\n        return self\n"
                                   "    def __next__(self):\n        return 1\n    def close(self):\n"
                                   "        print('closed')\ndef gen():\n    yield from Closes()\n"
                                   "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n"),
        # no ending at all: what the fork and the work cost
        "none": work + "import os\nos._exit(0)\n",
    })
    assert "short endings: on" in log, log
    faults = {name: u.minor_faults for name, u in usage.items()}
    for short in ("short", "short-generator"):
        for full in ("full", "full-delegating"):
            assert faults[short] - faults["none"] < (faults[full] - faults["none"]) / 3, faults


def _check_short_and_full(tmp_path: Path, scripts: dict[str, str], imports=(("numpy", []),),
                          lib: Path | None = None) -> None:
    """Run ``scripts`` as ``_ending_usage`` does: the parent ends its commands short, and those named
    ``short*`` skipped the teardown where those named ``full*`` did not."""
    usage, log = _ending_usage(tmp_path, scripts, imports, lib)
    assert "short endings: on" in log, log
    ok, faults = _short_and_full(usage)
    assert ok, faults


def _short_and_full(usage: dict) -> bool:
    """Whether the commands named ``short*`` skipped the teardown and those named ``full*`` did not, by
    the pages each wrote (a teardown writes to nearly every page shared with the parent)."""
    faults = {name: u.minor_faults - usage["none"].minor_faults for name, u in usage.items() if name != "none"}
    fewest_full = min(f for name, f in faults.items() if name.startswith("full"))
    return all(f < fewest_full / 2 for name, f in faults.items() if name.startswith("short")), faults


def test_the_data_guard_s_hook_and_numpy_s_generators_leave_the_ending_short(tmp_path):
    """The task kit's data guard adds an audit hook (called at the interpreter's end, where it looks at
    nothing but "open" events): a command that sealed its data with it, or holds numpy generators,
    skips the teardown; one that adds a hook of its own, even the guard's with a line changed, ends in
    full."""
    guard = (REPO / "pytest_fmlbench" / "taskkit" / "data_guard.py").read_text()
    (tmp_path / "data_guard.py").write_text(guard)
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "data_guard.py").write_text(guard.replace("    sys.addaudithook(hook)", "    hook.changed = True\n    sys.addaudithook(hook)"))
    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\nrng = numpy.random.default_rng(0)\nold = numpy.random.RandomState(1)\n"
    seal = "import sys\nsys.path.insert(0, {folder!r})\nimport data_guard\ndata_guard.seal([{folder!r} + '/sealed'])\n"
    _check_short_and_full(tmp_path, {
        "short-sealed": work + seal.format(folder=str(tmp_path)),
        "full-own-hook": work + "import sys\nsys.addaudithook(lambda event, args: None)\n",
        "full-changed-guard": work + seal.format(folder=str(changed)),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("numpy.random", [])])


def test_arrays_frames_and_models_left_alive_leave_the_ending_short(tmp_path):
    """What scripts keep in their globals to the end (a memory-mapped array, which the collector tracks,
    a pandas frame, a pydantic model) frees memory only: the teardown is skipped. A finalizer beside
    them ends it in full."""
    pytest.importorskip("pandas")
    pytest.importorskip("pydantic")
    (tmp_path / "data.npy").write_bytes(b"")
    work = ("import numpy, pandas, pydantic, sys\n"
            f"numpy.save({str(tmp_path / 'data.npy')!r}, numpy.arange(12.0))\n"
            f"mapped = numpy.load({str(tmp_path / 'data.npy')!r}, mmap_mode='r')\n"
            "frame = pandas.DataFrame({'x': mapped, 'y': mapped * 2}).groupby(mapped > 5).mean()\n"
            "class Config(pydantic.BaseModel):\n    lr: float = 0.1\nconfig = Config(lr=0.5)\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + "class Noisy:\n    def __del__(self):\n        sys.stderr.write('freed')\nkept = Noisy()\n",
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("pandas", []), ("pydantic", [])])


def test_a_library_loaded_after_the_fork_ends_short_only_if_it_is_installed(tmp_path):
    """A module of the standard library or of site-packages that the parent had not loaded is taken as
    the parent's libraries are; a library from anywhere else (a step's own build, say) could do anything
    when its objects are freed: that command ends in full."""
    import _statistics

    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\n"
    built = tmp_path / "built" / Path(_statistics.__file__).name
    built.parent.mkdir()
    shutil.copy(_statistics.__file__, built)
    _check_short_and_full(tmp_path, {
        "short": work + "import _statistics, termios\n",
        "full": work + f"import ctypes\nctypes.CDLL({str(built)!r})\n",
        # a library loaded since the fork: the C library's exit handlers run in every ending
        "none": work + "import ctypes\nctypes.PyDLL(None).exit(0)\n",
    })


def test_numba_s_interned_types_leave_the_ending_short(tmp_path):
    """numba interns its types with weak references whose callback drops the type from a dictionary
    (``_pop(wr, None)``, ``_pop`` a default bound to the dictionary's pop): memory only. A parent that
    imported numba ends its commands short, one that made numba types too; a callback of the same
    shape whose pop is a dictionary subclass's own (it prints) ends in full."""
    pytest.importorskip("numba")
    work = "import numba\nkind = numba.types.Array(numba.types.float64, 2, 'C')\n"
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + ("import weakref\nclass Loud(dict):\n    def pop(self, *args):\n        print('popped')\n"
                        "        return super().pop(*args)\ncache = Loud()\n"
                        "def gone(ref, _pop=cache.pop):\n    _pop(ref, None)\n"
                        "class Kept:\n    pass\nkept = Kept()\ncache[weakref.ref(kept, gone)] = 1\n"),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("numba", [])])


JITTED = """
import numba

@numba.njit("int64(int64)")
def step(x):
    return x + 1
"""


def test_numba_s_compiled_code_leaves_the_ending_short(tmp_path):
    """A library that compiles with numba as it is imported (ART's harness does) leaves llvmlite's
    objects (their finalizers do nothing once llvmlite's atexit handler has run) and numba's typing
    context's weak references (their callback pops them from its globals) in the parent: its commands
    end short, one that compiles code of its own too. One that replaced llvmlite's finalizer (it prints)
    ends in full."""
    pytest.importorskip("numba")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fmlbench_jitted.py").write_text(JITTED)
    work = ("import numba, fmlbench_jitted\nfmlbench_jitted.step(1)\n"
            "@numba.njit\ndef twice(x):\n    return 2 * x\ntwice(3)\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + "import llvmlite.binding.ffi as ffi\nffi.ObjectRef.__del__ = lambda self: print('disposed')\n",
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("fmlbench_jitted", [])], lib=lib)


def test_tensorflow_s_bindings_and_metrics_leave_the_ending_short(tmp_path):
    """TensorFlow's bindings (an older pybind11) watch their types with weak references whose callback is
    bound to a capsule; its monitoring metrics (classes with __slots__, no weak reference) delete their
    C++ metric when freed: both memory only. A parent that imported TensorFlow's dtypes ends its commands
    short, one that made a metric of its own too; one whose metric's delete method was replaced (it
    prints) ends in full."""
    pytest.importorskip("tensorflow")
    work = ("from tensorflow.python.eager import monitoring\n"
            "gauge = monitoring.BoolGauge('/fmlbench/test/gauge', 'a gauge of the test')\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + ("gauge._metric_methods = [method._replace(delete=lambda metric: print('deleted'))\n"
                        "                        for method in gauge._metric_methods]\n"),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("tensorflow.python.framework.dtypes", []), ("tensorflow.python.eager.monitoring", [])])


def test_a_torch_command_ends_short(tmp_path):
    """torch's bindings watch their types with weak references whose callbacks only forget them; its
    pytree module keeps a mode entered for good; its tensors and the classes pybind11 makes free memory
    only. A command that leaves a model and tensors behind skips the teardown; one that enters such a
    mode itself, replaces what that mode's exit calls, keeps weakref's finalizers from being called at
    exit or leaves a tensor with a finalizer ends in full. (torch's C++ static destructors run in every ending, as the C library's
    exit runs them: the reference here.)"""
    pytest.importorskip("torch")
    pytest.importorskip("optree")  # torch's pytree module enters its mode when optree is there
    work = ("import torch\nmodel = torch.nn.Linear(4, 2)\nloss = model(torch.randn(8, 4)).pow(2).mean()\n"
            "loss.backward()\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full-own-mode": work + ("import optree\nmode = optree.dict_insertion_ordered(True, namespace='x')\n"
                                 "mode.__enter__()\n"),
        "full-a-tensor-s-finalizer": work + ("class Noisy(torch.Tensor):\n    def __del__(self):\n        print('freed')\n"
                                             "kept = torch.randn(2).as_subclass(Noisy)\n"),
        "full-mode-s-exit-replaced": work + ("import optree.registry, types\n"
                                             "optree.registry._C = types.SimpleNamespace(set_dict_insertion_ordered="
                                             "lambda *args: print('set back'))\n"),
        "full-finalizers-not-called": work + "import atexit, weakref\natexit.unregister(weakref.finalize._exitfunc)\n",
        "none": work + "import ctypes\nctypes.PyDLL(None).exit(0)\n",
    }, imports=[("torch", []), ("torch.utils._cxx_pytree", [])])


EXIT_WRITER = """
import ctypes
_libc = ctypes.CDLL(None)
_libc.strdup.restype = ctypes.c_void_p
_libc.__cxa_atexit(_libc.puts, ctypes.c_void_p(_libc.strdup(b"library exit handler ran")), None)
"""


def _warm_outputs(tmp_path: Path, module: str, source: str, script: str, runs: int) -> tuple[list[str], str, int]:
    """Run ``script`` ``runs`` times from a plain warm pool whose parent imports ``module``: the commands'
    outputs, the parent's log and how many were built ahead."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"{module}.py").write_text(source)
    path = tmp_path / "script.py"
    path.write_text(script)
    env = scrubbed_env({"PYTHONPATH": str(lib)})
    pool = warm.WarmPool([(module, [])], [], False, tmp_path / "logs", [].append)
    outputs = []
    try:
        for _ in range(runs):
            proc = pool.launcher("experiment", [sys.executable, str(path)], (), tmp_path, env)(None)
            assert proc is not None
            outputs.append(proc.stdout.read().decode())
            assert proc.wait(60) == 0, proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
    finally:
        pool.close()
    log = "".join(p.read_text() for p in (tmp_path / "logs").glob("warm_parent_*.log"))
    return outputs, log, pool.ahead_used


def test_a_library_whose_c_exit_handlers_do_more_than_release_memory_has_them_run(tmp_path):
    """The C library's exit handlers of the parent's libraries are skipped at a command's end only if a
    fork of the parent, running them under a filter that stops any other system call, saw them release
    memory and nothing else (torch's take a tenth of a second and more). A library whose handler writes
    has it run at every command's end, as a cold start does."""
    script = "import fmlbench_exit_writer\nprint('script ran', flush=True)\n"
    [out], log, _ = _warm_outputs(tmp_path, "fmlbench_exit_writer", EXIT_WRITER, script, 1)
    env = scrubbed_env({"PYTHONPATH": str(tmp_path / "lib")})
    cold = subprocess.run([sys.executable, str(tmp_path / "script.py")], env=env, capture_output=True, text=True,
                          check=True)
    assert cold.stdout == "script ran\nlibrary exit handler ran\n", cold
    assert "the C library's exit handlers: they make other system calls" in log, log
    assert out == cold.stdout


ENDING_WRITES = """
import atexit

# objects of the parent that every command's ending writes to (their reference counts)
BIG = [[] for _ in range(20000)]


def _look():
    for item in BIG:
        pass


atexit.register(_look)
"""

# which pages of those objects this process holds alone, looked at without writing to them (their
# addresses read from the list's item array)
OWNED = """
import ctypes, mmap, fmlbench_ending_writes
big = fmlbench_ending_writes.BIG
items = (ctypes.c_void_p * len(big)).from_address(ctypes.c_void_p.from_address(id(big) + 24).value)
pages = sorted({address // mmap.PAGESIZE for address in items})
owned = 0
with open("/proc/self/pagemap", "rb") as pagemap:
    for page in pages:
        pagemap.seek(page * 8)
        entry = int.from_bytes(pagemap.read(8), "little")
        owned += bool(entry >> 63 & 1 and entry >> 56 & 1)
print(f"OWNED {owned} {len(pages)}", flush=True)
"""


def test_a_command_built_ahead_copies_the_pages_its_ending_writes_before_go(tmp_path, monkeypatch):
    """A command's ending writes to pages it shares with the parent (reference counts of the parent's
    objects, in the atexit handlers and this mechanism's look at what is left): each write copies a
    page, a fault of 10-20 us. A fork of the parent ends as an empty script does and reports those
    pages; a command built ahead copies them while it waits for go. The first command, not built
    ahead, shares them still; the one built ahead owns them (with nothing else of the parent copied
    ahead here, as when it is built beside another command)."""
    monkeypatch.setattr(warm, "OWN_PAGES_MAX", 0)
    outputs, log, built_ahead = _warm_outputs(tmp_path, "fmlbench_ending_writes", ENDING_WRITES, OWNED, 2)
    assert built_ahead == 1
    (first_owned, pages), (second_owned, same) = [map(int, out.split()[1:]) for out in outputs]
    assert pages == same and pages > 200
    assert first_owned < pages / 10 and second_owned > pages * 9 / 10, (first_owned, second_owned, pages)
    learnt = int(re.search(r"pages an ending writes, copied ahead: (\d+)", log).group(1))
    assert learnt >= pages, log


EXIT_FILE_WRITER = """
import atexit


def _write():
    with open(FILE, "a") as fh:
        fh.write("handler ran\\n")


atexit.register(_write)
"""


def test_finding_the_pages_an_ending_writes_does_nothing_else(tmp_path):
    """The fork that ends as an empty script does runs the libraries' atexit handlers: under a filter
    that ends it at any system call but those of memory and its own report, so a handler that does more
    (here, one that writes a file) is stopped before it does: nothing is copied ahead, and the
    commands' own endings run the handler as a cold start does, once each."""
    written = tmp_path / "exit.txt"
    source = f"FILE = {str(written)!r}\n" + EXIT_FILE_WRITER
    outputs, log, _ = _warm_outputs(tmp_path, "fmlbench_exit_file", source, "import fmlbench_exit_file\n", 2)
    assert "pages an ending writes, copied ahead: 0" in log, log
    assert written.read_text() == "handler ran\n" * 2


# an atexit handler that tries an import that finds nothing (as torch._dynamo's does at every exit: it
# tries ``import tabulate``), and writes to a table of its own
EXIT_IMPORT_TRIER = """
import atexit

TABLE = [[0] * 64 for _ in range(4096)]


def _dump():
    try:
        import fmlbench_not_installed  # noqa: F401
    except ImportError:
        pass
    for row in TABLE:
        row[0] += 1


atexit.register(_dump)
"""


def test_an_ending_that_tries_an_import_that_finds_nothing_has_its_pages_copied_ahead(tmp_path):
    """An import that finds nothing only looks at files' metadata along sys.path: the probe lets it
    through, learns the pages the ending writes (the handler's table among them), and the commands
    still end as a cold one does."""
    script = "import fmlbench_exit_import\nprint('script ran', flush=True)\n"
    outputs, log, ahead = _warm_outputs(tmp_path, "fmlbench_exit_import", EXIT_IMPORT_TRIER, script, 3)
    assert outputs == ["script ran\n"] * 3 and ahead == 2
    copied = int(re.search(r"pages an ending writes, copied ahead: (\d+)", log).group(1))
    assert copied >= 4096 // 8, log  # the table's rows, a few to a page, beside the ending's own


def test_a_warm_command_s_cpu_time_is_reported(tmp_path):
    """What the benchmarks measure where wall time is stretched by other work: the CPU time of a warm
    command's processes, as the kernel counted them (a cold one's stays inside bubblewrap's namespace)."""
    task = _task_with_runner(tmp_path, "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 0.3:\n    pass\n")
    cold, _ = _experiment(task, tmp_path / "cold", use_warm=False)
    hot, log = _experiment(task, tmp_path / "hot", use_warm=True)
    assert log.startswith("[warm]") and hot.warm and not cold.warm
    assert hot.cpu_s >= 0.3 and cold.cpu_s is None, (cold.cpu_s, hot.cpu_s)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has: only its parent's wait is left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


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
            mine = [pid for pid in _children(parent) if os.getpgid(pid) == proc.pid]
            assert len(mine) == 1, mine
            keeper = mine[0]
            deadline = time.monotonic() + 30
            while _running(keeper) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not _running(keeper)
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
    task = _task_with_runner(tmp_path, "import sys, pathlib\nLOCK_PATH = str(pathlib.Path(sys.argv[sys.argv.index('--out') + 1]) / "
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
    steps, used, _ = _steps(task, tmp_path / "run", 3)
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
    task = _task_with_runner(tmp_path, FILLS_ITS_TASK_LIMIT.replace("LIMIT", "24"))
    with open(task / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24}\n")
    steps, used, _ = _steps(task, tmp_path / "run", 2)
    assert [(result.ok, result.limit) for result, _ in steps] == [(True, None), (True, None)], [log for _, log in steps]
    assert used == 1
    over = _task_with_runner(tmp_path / "over", FILLS_ITS_TASK_LIMIT.replace("LIMIT", "25"))
    with open(over / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24}\n")
    steps, _, _ = _steps(over, tmp_path / "run_over", 1)
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
    task = _task_with_runner(tmp_path, PASSES_ITS_LIMITS_WHEN_TOLD)
    with open(task / "task.yaml", "a") as spec:
        spec.write("resources: {max_processes: 24, memory_mb: 300}\n")

    def told(ws, step):
        (ws.path / attack).write_text("")

    steps, used, discarded = _steps(task, tmp_path / "run", 2, between=told)
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
    pool = _pool(task, tmp_path, tmp_path / "logs", lines)
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
        while len(_children(parent.proc.pid)) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_children(parent.proc.pid)) <= 1
        proc = launch(holder)
        assert proc is not None, lines
        proc.stdout.read()
        assert proc.wait(60) == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    finally:
        pool.close()


# -- a step built ahead of its request ---------------------------------------------------------------


def _steps(task_dir: Path, root: Path, count: int, between=None, lines: list[str] | None = None):
    """``count`` sandboxed val runs of ``task_dir``'s runner in one workspace and one pool, as a search
    runs them (``out`` emptied in place); ``between(ws, step)`` runs before each step but the first.
    Their (result, log text), and the pool's counts of steps built ahead that were used and discarded."""
    from pytest_fmlbench.workspace import _emptied

    task = load_task(task_dir / "task.yaml")
    logs = root / "logs"
    pool = _pool(task, root, logs, lines)
    done = []
    try:
        ws = Workspace.create(task, root / "search", scrubbed_env({}), logs, True, pool)
        for step in range(count):
            if step and between is not None:
                between(ws, step)
            out = ws.out_dir("val")
            _emptied(out)
            result = ws.experiment("val", out, f"step{step}")
            done.append((result, (logs / f"step{step}.log").read_text()))
    finally:
        pool.close()
    return done, pool.ahead_used, pool.ahead_discarded


def test_a_step_built_ahead_sees_what_a_cold_step_sees(tmp_path, monkeypatch):
    """Once a step has ended, the next one's sandbox, control group, init and command process are built
    while nothing waits for them; the request then only says go. That step sees what a cold one sees.
    The control group the harness asks for at the request is then never made: the step runs in the one
    built with it, with the same limits."""
    from pytest_fmlbench.isolation import limits

    task = _task_with_runner(tmp_path, INTROSPECT)
    cold, cold_log = _experiment(task, tmp_path / "run", use_warm=False)
    asked: list[limits.StepGroup] = []
    monkeypatch.setattr(limits, "create", lambda *made, create=limits.create: asked.append(create(*made)) or asked[-1])
    lines: list[str] = []
    steps, used, discarded = _steps(task, tmp_path / "run", 3, lines=lines)
    assert cold.ok and all(result.ok for result, _ in steps), [log[-2000:] for _, log in steps]
    assert (used, discarded) == (2, 0) and lines == []
    # the first step's own (nothing was built ahead of it); the next two ran in the groups built ahead
    assert len(asked) == 1, asked
    assert not steps[0][1].startswith("[warm] [built ahead]")
    for _, log in steps[1:]:
        assert log.startswith("[warm] [built ahead] [sandbox: bwrap] $ "), log[:200]
        before, after = _probe(cold_log), _probe(log)
        assert {key: (before[key], after[key]) for key in before if before[key] != after.get(key)} == {}
        assert after["pid"] == 2 and after["ppid"] == 1 and after["pids"] == [1, 2]
        assert after["proc_1_cmdline"][0] == "bwrap" and after["shm"] == after["home"] == after["var_tmp"] == []


def test_a_step_built_ahead_is_built_while_the_harness_waits_for_another_command(tmp_path, monkeypatch):
    """Built as soon as a command ended, the next step took the harness's interpreter lock while the
    harness finished that command and started the next one. Where the steps follow one another at once,
    it is built once the harness has started its next command (the experiment's next step while the
    evaluator runs, the evaluator's while the next experiment runs), or when that very step is asked for."""
    monkeypatch.setattr(warm, "AHEAD_IDLE_S", 3600.0)  # never for the harness's idleness here
    monkeypatch.setattr(warm, "AHEAD_GAP_S", 3600.0)   # every request comes right after the last command
    task = load_task(DATA / "toy_task" / "task.yaml")
    lines: list[str] = []
    pool = _pool(task, tmp_path, tmp_path / "logs", lines)
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
    monkeypatch.setattr(warm, "AHEAD_GAP_S", 0.0)  # every request comes after some idleness
    monkeypatch.setattr(warm, "AHEAD_IDLE_S", 3600.0)
    task = load_task(DATA / "toy_task" / "task.yaml")
    lines: list[str] = []
    for idle_s in (3600.0, 0.01):
        monkeypatch.setattr(warm, "AHEAD_IDLE_S", idle_s)
        root = tmp_path / str(idle_s)
        pool = _pool(task, root, root / "logs", lines)
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
    task = _task_with_runner(tmp_path, runner)
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

    steps, used, discarded = _steps(task, tmp_path / "run", 4, between=change)
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

    task = _task_with_runner(tmp_path, "import sys\nsys.stderr.write('VERSION 0\\n')\n")
    steps, used, discarded = _steps(task, tmp_path / "run", 3, between=edit)
    logs = [log for _, log in steps]
    assert all(result.ok for result, _ in steps), logs
    assert (used, discarded) == (2, 0) and all(log.startswith("[warm] [built ahead]") for log in logs[1:])
    assert [re.findall(r"^VERSION .*$", log, re.MULTILINE) for log in logs] == [
        ["VERSION 0"], ["VERSION 1"], ["VERSION 2 True"]], logs
    assert logs[2].count("SyntaxWarning") == 1 and '"is" with a literal' in logs[2], logs[2]
    assert "SyntaxWarning" not in logs[0] + logs[1]
    cold, cold_log = _experiment(_task_with_runner(tmp_path / "cold", warns), tmp_path / "cold_run", use_warm=False)
    assert cold.ok and cold_log.count("SyntaxWarning") == 1


def test_a_step_built_ahead_reads_a_script_that_is_no_regular_file_only_at_go(tmp_path, monkeypatch):
    """A script that is a FIFO is not compiled ahead: opened then, it would take for the waiting step what
    its writer writes for the command, and leave the command nothing to read. The step built ahead reads
    it at go, as a cold start does."""
    import threading

    from pytest_fmlbench.workspace import _emptied

    monkeypatch.setattr(warm, "AHEAD_IDLE_S", 3600.0)  # built when this test lets it
    task = load_task(_task_with_runner(tmp_path, "# replaced by a FIFO\n") / "task.yaml")
    root = tmp_path / "run"
    pool = _pool(task, root, root / "logs")
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
    task = _task_with_runner(tmp_path, f"import sys\nsys.stderr.write('RAN {marker}\\n')\n")
    loaded = load_task(task / "task.yaml")
    pool = _pool(loaded, tmp_path, tmp_path / "logs")
    try:
        ws = Workspace.create(loaded, tmp_path / "search", scrubbed_env({"FMLBENCH_TEST_MARK": marker}),
                              tmp_path / "logs", True, pool)
        result = ws.experiment("val", ws.out_dir("val"), "step0")
        assert result.ok and f"RAN {marker}" in result.output_tail
        ahead = pool.ahead["experiment"]
        ahead.thread.join()
        assert ahead.failure is None, ahead.failure
        group_dirs = list(ahead.group.dirs) if hasattr(ahead.group, "dirs") else []
        built = [pid for pid in _children(ahead.pid)] + [ahead.pid]
        assert all(Path(f"/proc/{pid}").exists() for pid in built)
    finally:
        pool.close()
    assert none_left_with(str(tmp_path / "search")), "a process built ahead outlived the pool"
    deadline = time.monotonic() + 30
    while any(map(_running, built)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_running, built)), built
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
    task = _task_with_runner(tmp_path, LEAVES_A_DAEMON.replace("MARKER", marker))
    alive_at_end = []
    real_wait = warm.WarmProcess.wait

    def wait(self, timeout=None):
        code = real_wait(self, timeout)
        alive_at_end.append(host_processes_with(marker))
        return code

    monkeypatch.setattr(warm.WarmProcess, "wait", wait)
    steps, used, _ = _steps(task, tmp_path / "run", 3)
    assert all(result.ok for result, _ in steps) and used == 2
    assert len(alive_at_end) >= 3 and not any(alive_at_end), alive_at_end
    assert none_left_with(marker)


def test_a_step_built_ahead_that_was_killed_while_it_waited_is_built_again(tmp_path):
    """A signal for the whole job (Slurm's scancel, say) may kill what was built ahead while it waits:
    the next request is then served as any other, warm, with no error (it once failed the run with a
    broken pipe when the harness said go)."""
    import signal

    task = _task_with_runner(tmp_path, "import sys\nsys.stderr.write('RAN\\n')\n")

    def kill_what_was_built(ws, step):
        ahead = ws.warm.ahead["experiment"]
        ahead.thread.join()
        assert ahead.failure is None, ahead.failure
        ahead.group.kill_all(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _running(ahead.pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    steps, used, discarded = _steps(task, tmp_path / "run", 3, between=kill_what_was_built)
    assert [result.ok for result, _ in steps] == [True] * 3, [log[-1500:] for _, log in steps]
    assert all(log.startswith("[warm] [sandbox: bwrap]") and "RAN" in log for _, log in steps)
    assert (used, discarded) == (0, 2)

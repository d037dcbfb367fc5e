"""Warm interpreters (isolation.warm): a step forked from a warm parent sees what a cold step sees, leaves
nothing behind for the next step, cannot reach the parent, and falls back to a cold start where forking
would be unsafe."""

import json
import os
import re
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from leftover_processes import none_left_with
import yaml

from conftest import DATA, load_record
from warm_support import probe_of, run_experiment, task_with_runner, warm_pool
from warm_probes import CHECK, INTROSPECT, LEAVE, PARENT_ATTACK

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import TaskSpecError, load_task
from pytest_fmlbench.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


# -- a step sees what it saw before -----------------------------------------------------------------


def test_a_warm_step_sees_what_a_cold_step_sees(tmp_path):
    task = task_with_runner(tmp_path, INTROSPECT)
    cold, cold_log = run_experiment(task, tmp_path / "cold", use_warm=False)
    lines: list[str] = []
    hot, hot_log = run_experiment(task, tmp_path / "cold", use_warm=True, lines=lines)
    assert cold.ok and hot.ok, (cold_log, hot_log)
    assert not cold_log.startswith("[warm]") and hot_log.startswith("[warm] [sandbox: bwrap] $ "), lines
    before, after = probe_of(cold_log), probe_of(hot_log)
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

    task = load_task(task_with_runner(tmp_path, READS_ITS_INIT) / "task.yaml")
    logs = tmp_path / "logs"
    pool = warm_pool(task, tmp_path, logs)
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
    task = task_with_runner(tmp_path, ERRORS[name])
    # the same root both times: paths in tracebacks are the same
    cold, _ = run_experiment(task, tmp_path / "run", use_warm=False)
    cold_file = (tmp_path / "run" / "search" / "out" / "val" / "left-open.txt")
    cold_file = cold_file.read_text() if cold_file.exists() else None
    out = tmp_path / "run" / "search" / "out" / "val"
    cold_listing = sorted(os.listdir(out))
    hot, log = run_experiment(task, tmp_path / "run", use_warm=True)
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
        assert hot.stderr.startswith("Traceback (most recent call last):\n  File \"") \
            and str(warm.PARENT_SCRIPT.parent) not in hot.stderr


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
    pool = warm_pool(task, tmp_path, tmp_path / "logs", lines)
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
    pool = warm_pool(task, tmp_path, tmp_path / "logs", lines)
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
    result, log = run_experiment(task_dir, tmp_path / "run", use_warm=True)
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

"""Scripts for the warm-start tests: what a step can observe of its process, and what one step tries
to leave behind for the next or to do to the warm parent. Each writes one ``PROBE <json>`` line or
``LEAK``/``ATTACK`` lines that the tests read in the step logs, each line in one write to stderr: the
log interleaves stdout and stderr as their two pipes deliver, so only one stream keeps lines whole
and in order (the runners write their own lines to stderr too)."""

SAY = "import sys as _sys\ndef say(*parts):\n    _sys.stderr.write(' '.join(map(str, parts)) + '\\n')\n"

# The runner of a probe task (its train.py): everything a script can see of the process it runs in.
# Values that differ from run to run whatever the start (pids in /proc/self/stat, times, namespace
# inode numbers, mount ids) are left out or normalised; what a warm start changes on purpose is
# compared by the tests, not here.
INTROSPECT = r'''
import ctypes, gc, json, os, resource, signal, sys, threading

libc = ctypes.CDLL(None)


def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()


def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return f"{type(exc).__name__}"


def mounts():
    seen = []
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        fields = left.split()
        seen.append([fields[4], right.split()[0], fields[5].split(",")[0]])
    return sorted(seen)


def pdeathsig():
    sig = ctypes.c_int()
    libc.prctl(2, ctypes.byref(sig))
    return sig.value


main = sys.modules["__main__"]
out = sys.argv[sys.argv.index("--out") + 1]
probe = {
    "pid": os.getpid(), "ppid": os.getppid(), "session_leader_is_init": os.getsid(0) == 1, "pgid": os.getpgid(0),
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
    "caps": [status(k) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status("NoNewPrivs"), "seccomp": status("Seccomp"), "pdeathsig": pdeathsig(),
    "dumpable": libc.prctl(3, 0, 0, 0, 0), "umask": os.umask(0o022),
    "cwd": os.getcwd(), "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path,
    "flags": list(sys.flags), "executable": sys.executable,
    "main": {k: (type(v).__name__ if k in ("__loader__", "__builtins__") else repr(v)) for k, v in vars(main).items()
             if k.startswith("__") and k != "__warningregistry__"},
    "loader": [main.__loader__.name, main.__loader__.path],
    "environ": dict(os.environ),
    "proc_environ": sorted(open("/proc/self/environ", "rb").read().decode().split("\0")),
    "signals": {s.name: str(signal.getsignal(s)) for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "pids": listing("/proc") if False else sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "proc_1_stat": open("/proc/1/stat").read().split(") ")[1].split()[:3],
    "proc_1_cmdline": open("/proc/1/cmdline", "rb").read().decode().split("\0"),
    "proc_1_comm": open("/proc/1/comm").read(),
    "cmdline": open("/proc/self/cmdline", "rb").read().decode().split("\0"),
    "comm": open("/proc/self/comm").read(),
    "mounts": mounts(),
    "root": listing("/"), "tmp": listing("/tmp"), "shm": listing("/dev/shm"), "home": listing(os.path.expanduser("~")),
    "dev": listing("/dev"), "var_tmp": listing("/var/tmp"), "proc_covered": [os.access(p, os.W_OK) for p in ("/proc/irq", "/proc/bus")],
    "hostname": os.uname().nodename, "net": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
    "fds": sorted(os.listdir("/proc/self/fd")),
    "fd_kinds": [os.readlink(f"/proc/self/fd/{fd}").split(":")[0] for fd in (0, 1, 2)],
    "cgroup": open("/proc/self/cgroup").read(),
    "rlimits": {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")},
    "stdout": [sys.stdout.isatty(), sys.stdout.line_buffering, sys.stdout.write_through, sys.stdout.encoding,
               sys.stdout.errors, sys.stdout.seekable(), sys.stdin.readable(), sys.stdin.read()],
    "threads_python": [t.name for t in threading.enumerate()],
    "gc": [gc.isenabled(), gc.get_threshold()],
    "excepthook": sys.excepthook is sys.__excepthook__,
    "hash": hash("fmlbench"),
    "write_out": os.access(out, os.W_OK), "write_root": os.access("/usr", os.W_OK),
}
sys.stderr.write("PROBE " + json.dumps(probe, sort_keys=True, default=repr) + "\n")
'''

# Step 1 of the leakage test: everything a step might try to leave for the next one (its processes carry
# MARKER in their command lines, for the test to look for them on the host).
LEAVE = SAY + r'''
import gc, json, os, random, signal, subprocess, sys, threading, time
import numpy
import pytest_fmlbench.evalkit as kit
open("/tmp/leak_tmp", "w").write("x")
open("/dev/shm/leak_shm", "w").write("x")
open("/var/tmp/leak_var_tmp", "w").write("x")
open(os.path.expanduser("~/leak_home"), "w").write("x")
os.environ["FMLBENCH_LEAK"] = "1"
os.putenv("FMLBENCH_LEAK_PUTENV", "1")
numpy.LEAKED = True
numpy.mean = lambda *a, **k: 42.0
kit.LEAKED = True
json.LEAKED = True
import builtins
builtins.LEAKED = True
sys.path.insert(0, "/tmp/leak_path")
sys.meta_path.insert(0, type("Finder", (), {"find_spec": staticmethod(lambda *a, **k: None), "LEAKED": True})())
signal.signal(signal.SIGTERM, lambda *a: None)
gc.disable()
numpy.random.seed(1234)
random.seed(1234)
threading.Thread(target=lambda: time.sleep(60), name="leaked-daemon", daemon=True).start()
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # MARKER"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# a grandchild that double-forks away from its parent, as daemons do, then becomes a program of its own
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)  # MARKER-daemon"])
    os._exit(0)
# a System V shared memory segment: it outlives its process, until its IPC namespace goes
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.shmget(0x464D4C42, 4096, 0o1000 | 0o600) < 0:  # IPC_CREAT
    raise OSError(ctypes.get_errno(), "shmget")


def marked():
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            found += b"MARKER" in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            pass
    return found


# both processes run their marked programs before this step ends (else the test could not see them survive)
deadline = time.monotonic() + 30
while marked() < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
say("LEAK left", json.dumps({"numpy_draw_after_seed": numpy.random.random_sample(), "random_draw_after_seed": random.random(),
                             "marked_processes": marked(), "sysv_shm": len(open("/proc/sysvipc/shm").readlines()) - 1}))
'''

# Step 2 of the leakage test: what of step 1 is still there (every value should be empty or False).
CHECK = SAY + r'''
import gc, json, os, random, signal, sys, threading
import numpy
import pytest_fmlbench.evalkit as kit
found = {
    "tmp": [n for n in os.listdir("/tmp") if n.startswith("leak")],
    "shm": [n for n in os.listdir("/dev/shm") if n.startswith("leak")],
    "var_tmp": [n for n in os.listdir("/var/tmp") if n.startswith("leak")],
    "home": [n for n in os.listdir(os.path.expanduser("~")) if n.startswith("leak")],
    "environ": [k for k in os.environ if k.startswith("FMLBENCH_LEAK")],
    "proc_environ": "FMLBENCH_LEAK" in open("/proc/self/environ").read(),
    "numpy_patched": bool(hasattr(numpy, "LEAKED") or numpy.mean([1.0, 2.0]) != 1.5),
    "package_patched": hasattr(kit, "LEAKED"),
    "json_patched": hasattr(json, "LEAKED"),
    "builtins_patched": hasattr(sys.modules["builtins"], "LEAKED"),
    "sys_path": "/tmp/leak_path" in sys.path,
    "meta_path": any(getattr(f, "LEAKED", False) for f in sys.meta_path),
    "sigterm_handler": signal.getsignal(signal.SIGTERM) != signal.SIG_DFL,
    "gc_disabled": not gc.isenabled(),
    "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
    "sysv_shm": [line.split()[0] for line in open("/proc/sysvipc/shm").readlines()[1:]],
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())),
}
draws = {"numpy_draw": numpy.random.random_sample(), "random_draw": random.random()}
say("LEAK found", json.dumps(found, sort_keys=True), json.dumps(draws))
'''

# A step that goes after the warm parent and the namespace's init with everything it can reach.
PARENT_ATTACK = SAY + r'''
import ctypes, os, signal, socket
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
say("ATTACK visible pids", pids, "ppid", os.getppid())
for pid in pids:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"isolation/warm/parent/" in cmd:
        say("ATTACK FOUND a warm parent", pid)
for target in [p for p in pids if p != me] + [os.getppid()]:
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(target, sig)
        except OSError as exc:
            say("ATTACK signal refused", target, sig, exc)
for pid in [p for p in pids if p != me]:
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        say("ATTACK traced", pid)
    else:
        say("ATTACK ptrace refused", pid, os.strerror(ctypes.get_errno()))
    for path, mode in ((f"/proc/{pid}/mem", "r+b"), (f"/proc/{pid}/mem", "rb"), (f"/proc/{pid}/environ", "rb")):
        try:
            with open(path, mode) as fh:
                fh.read(1)
            say("ATTACK opened", path, mode)
        except OSError as exc:
            say("ATTACK refused", path, mode, type(exc).__name__)
    try:
        say("ATTACK listed", os.listdir(f"/proc/{pid}/fd"))
    except OSError as exc:
        say("ATTACK refused fd listing", pid, type(exc).__name__)
    try:
        say("ATTACK root of", pid, os.listdir(f"/proc/{pid}/root"))
    except OSError as exc:
        say("ATTACK refused root", pid, type(exc).__name__)
# pids guessed blindly (the warm parent's among them on the host): none exists in this namespace
guessed = []
for pid in range(3, 1 << 15):
    try:
        os.kill(pid, 0)
        guessed.append(pid)
    except ProcessLookupError:
        pass
    except OSError:
        guessed.append(pid)
say("ATTACK guessed pids", guessed)
# everything this process may signal in its namespace, the namespace's init excepted (the kernel's rule)
try:
    os.kill(-1, signal.SIGKILL)
except OSError as exc:
    say("ATTACK kill(-1) refused", exc)
# a UNIX socket of the parent's, by name
say("ATTACK unix sockets", [l.split()[-1] for l in open("/proc/net/unix").readlines()[1:] if len(l.split()) > 7])
say("ATTACK done")
'''

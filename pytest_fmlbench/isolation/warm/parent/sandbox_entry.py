"""Entering a step's sandbox: join its control group and the namespaces of the bubblewrap sandbox the
harness built, unshare a fresh PID and cgroup namespace, mount its ``/proc`` with bubblewrap's covers,
drop every privilege, and become the namespace's init, which forks the command and reports its end.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import ctypes
import resource
import signal
import time


def _join_limits(request):
    """The step's control group (its memory and process limits) or rlimits, before anything else starts."""
    for procs in request.get("cgroup_procs") or ():
        try:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        except OSError as exc:
            raise MechanismError(f"cannot join the step's control group {procs}: {exc}") from None
    for which, soft, hard in request.get("rlimits") or ():
        resource.setrlimit(which, (soft, hard))


def _enter_sandbox(request, stdout, stderr, status, last_cap, go=None, start=None):  # noqa: C901 - one sequence, in order
    """Join the namespaces of the step's bubblewrap sandbox (built by the harness with the step's own
    arguments), then make the command the second process of a fresh PID namespace, as bubblewrap does.

    Three processes: this one stays outside (it reports the exit), the namespace's init (pid 1, reaps,
    exits with the command's status, and with it everything the command left), and the command (pid 2).
    """
    holder = request["ns_pid"] if go is None else _holder_pid(go)
    try:
        # bubblewrap's covers over /proc (read-only binds of /proc/irq, /proc/bus, ...), to make again
        # on the fresh /proc of the new PID namespace
        with open(f"/proc/{holder}/mountinfo") as fh:
            covers = [line.split()[4] for line in fh if line.split()[4].startswith("/proc/")]
        namespaces = [(os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY), name, flag) for name, flag in _JOIN]
    except OSError as exc:
        raise MechanismError(f"the step's sandbox is gone: {exc}") from None
    for fd, name, flag in namespaces:
        _check(_LIBC.setns(fd, flag), f"setns({name})")
        os.close(fd)
    _report(status, "joined")
    # a private copy of the sandbox's mounts, a new PID namespace for the next child, and a cgroup
    # namespace rooted at the step's control group (bubblewrap's --unshare-cgroup-try)
    _check(_LIBC.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWCGROUP), "unshare")
    init = os.fork()
    if init != 0:
        for fd in (stdout, stderr, *([start] if start is not None else [])):
            os.close(fd)
        # nothing left to do here that needs a privilege
        _drop_privileges(last_cap)
        _prctl(PR_SET_DUMPABLE, 0)
        _, wait_status, usage = os.wait4(init, 0)
        # the init has reported already, unless it was killed or failed first: the harness reads the first
        _report(status, _exit_line(wait_status, usage))
        os._exit(0)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()  # bubblewrap's --new-session: the init leads the session, the command inherits it
    _fresh_proc(covers)
    _drop_privileges(last_cap)
    _prctl(PR_SET_DUMPABLE, 0)  # the init holds this parent's memory: no one may read or trace it
    # signals from inside reach a namespace's init only when it handles them: it handles none
    for sig in _catchable():
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    # The init shows bubblewrap's command line, environment and name before the command exists: the
    # command is pid 2 and may read /proc/1 at its first line. Presented after the fork, a command that
    # got a core first under load could read the warm parent's command line there (seen 4 times in 400
    # steps at load average 5).
    init_argv = request.get("init_argv") or []
    own_name = _name()
    init_args = _present(init_argv, request.get("init_env") or {}, os.path.basename(init_argv[0])) if init_argv else None
    command = os.fork()
    if command == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if init_args is not None:
            _set_name(own_name)
            global _INIT_ARGS
            _INIT_ARGS = init_args  # unmapped once the command shows its own
        return
    # what bubblewrap's init holds: the step's output
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    _close_all_but((status,))
    while True:
        pid, wait_status = os.wait()
        if pid == command:
            break
    # bubblewrap's encoding: the command's code, or 128 + the signal that killed it
    code = os.waitstatus_to_exitcode(wait_status)
    code = code if code >= 0 else 128 - code
    # Whatever the command left (its children, a daemon) ends now, as it would when bubblewrap's init
    # exits. Once all are reaped, or are ending with nothing left open (the command's memory keeper),
    # nothing of the step runs, and this init reports the exit itself: its own end and theirs
    # (releasing memory, milliseconds) is then nobody's wait.
    try:
        looks, moved = 0, False
        while True:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG | _WALL)
            except ChildProcessError:
                break
            if pid:
                continue
            if not moved:
                moved = True
                _run_elsewhere()
            if _only_ending_left():
                break
            if looks < _ENDING_LOOKS:
                looks += 1
                time.sleep(_ENDING_LOOK_S)  # a process killed a moment ago is about to be ending
                continue
            try:
                os.waitpid(-1, _WALL)
            except ChildProcessError:
                break
        os.dup2(0, 1)  # the step's output ends here (0 is /dev/null)
        os.dup2(0, 2)
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        _report(status, f"exit {code} {own.ru_utime + children.ru_utime:.6f} "
                        f"{own.ru_stime + children.ru_stime:.6f} {own.ru_minflt + children.ru_minflt}")
    finally:
        os._exit(code)


def _run_elsewhere():
    """Move the namespace's other processes, just killed, off this init's processor. Woken by the kill
    here, they would start their end (the memory keeper's release of the command's memory among it,
    milliseconds) only once this init sleeps, and this init waits for them to have started it: on
    another processor they start it at once, beside this init's looks."""
    try:
        others = os.sched_getaffinity(0) - {_LIBC.sched_getcpu()}
    except OSError:
        return
    if not others:
        return
    for task in _namespace_tasks(init=False) or ():
        try:
            os.sched_setaffinity(int(task.rsplit("/", 1)[1]), others)
        except (OSError, ValueError):
            pass  # ended meanwhile, or outside what this namespace may use


def _namespace_tasks(init=True):
    """The /proc folder of every thread of every process of this PID namespace (its init's too, unless
    ``init`` is False), or None where /proc cannot say."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit() and (init or name != "1")]
    except OSError:
        return None
    folders = []
    for pid in pids:
        try:
            folders += [f"/proc/{pid}/task/{task}" for task in os.listdir(f"/proc/{pid}/task")]
        except FileNotFoundError:
            continue  # reaped meanwhile
        except OSError:
            return None
    return folders


def _only_ending_left():
    """Whether every process of the namespace but its init is ending (in the kernel's exit, running
    nothing of its own any more) with no descriptor open: the init may then report the step's end.
    Every thread is looked at: a leader that has exited lists no descriptor while its other threads run."""
    tasks = _namespace_tasks(init=False)
    if tasks is None:
        return False
    for task in tasks:
        try:
            with open(f"{task}/stat", "rb") as fh:
                stat = fh.read()
            if not int(stat[stat.rindex(b")") + 2:].split()[6]) & PF_EXITING or os.listdir(f"{task}/fd"):
                return False
        except FileNotFoundError:
            continue  # ended meanwhile
        except (OSError, ValueError, IndexError):
            return False
    return True


def _holder_pid(go):
    """The pid the harness writes once the step's sandbox is ready (it closes the pipe unwritten if the
    sandbox did not start)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(go, 64)
        if not chunk:
            raise MechanismError("the step's sandbox did not start")
        data += chunk
    os.close(go)
    return int(data)


def _fresh_proc(covers):
    """/proc of the new PID namespace, with bubblewrap's read-only covers. The kernel lets a user
    namespace mount proc only while a fully visible one is mounted: mount it aside, then swap."""
    _check(_LIBC.mount(b"proc", b"/tmp", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount proc")
    _check(_LIBC.umount2(b"/proc", MNT_DETACH), "umount /proc")
    _check(_LIBC.mount(b"/tmp", b"/proc", None, MS_MOVE, None), "move /proc")
    for path in covers:
        target = path.encode()
        if not os.path.exists(path):
            continue
        _check(_LIBC.mount(target, target, None, MS_BIND, None), f"bind {path}")
        _check(_LIBC.mount(target, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           None), f"remount {path}")


def _drop_privileges(last_cap):
    """bubblewrap's --cap-drop ALL and no_new_privs."""
    for cap in range(last_cap + 1):
        _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _check(_LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_LIBC.capset(header, data), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


_WALL = 0x40000000
PF_EXITING = 0x4
# how often, and how long apart, the init looks whether what it killed is ending before it waits
_ENDING_LOOKS, _ENDING_LOOK_S = 8, 0.0005

"""A warm parent: an interpreter that has imported a task's heavy libraries and forks one child per command.

Compiled and run by its script, ``warm_parent_main.py`` (never imported), which
``pytest_fmlbench.isolation.warm`` starts as ``python [flags] warm_parent_main.py FD``, FD one end of
a SOCK_SEQPACKET socket pair whose other end only the harness holds. It imports nothing
of this package and no task or agent code, only the standard library and the modules the harness
names. See ``warm``'s docstring for the design and the guarantees; this file is the mechanism.

Messages (JSON, one per packet; file descriptors ride along as SCM_RIGHTS):

* harness -> parent, first: ``{"imports": [[module, [from-names]], ...], "optional": bool, "guard": {...}|null}``
* parent -> harness: the ready report (what was imported, and what would make forking it unsafe)
* harness -> parent, per command: ``{"mode": "sandbox"|"plain", "script", "argv", "orig_argv", "cwd", "env",
  "ns_pid", "cgroup_procs", "tasks_max", "rlimits", "ahead"}`` with fds [stdout, stderr, status], in sandbox mode then
  [go]: a pipe on which the harness writes the pid of the process holding the step's sandbox once it is
  ready (``ns_pid`` null), or which it closes unwritten if the sandbox did not start. With ``ahead``
  (a command built before its request) last [start]: the command's process gets everything ready, reports
  ``ready`` and waits for ``go`` on that pipe before its script begins; an end without it (the harness
  discarded the step) ends the process and nothing of the script runs
* parent -> harness: ``{"pid": N}`` (the child's pid on the host) or ``{"error": "..."}``
* on the status socket: ``joined`` (sandbox mode: the child is in the step's sandbox, whose holder the
  harness may now let go), ``started`` (the next thing this process runs is the command's script),
  ``ready`` (ahead: waiting for ``go``), ``failed REASON`` (the mechanism failed; no code of the command
  ran), ``exit CODE USER_S SYSTEM_S MINOR_FAULTS`` (the code as subprocess reports it, in sandbox mode as
  bubblewrap reports its command's exit; then the command's CPU time and page faults, in sandbox mode
  with its namespace's init's). In sandbox mode the namespace's init reports the exit once it has
  ended and reaped every other process of the namespace, or sees it ending with no descriptor open
  (nothing of the step runs any more); the child
  that stayed outside reports it again once the init has ended (the only report if the init was killed
  first): the first one counts. The command itself never holds the
  status socket: it could otherwise write any of these lines.
"""

import os
import sys
import atexit
import ctypes
import errno
import gc
import importlib.machinery
import io
import itertools
import json
import resource
import select
import signal
import socket
import stat
import struct
import _socket
import time
import types
import _thread
import _weakref

_CONTROL = int(sys.argv[1])
_LIBC = ctypes.CDLL(None, use_errno=True)
_PYTHON_LIBC = ctypes.PyDLL(None)  # its calls keep the interpreter's lock

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# the order matters: the user namespace first, whose capabilities allow joining the others
_JOIN = (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS), ("ipc", CLONE_NEWIPC), ("uts", CLONE_NEWUTS),
         ("net", CLONE_NEWNET))
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_MOVE = 1, 2, 4, 8, 32, 4096, 8192
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522


class MechanismError(Exception):
    """Entering the sandbox failed; no code of the command has run."""


def _check(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise MechanismError(f"{what}: {os.strerror(code)}")


def _prctl(option, value):
    _check(_LIBC.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


# -- the guard: what importing may do in this process, which runs outside the sandbox ----------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITES = {"os.mkdir", "os.rmdir", "os.remove", "os.rename", "os.link", "os.symlink", "os.chmod", "os.chown",
           "os.truncate", "os.utime", "os.setxattr", "os.removexattr", "shutil.copyfile", "shutil.copymode",
           "shutil.copystat", "shutil.copytree", "shutil.rmtree", "shutil.move", "shutil.make_archive",
           "shutil.unpack_archive", "tempfile.mkstemp", "tempfile.mkdtemp"}
_SPAWNS = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen",
           "pty.spawn"}
_NETWORK = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
            "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
_CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".so")


def _under(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _quiet_hook_adders():
    """The code of the functions known to add an audit hook that does nothing at the interpreter's end:
    the task kit's data guard (``seal``; its hook looks at "open" events only), compiled from the
    package's own file beside this one (nothing of the package is imported), as a workspace's
    protected copy of it compiles."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "taskkit", "data_guard.py")
    try:
        with open(path, "rb") as fh:
            module = compile(fh.read(), path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == "seal")


_QUIET_HOOK_ADDERS = ()  # set as the parent starts, before its guard


def _adds_a_quiet_hook(frame):
    """Whether ``frame``, which is calling sys.addaudithook, is one of ``_QUIET_HOOK_ADDERS``: the same
    code (code objects compare their instructions, constants, nested code and names, not their file)."""
    return frame is not None and any(frame.f_code == code for code in _QUIET_HOOK_ADDERS)


class _Guard:
    """An audit hook: while the libraries are imported, nothing may happen that the sandbox would have
    answered differently. Reading an existing file outside the trees the sandbox shows (or a hidden data
    file), listing such a folder, writing anything, starting a process or using the network is refused
    (raised) and recorded; the harness then keeps this parent out of use. Audit hooks cannot be removed:
    after the imports the hook returns at once (``active`` False), in this process and in every child."""

    def __init__(self, spec):
        self.active = spec is not None
        self.read = tuple((spec or {}).get("read", ()))
        self.masked = tuple((spec or {}).get("masked", ()))
        self.ancestors = frozenset((spec or {}).get("ancestors", ()))
        self.scratch = tuple((spec or {}).get("scratch", ()))
        # files created in the sandbox's private scratch folders and not yet removed (tempfile checks
        # that /tmp is writable by creating and removing a file: that leaves nothing behind)
        self.created = set()
        self.made = []
        self.started = []
        self.refused = []
        self._busy = False

    def __call__(self, event, args):
        if event == "sys.addaudithook":
            # a hook added after this one is called at the interpreter's end: an ending to play out,
            # unless it is one known to do nothing then (the caller's frame is the one adding it)
            if not _adds_a_quiet_hook(sys._getframe(1)):
                _Ending.hooked = True
        elif event.startswith("ctypes.dlsym") and len(args) > 1 and _registers_exit_handlers(args[1]):
            # a C exit handler of the command's own (through ctypes): the C library's exit must run it
            _Ending.c_registered = True
        if not self.active or self._busy:
            return
        self._busy = True
        try:
            problem = self._problem(event, args)
        finally:
            self._busy = False
        if problem:
            self.refused.append(problem)
            raise PermissionError(errno.EACCES, f"not while a warm parent imports: {problem}")

    def _problem(self, event, args):
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if not isinstance(path, (str, bytes)):
                return None  # an fd: opened earlier, under the guard
            path = os.path.abspath(os.fsdecode(path))
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            fresh = (isinstance(mode, str) and "x" in mode) or (
                isinstance(flags, int) and flags & os.O_CREAT and flags & os.O_EXCL)
            if writes and fresh and any(_under(path, folder) and path != folder for folder in self.scratch):
                self.created.add(path)
                return None
            if writes and (path == "/dev/null" or path in self.scratch):
                # the null device; a scratch folder itself is no file to write: tempfile's named files
                # announce the folder, their opener then creates the file (checked as above)
                return None
            unnamed = isinstance(flags, int) and flags & os.O_TMPFILE == os.O_TMPFILE
            if unnamed and any(_under(path, folder) for folder in self.scratch):
                return None  # a file without a name: it is gone when closed (and descriptors are checked)
            if writes:
                return f"writes {path}"
            return None if self._readable(path) else f"reads {path}"
        if event == "os.remove" and args and isinstance(args[0], (str, bytes)):
            path = os.path.abspath(os.fsdecode(args[0]))
            if path in self.created:
                self.created.discard(path)
                return None
            return f"os.remove {path}"
        if event in ("os.listdir", "os.scandir"):
            path = os.path.abspath(os.fsdecode(args[0] if args and args[0] is not None else "."))
            if not isinstance(args[0] if args else None, int) and not (
                    self._readable(path) or path in self.ancestors):
                return f"lists {path}"
            return None
        if event == "os.mkdir" and args and isinstance(args[0], (str, bytes)):
            path = os.path.abspath(os.fsdecode(args[0]))
            if any(_under(path, folder) and path != folder for folder in self.scratch) and os.path.isdir(
                    os.path.dirname(path)):
                # a cache folder in /tmp (torch's inductor makes one at import): it is made again in
                # every child's own scratch folder, where a cold import would have made it
                self.made.append([path, args[1] if len(args) > 1 and isinstance(args[1], int) else 0o777])
                return None
            return f"os.mkdir {path}"
        if event in _WRITES:
            return f"{event} {args[0] if args else ''}"
        if event in _SPAWNS:
            return self._spawn_problem(event, args)
        if event in _NETWORK:
            return f"uses the network ({event} {args[1:2] if len(args) > 1 else ''})"
        return None

    def _spawn_problem(self, event, args):
        """A program of the trees the sandbox shows may run (ctypes.util.find_library runs gcc or ld at
        import); its own reads and writes are its own, as a C extension's are. Any other is refused."""
        if event == "os.fork":
            return None
        if event == "subprocess.Popen":
            program = args[0] or (args[1][0] if isinstance(args[1], (list, tuple)) and args[1] else args[1])
        else:
            program = args[0] if args else None
        if isinstance(program, (str, bytes)):
            program = os.fsdecode(program)
            if os.sep not in program:
                import shutil

                program = shutil.which(program) or program
            if os.path.isabs(program) and any(_under(os.path.realpath(program), tree) for tree in self.read):
                self.started.append(program)
                return None
        return f"starts a process ({event} {program!r})"

    def _readable(self, path):
        if not os.path.lexists(path):
            return True  # absent here, absent there: the sandbox answers the same
        real = os.path.realpath(path)
        for candidate in {path, real}:
            for folder in self.masked:
                if _under(candidate, folder) and not (candidate != folder and candidate.endswith(_CODE_SUFFIXES)
                                                       and os.path.isdir(folder)):
                    return False
        return any(_under(path, tree) for tree in self.read) and any(_under(real, tree) for tree in self.read)


# -- start-up: import, then report what could make a fork unsafe ------------------------------------


def _threads():
    return len(os.listdir("/proc/self/task"))


def _fd_targets(keep):
    found = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in keep:
            continue
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass  # the descriptor listdir itself used
    return found


def _mapped():
    files, shared_writable, devices = set(), [], []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) > 5 else ""
            if path.startswith("/dev/nvidia"):
                devices.append(path)
            if "w" in parts[1] and parts[1].endswith("s"):
                shared_writable.append(path or "[anonymous]")
            # anonymous memory with a name (/memfd:..., /SYSV...) is no file the sandbox could hide
            if path.startswith("/") and not path.endswith(" (deleted)") and os.path.isfile(path):
                files.add(path)
    return files, shared_writable, devices


def _start(control):
    config = json.loads(control.recv(1 << 20))
    # registered before any library's handler, so that a command's interpreter calls it after all of them
    atexit.register(_Ending.at_exit)
    global _QUIET_HOOK_ADDERS
    _QUIET_HOOK_ADDERS = _quiet_hook_adders()  # before the guard: the package's own file, read once
    guard = _Guard(config.get("guard"))
    sys.addaudithook(guard)
    imported, skipped, failed = [], [], []
    import importlib.util

    for module, names in config["imports"]:
        top = module.partition(".")[0]
        try:
            if config.get("optional") and importlib.util.find_spec(top) is None:
                skipped.append(module)  # not installed: the command would not find it either
                continue
            __import__(module, fromlist=names or ())
            imported.append(module)
        except BaseException as exc:  # noqa: BLE001 - an import may raise anything, SystemExit included
            failed.append(f"{module} failed: {type(exc).__name__}: {exc}"[:300])
            break
    if not failed:
        # what the libraries now held import on their first use, which every command would import again
        for library, modules in sorted((config.get("first_use") or {}).items()):
            for module in modules if library in sys.modules else ():
                if module in sys.modules:
                    continue
                try:
                    __import__(module)
                    imported.append(module)
                except Exception:  # noqa: BLE001 - the command imports it itself, as a cold one would
                    skipped.append(module)
    guard.active = False
    guard.refused += [f"left {path} behind" for path in sorted(guard.created)]
    # the libraries' own thread pools (OpenBLAS) stop in their fork handlers; a thread that survives a
    # fork keeps running in the parent only and leaves its locks and state torn in every child
    probe = os.fork()
    if probe == 0:
        os._exit(0)
    os.waitpid(probe, 0)
    files, shared_writable, devices = _mapped()
    read = tuple((config.get("guard") or {}).get("read", ()))
    outside = []
    if read:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            # a relative __file__ names no file (torch.ops says "_ops.py")
            if isinstance(path, str) and os.path.isabs(path) and not any(
                    _under(os.path.realpath(path), tree) for tree in read):
                outside.append(f"module {name} from {path}")
        outside += [f"mapped file {path}" for path in sorted(files)
                    if not any(_under(path, tree) for tree in read)]
    report = {
        "imported": imported, "skipped": skipped, "failed": failed, "refused": guard.refused[:20],
        "threads": _threads(), "shared_writable": shared_writable[:20], "devices": sorted(set(devices))[:5],
        "fds": [f"{fd} -> {target}" for fd, target in sorted(_fd_targets({0, 1, 2, control.fileno()}).items())],
        "outside": outside[:20], "made": guard.made[:20], "started": guard.started[:20],
        "top_level": sorted({name.partition(".")[0] for name in sys.modules}),
    }
    control.send(json.dumps(report).encode())
    # the collector would walk (and so copy, page by page) every object of this image in every child,
    # at its exit above all: what is here now lives as long as the child anyway (gc.freeze's purpose)
    gc.collect()
    _Ending.prepare()
    _Ending.c_handlers, _Ending.c_registered = _c_exit_handlers_seen(), False
    gc.freeze()
    _Ending.written = _pages_an_ending_writes()
    print(f"short endings: {_Ending.refusal or 'on'}; the C library's exit handlers: "
          f"{_Ending.c_handlers or 'release memory only'}; pages an ending writes, copied ahead: "
          f"{sum(pages for _, pages in _Ending.written)}", flush=True)
    return {sig: signal.getsignal(sig) for sig in _catchable()}, guard.made


def _catchable():
    return [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]


# -- serving: one fork per command ------------------------------------------------------------------


class _Job:
    """What a child runs once it is the command's process: returned to the top level of the script,
    so that the command's exceptions and exit reach the interpreter as a script's would. It holds no
    reference to the script's namespace: at exit the interpreter must find the command's objects only
    in ``sys.modules["__main__"]``, which it clears (flushing a file left open, running __del__)."""

    def __init__(self, source, filename, code=None):
        self.source = source
        self.filename = filename
        self.code = code  # the source compiled ahead, or None


def _serve(control, dispositions, made):
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    # pidfd -> (pid, status fd the parent reports the exit on or None, whether it waits for its request's
    # "go": a step built ahead, which runs nothing until then)
    children = {}
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    parent = os.getpid()
    # the next command's process, forked while this parent is idle so that a request costs no fork:
    # (pid, the socket its request goes to). It is a fork of this same image, made before the request
    # as any fork is, and it has done nothing but wait for it. It is forked once no command of this
    # parent runs: the harness sends one command at a time, so the next request comes after that, and
    # a fork (some 10 ms of CPU copying this image's page tables) made while a command starts or ends
    # competes with it for the CPU
    spare = None
    # pid -> os.wait4's answer, for children of ours reaped along with the memory keepers
    reaped = {}
    while True:
        running = any(not ahead for _, _, ahead in children.values())
        events = poller.poll(None if spare is not None or running else 0)
        if not events:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            if pid == 0:
                ours.close()
                poller = None
                children = None
                return _spare(theirs, control, dispositions, made, last_cap, parent)
            theirs.close()
            spare = (pid, ours)
            continue
        for fd, _ in events:
            if fd != control.fileno():
                pid, status, _ = children.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, wait_status, usage = reaped.pop(pid, None) or os.wait4(pid, 0)
                # a plain command's memory keeper is this parent's child: those killed before are
                # reaped by the time the next command's exit is reported
                ours = {known for known, _, _ in children.values()} | ({spare[0]} if spare is not None else set())
                while True:
                    try:
                        ended = os.wait4(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if not ended[0]:
                        break
                    if ended[0] in ours:
                        reaped[ended[0]] = ended
                if status is not None:
                    # a plain command (one the parent reports on): its memory keeper and whatever else
                    # it left in its process group, which the harness kills next anyway
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    _report(status, _exit_line(wait_status, usage))
                    os.close(status)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, 1 << 20, 8)
            except ConnectionResetError:
                message, fds = b"", []
            if not message:
                os._exit(0)  # the harness is gone
            request = json.loads(message)
            stdout, stderr, status, *more = fds
            pid = None
            if spare is not None:
                pid, channel = spare
                spare = None
                try:
                    socket.send_fds(channel, [message], fds)
                except OSError:
                    reaped.pop(pid, None) or os.waitpid(pid, 0)  # it was killed while waiting: fork afresh
                    pid = None
                channel.close()
            if pid is None:
                pid = os.fork()
                if pid == 0:
                    poller = None
                    pidfds = list(children)
                    children = None
                    return _child(request, stdout, stderr, status, control, pidfds, dispositions, made, last_cap,
                                  parent, *_go_and_start(request, more))
            pidfd = os.pidfd_open(pid)
            control.send(json.dumps({"pid": pid}).encode())
            for fd in (stdout, stderr, *more):
                os.close(fd)
            if request["mode"] == "sandbox":
                # the child reports its own exit: nothing the command chose ever comes back to this process
                os.close(status)
                status = None
            children[pidfd] = (pid, status, bool(request.get("ahead")))
            poller.register(pidfd, select.POLLIN)


def _spare(channel, control, dispositions, made, last_cap, parent):
    """In a forked child: wait for the request it will serve."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the line above
        control.close()
        # what the parent held when it forked: the other commands' pidfds and status pipes (while a
        # copy of a status pipe is open, its reader sees no end)
        _close_all_but((channel.fileno(),))
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 8)
    except BaseException:  # noqa: BLE001 - no request came: nothing to do
        os._exit(1)
    channel.close()
    if not message:
        os._exit(0)
    stdout, stderr, status, *more = fds
    request = json.loads(message)
    return _child(request, stdout, stderr, status, None, [], dispositions, made, last_cap, parent,
                  *_go_and_start(request, more))


def _go_and_start(request, more):
    """The go pipe (sandbox mode) and the start pipe (a command built ahead: the last one), or None."""
    start = more[-1] if request.get("ahead") else None
    go = more[0] if request["mode"] == "sandbox" else None
    return go, start


def _exit_line(wait_status, usage):
    return (f"exit {os.waitstatus_to_exitcode(wait_status)} {usage.ru_utime:.6f} {usage.ru_stime:.6f} "
            f"{usage.ru_minflt}")


def _report(fd, line):
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass  # the harness stopped listening: it has killed the step


def _child(request, stdout, stderr, status, control, pidfds, dispositions, made, last_cap, parent, go=None,
           start=None):
    """In the forked child: become the command (plain mode), or enter the step's sandbox first.

    Whatever goes wrong before the command's script starts is reported as ``failed`` and ends the
    child: the harness then runs the command cold, so a fault of this mechanism never becomes the
    command's failure.
    """
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the line above
        if control is not None:
            control.close()
        for fd in pidfds:
            os.close(fd)
        os.setsid()
        _join_limits(request)
        _Ending.grouped, _Ending.tasks_max = bool(request.get("cgroup_procs")), request.get("tasks_max")
        if request["mode"] == "sandbox":
            _enter_sandbox(request, stdout, stderr, status, last_cap, go, start)  # returns in the command's process only
            _Ending.sandboxed = True
            for path, mode in made:
                try:
                    os.mkdir(path, mode)
                except FileExistsError:
                    pass
        return _become(request, stdout, stderr, status, dispositions, start)
    except BaseException as exc:  # noqa: BLE001 - anything before the script starts is the mechanism's
        _report(status, f"failed {type(exc).__name__}: {exc}"[:500].replace("\n", " "))
        os._exit(0)


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


class _MmMap(ctypes.Structure):
    """struct prctl_mm_map (linux/prctl.h)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
        "arg_start", "arg_end", "env_start", "env_end", "auxv")] + [
        ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


_LIBC.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
CLONE_VM, CLONE_PARENT = 0x100, 0x8000
_WALL = 0x40000000
PF_EXITING = 0x4
# how often, and how long apart, the init looks whether what it killed is ending before it waits
_ENDING_LOOKS, _ENDING_LOOK_S = 8, 0.0005
# a command's memory keeper waits in pause(): clone calls it with an argument, which it ignores
_PAUSE = ctypes.cast(_LIBC.pause, ctypes.c_void_p).value if os.uname().machine in ("x86_64", "aarch64") else None
_KEEPER_STACK = 1 << 16
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
# in a command's process: (address, size) of its init's command line and environment, inherited by the fork
_INIT_ARGS = None
_LIBC.sbrk.restype = ctypes.c_void_p
_LIBC.sbrk.argtypes = [ctypes.c_long]
PR_SET_NAME, PR_SET_MM, PR_SET_MM_MAP = 15, 35, 14


def _present(argv, env, name=None):
    """Make /proc/self/cmdline, /proc/self/environ (and comm) what they would be had ``argv`` been
    exec'd with ``env``: they show the memory the kernel was told holds them, which for a fork is the
    parent's. PR_SET_MM_MAP moves them to a fresh mapping that is never unmapped; it needs no privilege."""
    args = b"".join(os.fsencode(a) + b"\0" for a in argv)
    envs = b"".join(os.fsencode(f"{k}={v}") + b"\0" for k, v in env.items())
    size = max(len(args) + len(envs), 1)
    address = _LIBC.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
    if address in (None, ctypes.c_void_p(-1).value):
        raise MechanismError("mmap for the command line failed")
    ctypes.memmove(address, args, len(args))
    ctypes.memmove(address + len(args), envs, len(envs))
    with open("/proc/self/stat", "rb") as fh:
        fields = fh.read().rsplit(b") ", 1)[1].split()
    with open("/proc/self/auxv", "rb") as fh:
        auxv = ctypes.create_string_buffer(fh.read())

    def field(number):  # proc(5) numbers them from 1, pid and comm being 1 and 2
        return int(fields[number - 3])

    layout = _MmMap(start_code=field(26), end_code=field(27), start_data=field(45), end_data=field(46),
                    start_brk=field(47), brk=_LIBC.sbrk(0), start_stack=field(28), arg_start=address,
                    arg_end=address + len(args), env_start=address + len(args), env_end=address + len(args) + len(envs),
                    auxv=ctypes.addressof(auxv), auxv_size=len(auxv.raw) - 1, exe_fd=0xFFFFFFFF)
    _check(_LIBC.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.c_ulong(ctypes.addressof(layout)),
                       ctypes.c_ulong(ctypes.sizeof(layout)), 0), "prctl(PR_SET_MM_MAP)")
    if name is not None:
        _set_name(name)
    return address, size


def _name():
    with open("/proc/self/comm", "rb") as fh:
        return os.fsdecode(fh.read().rstrip(b"\n"))


def _set_name(name):
    _check(_LIBC.prctl(PR_SET_NAME, ctypes.c_char_p(os.fsencode(name)[:15]), 0, 0, 0), "prctl(PR_SET_NAME)")


def _close_all_but(keep):
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


_LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_POPULATE_WRITE = 23
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT = 1 << 63
_OWN_CHUNK = 128  # pages between two looks at the start pipe: at most half a millisecond of copying


def _own_pages(start, up_to):
    """Make this process's own copy of the parent's pages it holds, while it waits for ``go``: every
    write to a page it still shares (a reference count, an allocator's free list) would otherwise
    copy it then, in the command's own time (thousands of faults a step). Only pages present in
    private writable mappings, at most ``up_to`` bytes of them (the copies count against the step's
    memory limit, as a cold interpreter's imports would). It looks at the start pipe every
    ``_OWN_CHUNK`` pages, scanned or copied, and stops at once when ``go`` comes."""
    left = up_to // _PAGE
    try:
        writable = _writable_spans()
        with open("/proc/self/pagemap", "rb") as pagemap:
            for low, high in writable:
                for chunk in range(low, high, _OWN_CHUNK * _PAGE):
                    if select.select([start], [], [], 0)[0]:
                        return
                    pages = min(_OWN_CHUNK, (high - chunk) // _PAGE)
                    pagemap.seek(chunk // _PAGE * 8)
                    entries = struct.unpack(f"{pages}Q", pagemap.read(pages * 8))
                    first = None
                    for i, entry in enumerate((*entries, 0)):
                        if entry & _PRESENT:
                            if first is None:
                                first = i
                        elif first is not None:
                            count = min(i - first, left)
                            if count <= 0:
                                return
                            if _LIBC.madvise(chunk + first * _PAGE, count * _PAGE, MADV_POPULATE_WRITE) != 0 \
                                    and ctypes.get_errno() == errno.EINVAL:
                                return  # a kernel older than 5.14
                            left -= count
                            first = None
    except (OSError, struct.error, ValueError, IndexError):
        return


def _own_written():
    """Copy the parent's pages that a command's ending writes to (``_pages_an_ending_writes``): a step
    built ahead, before it is ready."""
    for address, pages in _Ending.written:
        if _LIBC.madvise(address, pages * _PAGE, MADV_POPULATE_WRITE) != 0 and ctypes.get_errno() == errno.EINVAL:
            return  # a kernel older than 5.14


def _compiled_ahead(script):
    """(source, code) of the script as it reads while a step built ahead waits for ``go``, or None. Only
    code whose compilation warns of nothing (every warning an error meanwhile, the filters otherwise as
    they are): the compiler's warnings are the command's output, printed from the source that runs."""
    # A regular file only: anything else is read at go, as a cold start reads it. Its type is known
    # before it is opened to be read: opening a FIFO to read, even without waiting, lets its writer
    # write, to this process rather than the command. The file looked at is the file read (reopened
    # through the descriptor that holds it, not by its name again).
    try:
        held = os.open(script, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(held).st_mode):
            return None
        fd = os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            with io.FileIO(fd, closefd=False) as fh:
                source = fh.readall()
        finally:
            os.close(fd)
    except OSError:
        return None
    finally:
        os.close(held)
    # the list the warnings machinery reads (the module's, once imported), changed in place and back:
    # nothing else (no version count, no registry) notices
    filters = getattr(sys.modules.get("warnings"), "filters", None)
    if not isinstance(filters, list):
        import _warnings

        filters = _warnings.filters
    every_warning_an_error = ("error", None, Warning, None, 0)
    filters.insert(0, every_warning_an_error)
    try:
        return source, compile(source, script, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - a warning or an error: compiled at go, where it is reported
        return None
    finally:
        filters.remove(every_warning_an_error)


def _started(start):
    """Whether the harness said ``go`` (rather than closing the pipe: the step built ahead is not used)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(start, 64)
        if not chunk:
            return False
        data += chunk
    os.close(start)
    return data == b"go\n"


def _become(request, stdout, stderr, status, dispositions, start=None):
    """This process is the command from here on: what a fresh interpreter running the script would hold.
    With ``start`` (a step built ahead), it waits there for ``go`` before anything of the script's own."""
    _prctl(PR_SET_DUMPABLE, 1)
    os.chdir(request["cwd"])
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for fd in {null, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    _close_all_but((status,) if start is None else (status, start))
    for sig, handler in dispositions.items():
        try:
            signal.signal(sig, handler)
        except (OSError, ValueError, TypeError):
            pass
    os.environ.clear()
    os.environ.update(request["env"])
    _present(request["orig_argv"], request["env"])
    if _INIT_ARGS is not None:
        _LIBC.munmap(_INIT_ARGS[0], _INIT_ARGS[1])
    script = request["script"]
    sys.argv[:] = request["argv"]
    sys.orig_argv[:] = request["orig_argv"]
    sys.path[0:0] = [os.path.dirname(os.path.realpath(script))]
    # The import system's finders cached this parent's listing of every folder on sys.path. They stay
    # right here: a finder lists its folder again whenever the folder's mtime changed, and a folder
    # the sandbox shows differently (a masked data folder, a parent of the bound trees) is another
    # folder with another mtime there. Cleared, every lazy import would list them all again.
    import linecache

    linecache.clearcache()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        # seeded from the OS once, at import: every child would draw the same "random" numbers (before
        # ``go`` where built ahead: the OS's entropy is as fresh then, and it takes half a millisecond)
        numpy_random.seed()
    compiled = None
    if start is not None:
        compiled = _compiled_ahead(script)
        # before ready: a few milliseconds at most, and the request finds them copied
        _own_written()
        _report(status, "ready")
        _own_pages(start, request.get("own_up_to") or 0)
        if not _started(start):
            os._exit(0)  # discarded: nothing of the command ran
    try:
        with io.open_code(script) as fh:
            source = fh.read()
    except OSError as exc:
        sys.stderr.write(f"{request['orig_argv'][0]}: can't open file {script!r}: [Errno {exc.errno}] {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(2)
    import builtins
    import importlib.machinery
    import types

    main = types.ModuleType("__main__")
    namespace = main.__dict__
    namespace.update(__package__=None, __loader__=importlib.machinery.SourceFileLoader("__main__", script),
                     __spec__=None, __annotations__={}, __builtins__=builtins, __file__=script, __cached__=None)
    sys.modules["__main__"] = main
    _report(status, "started")
    os.close(status)
    # compiled ahead from what the script still reads: the same code
    return _Job(source, script, compiled[1] if compiled is not None and compiled[0] == source else None)


# -- a command's ending -----------------------------------------------------------------------------

_PY_TPFLAGS_HEAPTYPE = 1 << 9
# the standard library's types whose objects do more, when freed, than free memory, close descriptors
# and unmap memory (which a process's exit does just the same): sqlite3's connections (they roll back
# and remove their journal), dbm's databases (they write)
_WRITING_MODULES = frozenset({"sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm"})
_IO_TYPES = frozenset({io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair,
                       io.TextIOWrapper})
_MEMORY_IO_TYPES = frozenset({io.BytesIO, io.StringIO})
# finalizers of a library's own objects that do nothing while their object is in the state named
_IDLE_WHEN_STOPPED = {
    # its finalizer stops the tracker process it started, if one runs
    ("joblib.externals.loky.backend.resource_tracker", "ResourceTracker"): lambda tracker: tracker._fd is None,
    ("multiprocessing.resource_tracker", "ResourceTracker"): lambda tracker: tracker._fd is None,
}


# -- the C library's exit handlers, probed ------------------------------------------------------------

# what releasing memory, and ending, takes: the C library's exit handlers may call these and nothing
# else for a command to end without them (closing a descriptor is what the exit does anyway)
_MEMORY_ONLY_CALLS = {
    # machine: (audit architecture, {name: number})
    "x86_64": (0xC000003E, {"close": 3, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12,
                            "rt_sigprocmask": 14, "sched_yield": 24, "mremap": 25, "madvise": 28, "getpid": 39,
                            "exit": 60, "gettid": 186, "futex": 202, "clock_gettime": 228, "exit_group": 231,
                            "membarrier": 324}),
    "aarch64": (0xC00000B7, {"close": 57, "exit": 93, "exit_group": 94, "futex": 98, "clock_gettime": 113,
                             "sched_yield": 124, "rt_sigprocmask": 135, "getpid": 172, "gettid": 178,
                             "brk": 214, "munmap": 215, "mremap": 216, "mmap": 222, "mprotect": 226,
                             "madvise": 233, "membarrier": 283}),
}
# what the probe of an ending may also do: look at files' metadata. An import that finds nothing walks
# sys.path so (stat, nothing opened while the finders' caches hold), and torch._dynamo's exit handler
# does it at every exit (it tries ``import tabulate``)
_METADATA_CALLS = {"x86_64": {"stat": 4, "fstat": 5, "lstat": 6, "newfstatat": 262, "statx": 332},
                   "aarch64": {"newfstatat": 79, "fstat": 80, "statx": 291}}
_PROBE_TIMEOUT_S = 30
PR_SET_SECCOMP, SECCOMP_MODE_FILTER, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW = 22, 2, 0x80000000, 0x7FFF0000


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _memory_only_filter(arch, numbers):
    """A seccomp program: the calls of ``numbers`` pass, any other call (or architecture) ends the process."""
    load_word, jump_if_equal, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    program = [(load_word, 0, 0, 4), (jump_if_equal, 1, 0, arch), (ret, 0, 0, SECCOMP_RET_KILL_PROCESS),
               (load_word, 0, 0, 0)]
    for i, number in enumerate(numbers):
        program.append((jump_if_equal, len(numbers) - i, 0, number))  # to the ALLOW at the end
    program += [(ret, 0, 0, SECCOMP_RET_KILL_PROCESS), (ret, 0, 0, SECCOMP_RET_ALLOW)]
    return (_SockFilter * len(program))(*[_SockFilter(*instruction) for instruction in program])


_EXIT_HANDLER_REGISTRARS = frozenset({"atexit", "on_exit", "__cxa_atexit", "at_quick_exit", "__cxa_at_quick_exit",
                                      "__cxa_thread_atexit", "__cxa_thread_atexit_impl"})


def _registers_exit_handlers(name):
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    return not isinstance(name, str) or name in _EXIT_HANDLER_REGISTRARS


def _c_exit_handlers_seen():
    """What the C library's exit handlers (the libraries' C++ static destructors, atexit functions,
    ``.fini_array``) do here beyond releasing memory, or None. A fork of this parent runs them under a
    seccomp filter that ends it at any other system call, before that call happens: torch's, for one,
    take a tenth of a second and more and only unregister its kernels."""
    machine = os.uname().machine
    if machine not in _MEMORY_ONLY_CALLS:
        return f"not probed on {machine}"
    arch, calls = _MEMORY_ONLY_CALLS[machine]
    program = _memory_only_filter(arch, sorted(calls.values()))
    fprog = _SockFprog(len(program), program)
    sys.stdout.flush()
    _LIBC.fflush(None)  # nothing left in the C library's buffers for the fork to write
    probe = os.fork()
    if probe == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            if _LIBC.prctl(ctypes.c_ulong(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                           ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
                os._exit(3)
            _PYTHON_LIBC.exit(0)
        finally:
            os._exit(4)
    deadline = time.monotonic() + _PROBE_TIMEOUT_S
    while True:
        pid, wait_status = os.waitpid(probe, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.kill(probe, signal.SIGKILL)
            os.waitpid(probe, 0)
            return f"they did not end within {_PROBE_TIMEOUT_S} s"
        time.sleep(0.005)
    if os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGSYS:
        return "they make other system calls"
    if not os.WIFEXITED(wait_status) or os.WEXITSTATUS(wait_status) != 0:
        return f"the probe ended otherwise ({wait_status:#x})"
    return None


# extension types whose objects, freed, release memory and nothing else (the collector tracks them; a
# Python subclass's __del__ is looked at as any finalizer is), with a test where that holds in a state
# only: torch's tensors and storages, the classes and descriptors that pybind11 and torch make (a bound
# library loaded after the fork makes some), numpy's arrays (those the collector tracks: a Python
# subclass's, np.memmap's) and generators, numba's compiled functions, pandas' and pydantic's objects
# that scripts keep
_FREES_MEMORY_ONLY = {
    ("torch._C", "TensorBase"): None, ("torch._C", "StorageBase"): None, ("torch._C", "_TensorMeta"): None,
    ("pybind11_builtins", "pybind11_type"): None, ("pybind11_builtins", "pybind11_static_property"): None,
    # its release would copy back what a C extension forgot to write back, and warn
    ("numpy", "ndarray"): lambda array: not array.flags.writebackifcopy,
    ("numpy.random._generator", "Generator"): None, ("numpy.random.mtrand", "RandomState"): None,
    ("numpy.random.bit_generator", "BitGenerator"): None, ("numpy.random.bit_generator", "SeedSequence"): None,
    ("numpy.random._pcg64", "PCG64"): None, ("numpy.random._pcg64", "PCG64DXSM"): None,
    ("numpy.random._mt19937", "MT19937"): None, ("numpy.random._philox", "Philox"): None,
    ("numpy.random._sfc64", "SFC64"): None,
    # numba's compiled functions: their dispatchers, closures and environments
    ("_dispatcher", "Dispatcher"): None, ("_dynfunc", "_Closure"): None, ("_dynfunc", "Environment"): None,
}
# and every type of these libraries' compiled cores (pandas' Cython internals, pydantic's Rust core)
_FREES_MEMORY_ONLY_IN = ("pandas._libs.", "pydantic_core.")

# context managers that a library enters for good while it imports, whose exit (run when the generator
# is closed at the interpreter's teardown) only sets a flag of its own extension back: the generator's
# (module, function) -> the lock and the extension module its exit uses, by their global names
_MODE_SESSIONS = {
    # torch.utils._cxx_pytree keeps torch's namespace of optree insertion-ordered
    ("optree.registry", "dict_insertion_ordered"): ("__REGISTRY_LOCK", "_C", "set_dict_insertion_ordered"),
}


def _sets_a_mode_back(generator):
    """Whether closing ``generator`` (suspended, one the libraries made while importing) only sets a
    library's flag back, as its code and the globals it uses stand."""
    frame = generator.gi_frame
    if frame is None or not generator.gi_suspended:
        return False
    names = _MODE_SESSIONS.get((frame.f_globals.get("__name__"), generator.gi_code.co_name))
    if names is None:
        return False
    lock_name, extension_name, setter = names
    lock, extension = frame.f_globals.get(lock_name), frame.f_globals.get(extension_name)
    # what a command could have put in their place (a Python function, a lock of its own) is not taken
    return type(lock) in (_thread.LockType, _thread.RLock) and type(extension) is types.ModuleType \
        and type(getattr(extension, setter, None)) is types.BuiltinFunctionType


class _Ending:
    """A command's interpreter ends by freeing every object, the parent's included: that writes to nearly
    every page it shares with the parent (copy on write), a tenth of a second and more per command.
    Where nothing of that can be seen, the command ends after the atexit handlers, as the C library's
    ``exit`` does, without the interpreter's teardown; otherwise it finalizes as a script's does.

    Up to this handler (registered before any library's, so called after all of them), the ending is the
    interpreter's own: the exception printed, non-daemon threads joined, atexit handlers run. Then
    ``sys.stdout`` and ``sys.stderr`` are flushed as the interpreter does next, and ``exit(status)`` runs
    the C library's handlers and flushes its buffers as at the end of a script. Those handlers (the
    libraries' C++ static destructors among them: torch's unregister its kernels, a tenth of a second
    and more) are skipped, the buffers flushed and the process ended (``_exit``), where a fork of the
    parent ran them under a filter that stops any system call but those that release memory
    (``_c_exit_handlers_seen``), no library was loaded since the fork, and the command looked up none
    of the C functions that register a handler through ctypes; the command's memory is then handed to
    a keeper, released after the exit is seen (``_memory_kept_past_the_exit``). A handler that a library the parent
    holds registers later, on first use (a C++ function's static), is taken as that library's
    objects are: to release memory only. What is skipped is the release of every object still alive
    and the interpreter's own state (it calls ``Py_AtExit`` functions and audit hooks too). Releasing an object can be seen only through

    * a finalizer (``__del__``, every io object, generator, coroutine, socket, ``os.scandir`` iterator):
      none may be alive among the objects the collector tracks, the parent's (listed when its imports
      end) and the command's, except the standard streams (flushed; never closed: the interpreter made
      them with closefd off), closed or read-only io objects, in-memory buffers, generators never
      started or finished, sockets, the library objects of ``_IDLE_WHEN_STOPPED`` in the state named
      there, and the libraries' own generators of ``_MODE_SESSIONS`` (a mode entered for good while
      importing, whose exit sets a flag back); the finalizers of sockets and of scandir iterators (the
      only untracked objects that have one) only warn, with a ResourceWarning (which must be ignored),
      and close;
    * a weak reference's callback: only those that merely drop an entry of a weak container (the
      standard library's weak dictionaries and sets, abc's registries, thread locals, logging's handler
      list, ctypes' caches), pybind11's on the types it watches (it forgets them), and
      ``weakref.finalize``'s after atexit (inert from then on; the libraries' own are looked at then);
    * what the collector itself does (callbacks, debug output), a trace or profile function, an audit
      hook added after the parent's (but the task kit's data guard's, ``_QUIET_HOOK_ADDERS``): none
      may be set; a Python thread still running: none may run;
    * what freeing does beyond memory, descriptors and mappings, which exit releases just the same:
      of the standard library's types only sqlite3's and dbm's do more (neither may be imported); the
      command's tracked objects may be of Python classes, the standard library's types and those of
      ``_FREES_MEMORY_ONLY`` (torch's tensors, numpy's arrays and generators, ...) and
      ``_FREES_MEMORY_ONLY_IN`` (pandas', pydantic's) only; the extension types' untracked objects
      (numpy's arrays) and those the parent's libraries made while importing are taken to free memory
      only. So is a library loaded after the fork that is installed with the interpreter or the
      system; one from anywhere else turns the short ending off, as does any whose dynamic symbols
      name ``Py_AtExit``.

    A status that the interpreter sets at its very end (KeyboardInterrupt: a signal; a stream that
    cannot flush: 120) turns it off too."""

    status = None            # what the command's interpreter exits with, where plainly known
    refusal = None           # why no command of this parent ends short (set when its imports end)
    watched = ()             # (weak reference, whether its finalizer is idle) for the parent's objects
    streams = frozenset()    # ids of the standard streams' layers
    code_files = frozenset()  # executable files mapped when the imports ended
    objects_loaded = None    # libraries the dynamic linker had loaded by then (glibc's count)
    hooked = False           # an audit hook was added after the parent's guard
    finalizers = None        # weakref.finalize, if the libraries made any: inert once its atexit has run
    c_handlers = "not probed"  # what the C library's exit handlers were seen to do beyond releasing memory
    c_registered = False     # a C exit handler may have been registered through ctypes since the probe
    sandboxed = False        # the command is pid 2 of its own namespace, whose init kills all that is left
    llvmlite = None          # llvmlite's finalizers and shutdown flag as the parent's imports made them
    grouped = False          # the command is in a control group of the step's
    tasks_max = None         # that group's limit on tasks (cgroup's pids.max), where there is one
    written = ()             # (address, pages) of this parent's memory that a command's ending writes to
    probe = None             # in the probe that finds them: (pagemap, pipe, the spans to look at)

    @staticmethod
    def status_of(exc):
        """The exit status the interpreter gives a script that raised ``exc`` (None: it ends by a signal)."""
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None:
                return 0
            if isinstance(code, int):
                return int(code) if -(1 << 31) <= code < (1 << 31) else None
            return 1  # printed by the interpreter, before it finalizes
        return None if isinstance(exc, KeyboardInterrupt) else 1

    @classmethod
    def prepare(cls):
        """In the parent, its imports done: what of its own objects could make an ending visible."""
        layers = set()
        for stream in (sys.__stdin__, sys.__stdout__, sys.__stderr__):
            buffer = getattr(stream, "buffer", None)
            layers |= {id(stream), id(buffer), id(getattr(buffer, "raw", None))}
        cls.streams = frozenset(layers - {id(None)})
        watched, refusal = [], cls.hooked and "an audit hook was added while importing"
        seen, codes = {}, _dropping_codes()
        cls.llvmlite = _llvmlite_as_made()
        for obj in gc.get_objects():
            kind = type(obj)
            if _is_weak(kind):
                callback = _weak_callback(obj)
                weakref = sys.modules.get("weakref")
                if weakref is not None and isinstance(callback, weakref.finalize):
                    # called by weakref's atexit handler, registered after this one's, before it: the
                    # command's ending looks (_left_to_see) that it did run and left them all inert
                    cls.finalizers = weakref.finalize
                elif not _unseen_when_freed(obj, callback, codes):
                    refusal = refusal or f"a weak reference of the libraries calls back {callback!r}"[:200]
                continue
            if kind not in seen:
                seen[kind] = _finalizer_check(kind) if getattr(kind, "__del__", None) is not None else None
                if kind is types.GeneratorType:
                    # the libraries' own generators only: their code is the library's, as a command's need not be
                    seen[kind] = lambda g, idle=seen[kind]: idle(g) or _sets_a_mode_back(g)
            check = seen[kind]
            if check is None:
                continue
            if isinstance(check, str):
                refusal = refusal or f"the libraries hold {check}"
                continue
            try:
                watched.append((_weakref.ref(obj), check))
            except TypeError:
                # one without weak references (its class has __slots__): judged now, as its library made it
                if check not in _UNSEEN_FINALIZERS.values() or not check(obj):
                    refusal = refusal or f"the libraries hold an object with a finalizer ({kind.__qualname__})"
        cls.watched = tuple(watched)
        cls.code_files = frozenset(_code_files())
        cls.objects_loaded = _objects_loaded()
        refusal = refusal or next((f"{path} registers Py_AtExit functions" for path in sorted(cls.code_files)
                                   if _registers_at_exit(path)), None)
        cls.refusal = refusal or None

    @classmethod
    def at_exit(cls):
        """The last atexit handler of a command: end here where the rest could not be seen."""
        try:
            status = cls.status
            if status is None or cls.refusal is not None or _left_to_see() is not None:
                return
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name, None)
                if stream is not None and not _closed(stream):
                    stream.flush()  # as the interpreter does next: one that cannot flush ends in full
            for stream in (sys.__stdout__, sys.__stderr__):
                if stream is not None and not _closed(stream):
                    stream.flush()  # what their release would have flushed
            if cls.probe is not None:
                _PYTHON_LIBC.fflush(None)
                _report_written(*cls.probe)
            if cls.c_handlers is None and not cls.c_registered and _no_code_since_the_fork():
                # what the C library's exit would do last (its handlers, probed, only release memory)
                _PYTHON_LIBC.fflush(None)
                _memory_kept_past_the_exit()
                os._exit(status)
            # holding the interpreter's lock, as a finalizing interpreter keeps other threads out of it
            _PYTHON_LIBC.exit(status)
        except BaseException:  # noqa: BLE001 - whatever happens here, the interpreter ends as usual
            return


_PM_EXCLUSIVE = 1 << 56  # pagemap: the page is mapped here only (a shared page, written, was copied)
# pages: what a probe finds beyond this is left to the command. torch's ending writes ~9,000 (the
# finalizers of its operator libraries take their operators out of the dispatcher, some 190 of them)
_WRITTEN_MAX = 1 << 14


def _writable_spans():
    """(low, high) of this process's private writable mappings: where a child shares pages with it."""
    with open("/proc/self/maps") as maps:
        spans = [line.split(None, 2)[:2] for line in maps]
    return [tuple(int(x, 16) for x in span.split("-")) for span, rights in spans
            if rights.startswith("rw") and rights[3] == "p"]


def _copied(pagemap, spans):
    """The pages of ``spans`` that this process holds alone (a fork's: those it copied on write)."""
    copied, step = set(), 1 << 13
    for low, high in spans:
        for chunk in range(low, high, step * _PAGE):
            entries = os.pread(pagemap, min(step, (high - chunk) // _PAGE) * 8, chunk // _PAGE * 8)
            copied.update(chunk + i * _PAGE for i, (entry,) in enumerate(struct.iter_unpack("Q", entries))
                          if entry & _PRESENT and entry & _PM_EXCLUSIVE)
    return copied


def _pages_an_ending_writes():
    """The pages of this parent's memory that a command's ending writes to, as (address, pages) spans.
    Each such write copies a page the command shares with the parent: a page fault of 10-20 us, a
    hundred per command; a step built ahead copies them before it reports ready (``_own_written``). A
    fork of the parent ends as an empty script does (its threads joined, the atexit handlers, this
    mechanism's look at what is left) and reports the pages it copied meanwhile.

    The probe runs under the filter of ``_c_exit_handlers_seen``, plus writes and reads at an offset
    (its pipe and its pagemap; nothing else is open) and looks at files' metadata (an import that finds
    nothing): a handler that does more ends it, and nothing is copied ahead. Learnt from this parent
    alone, never from a command: what a step does reaches no later step's memory. Empty where short endings are off (a full teardown writes to every page)."""
    machine = os.uname().machine
    if machine not in _MEMORY_ONLY_CALLS or _Ending.refusal is not None or _Ending.c_handlers is not None:
        return ()
    arch, calls = _MEMORY_ONLY_CALLS[machine]
    read_at, write = (17, 1) if machine == "x86_64" else (67, 64)
    program = _memory_only_filter(arch, sorted({*calls.values(), *_METADATA_CALLS[machine].values(), read_at, write}))
    fprog = _SockFprog(len(program), program)
    try:
        spans = _writable_spans()
        reader, writer = os.pipe()
    except OSError:
        return ()
    sys.stdout.flush()
    sys.stderr.flush()
    _LIBC.fflush(None)
    probe = os.fork()
    if probe == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.close(reader)
            pagemap = os.open("/proc/self/pagemap", os.O_RDONLY)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _close_all_but((pagemap, writer))
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            # what the probe copied to get here is no ending's
            _Ending.probe, _Ending.status = (pagemap, writer, spans, _copied(pagemap, spans)), 0
            if _LIBC.prctl(ctypes.c_ulong(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                           ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
                os._exit(3)
            threading = sys.modules.get("threading")
            if threading is not None:
                threading._shutdown()
            atexit._run_exitfuncs()  # this mechanism's handler, last, reports and ends the probe
        finally:
            os._exit(4)
    os.close(writer)
    data, deadline = b"", time.monotonic() + _PROBE_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if not select.select([reader], [], [], 0.05)[0]:
                continue
            chunk = os.read(reader, 1 << 16)
            if not chunk:
                break
            data += chunk
        else:
            os.kill(probe, signal.SIGKILL)
    finally:
        os.close(reader)
        _, wait_status = os.waitpid(probe, 0)
    if not os.WIFEXITED(wait_status) or os.WEXITSTATUS(wait_status) != 0 or len(data) % 16:
        return ()
    return tuple(struct.iter_unpack("QQ", data))


def _report_written(pagemap, pipe, spans, before):
    """In the probe, its ending done: the parent's pages it copied since ``before``, as spans."""
    written, last = [], None
    for page in sorted(_copied(pagemap, spans) - before)[:_WRITTEN_MAX]:
        if last is not None and page == last[0] + last[1] * _PAGE:
            last[1] += 1
        else:
            last = [page, 1]
            written.append(last)
    data = b"".join(struct.pack("QQ", *span) for span in written)
    while data:
        data = data[os.write(pipe, data):]
    os._exit(0)


def _memory_kept_past_the_exit():
    """Let the command's exit be seen before its memory is released. Releasing it (the page tables of
    an image shared with the parent, the pages the command copied) takes 15-20 ms for a small task's
    libraries, all of it before the exit can be seen: a process's exit releases its memory first. A
    keeper, a process made with the command's memory (CLONE_VM) and nothing else of it, holds that
    memory past the exit, and releases it when it is killed: by the namespace's init once it has reaped
    the command (sandbox mode), or by the parent, which kills the command's process group once it has
    reaped the command (plain mode; not made if the command left the group this process leads).

    It holds no descriptor (the command's are closed first, as its exit would close them: nothing of
    the step stays open behind it) and blocks every signal that can be blocked; it runs no code of the
    command's, only the C library's ``pause`` on a stack of its own, until it is killed. It is the
    parent's child (CLONE_PARENT), so its end is reaped where the command's is. Where any of this fails,
    the command simply exits."""
    if _PAUSE is None:
        return
    if _Ending.sandboxed:
        # one task more in the step's control group: where that would pass its limit, the failed clone
        # would count as the step's own (and fail it), so none is made
        if _Ending.tasks_max is not None and _tasks_in_the_namespace() + 2 > _Ending.tasks_max:
            return
    elif _Ending.grouped or os.getpgid(0) != os.getpid():
        # a plain command in a control group: the harness waits for the group to be empty anyway
        return
    try:
        stack = ctypes.create_string_buffer(_KEEPER_STACK)
        top = (ctypes.addressof(stack) + _KEEPER_STACK - 64) & ~15
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        os.closerange(0, 1 << 30)
        _LIBC.clone(_PAUSE, ctypes.c_void_p(top), CLONE_VM | CLONE_PARENT, None)
    except BaseException:  # noqa: BLE001 - the command exits as it would have
        return


def _tasks_in_the_namespace():
    """The threads of every process of this PID namespace (its init's included): with the child that
    stayed outside, what the step's control group holds."""
    tasks = _namespace_tasks()
    return len(tasks) if tasks is not None else 1 << 30


def _closed(stream):
    """The interpreter's test before it flushes a standard stream: an error reads as open."""
    try:
        return bool(stream.closed)
    except Exception:  # noqa: BLE001
        return False


def _weak_callback(ref):
    if type(ref) in (_weakref.ProxyType, _weakref.CallableProxyType):
        # a proxy does not show its callback: read it where CPython's PyWeakReference keeps it
        slot = id(ref) + 3 * ctypes.sizeof(ctypes.c_void_p)
        if not ctypes.c_void_p.from_address(slot).value:
            return None
        return ctypes.py_object.from_address(slot).value
    return ref.__callback__


def _dropping_codes():
    """The code of the callbacks that only drop an entry of the standard library's weak containers."""
    codes = set()
    for module, owner in (("weakref", "WeakValueDictionary"), ("weakref", "WeakKeyDictionary"),
                          ("_weakrefset", "WeakSet")):
        init = getattr(getattr(sys.modules.get(module), owner, None), "__init__", None)
        codes |= {c for c in getattr(getattr(init, "__code__", None), "co_consts", ()) if isinstance(c, types.CodeType)}
    logging = sys.modules.get("logging")
    if logging is not None and hasattr(logging, "_removeHandlerRef"):
        codes.add(logging._removeHandlerRef.__code__)
    return codes


def _callback_drops_an_entry(callback, codes):
    """Whether a weak reference's callback only removes an entry of a container (or does nothing)."""
    if callback is None:
        return True
    kind = type(callback)
    if kind is types.BuiltinMethodType:
        # abc's registries and caches, threading.local's per-thread dictionaries
        return callback.__name__ in ("_destroy", "_localdummy_destroyed") and callback.__module__ is None and \
            isinstance(callback.__self__, _weakref.ref)
    if (kind.__module__, kind.__qualname__) == ("_ctypes", "DictRemover"):
        return True  # ctypes' caches
    weakref = sys.modules.get("weakref")
    if weakref is not None and isinstance(callback, weakref.finalize):
        return weakref.finalize._shutdown  # set once atexit has called the finalizers: inert from then on
    return getattr(callback, "__code__", None) in codes


def _unseen_when_freed(ref, callback, codes):
    """Whether what a weak reference calls back when its referent is freed could not be seen."""
    return _callback_drops_an_entry(callback, codes) or _forgets_a_type(ref, callback) or _pops_from_a_dict(ref, callback)


def _function_code(source):
    return next(const for const in compile(source, "<reference>", "exec").co_consts if isinstance(const, types.CodeType))


# the whole of a callback that drops its reference from a dictionary through a bound ``pop`` it was given
# as a default argument, numba's two: its interned types (``def _on_type_disposal(wr, _pop=_typecache.pop):
# _pop(wr, None)``) and its typing context's globals (``def on_disposal(wr, pop=self._globals.pop): pop(wr)``,
# which raises, printed, where the entry is gone)
_POPS_ITS_DEFAULT = _function_code("def _(ref, _pop=None):\n    _pop(ref, None)\n")
_POPS_ITS_DEFAULT_OR_RAISES = _function_code("def _(ref, _pop=None):\n    _pop(ref)\n")
_CODE_FIELDS = ("co_code", "co_consts", "co_names", "co_argcount", "co_kwonlyargcount", "co_nlocals", "co_freevars")
_CO_NESTED = 0x10  # a function defined in another: the same code


def _pops_from_a_dict(ref, callback):
    """Whether a weak reference's callback is a function whose only statement calls its last default, a
    dictionary's own bound ``pop``, with the reference (and None, or the reference is in it): it drops
    an entry, memory only."""
    if type(callback) is not types.FunctionType or callback.__kwdefaults__:
        return False
    code = callback.__code__
    shape = next((reference for reference in (_POPS_ITS_DEFAULT, _POPS_ITS_DEFAULT_OR_RAISES)
                  if all(getattr(code, name) == getattr(reference, name) for name in _CODE_FIELDS)
                  and code.co_flags & ~_CO_NESTED == reference.co_flags), None)
    pop = (callback.__defaults__ or (None,))[-1]
    if shape is None or type(pop) is not types.BuiltinMethodType or pop.__name__ != "pop" \
            or not isinstance(pop.__self__, dict):
        return False
    return shape is _POPS_ITS_DEFAULT or dict.__contains__(pop.__self__, ref)


def _forgets_a_type(ref, callback):
    """pybind11 (torch's bindings, among others) watches each Python type it has met with a weak
    reference whose callback, a lambda of its own, erases the type from its caches: memory only. Its
    other weak references with a lambda (``keep_alive``) watch instances, not types. The lambda is bound
    to its function record: an object of pybind11's own type, or before pybind11 2.12 a capsule, unnamed
    or named by pybind11 (TensorFlow's bindings)."""
    if type(callback) is not types.BuiltinMethodType or callback.__name__ != "":
        return False
    record = callback.__self__
    kind = type(record)
    if kind.__module__ == "pybind11_builtins" and kind.__name__.startswith("pybind11_detail_function_record"):
        return isinstance(ref(), type)
    if (kind.__module__, kind.__qualname__) == ("builtins", "PyCapsule"):
        return _capsule_name(record) in (None, b"pybind11_function_record_capsule") and isinstance(ref(), type)
    return False


def _capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule)


def _is_weak(kind):
    return issubclass(kind, _weakref.ref) or kind in (_weakref.ProxyType, _weakref.CallableProxyType)


def _finalizer_check(kind):
    """For a type with a finalizer: a test that an object's finalizer would do nothing, or why not."""
    if kind in _IO_TYPES:
        return lambda f: id(f) in _Ending.streams or f.closed or not f.writable()
    if kind in _MEMORY_IO_TYPES:
        return lambda f: True
    if issubclass(kind, _socket.socket) and kind.__del__ is _socket.socket.__del__:
        return lambda s: True  # it warns (ResourceWarning, ignored or no short ending) and closes
    if kind is types.GeneratorType:
        # closing a generator that never started or has finished runs none of its code
        return lambda g: not g.gi_running and (not g.gi_suspended or _closes_quietly(g))
    if kind is types.CoroutineType:
        return lambda c: c.cr_frame is None  # one never awaited warns
    if kind is types.AsyncGeneratorType:
        return lambda a: a.ag_frame is None
    idle = _IDLE_WHEN_STOPPED.get((kind.__module__, kind.__qualname__))
    if idle is not None:
        return idle
    owner = next((base for base in kind.__mro__ if "__del__" in base.__dict__), None)
    releases = _UNSEEN_FINALIZERS.get((owner.__module__, owner.__qualname__)) if owner is not None else None
    if releases is not None and getattr(sys.modules.get(owner.__module__), owner.__qualname__, None) is owner:
        return releases
    if _does_nothing(kind.__del__):
        return lambda obj: _does_nothing(type(obj).__del__)  # numba's environments: it may be replaced since
    return f"an object with a finalizer ({kind.__module__}.{kind.__qualname__})"


_RETURNS = _function_code("def _(self):\n    return\n")


def _does_nothing(finalizer):
    """Whether a finalizer is a function whose whole body is ``return`` (or ``pass``)."""
    if type(finalizer) is not types.FunctionType:
        return False
    code = finalizer.__code__
    return all(getattr(code, name) == getattr(_RETURNS, name) for name in _CODE_FIELDS) \
        and code.co_flags & ~_CO_NESTED == _RETURNS.co_flags


def _deletes_its_tf_metric(metric):
    """TensorFlow's ``Metric.__del__`` returns at once where the metric lacks its methods or its C++
    metric (AttributeError), and otherwise calls the delete method of its arity on it: it must be a
    ``TFE_MonitoringDelete<Kind>`` of TensorFlow's bindings, and the metric one of that kind (deleting
    it unregisters it from the process's registry of metrics: memory only)."""
    try:
        methods, arity, held = metric._metric_methods, metric._label_length, metric._metric
    except AttributeError:
        return True
    except Exception:  # noqa: BLE001 - the finalizer would raise it: printed
        return False
    if type(methods) is not list or type(arity) is not int or not 0 <= arity < len(methods):
        return False
    monitoring = sys.modules.get("tensorflow.python.eager.monitoring")
    if type(methods[arity]) is not getattr(monitoring, "_MetricMethod", None):
        return False
    deleter = methods[arity].delete
    name = getattr(deleter, "__name__", "")
    bindings = sys.modules.get("tensorflow.python._pywrap_tfe")
    return type(deleter) is types.BuiltinFunctionType and name.startswith("TFE_MonitoringDelete") \
        and getattr(bindings, name, None) is deleter and type(held).__module__ == "tensorflow.python._pywrap_tfe" \
        and type(held).__name__ == "TFE_Monitoring" + name[len("TFE_MonitoringDelete"):]


def _llvmlite_shut_down(obj):
    """llvmlite's objects (numba's compiled code, its LLVM modules and target machines) dispose of
    their LLVM resource when freed, unless llvmlite's atexit handler has run: it sets the flag their
    finalizer looks at first, through a function bound as its default. By a command's ending it has
    run; the finalizer, that function and the flag must be the ones llvmlite made as the parent
    imported it."""
    made = _Ending.llvmlite
    common = sys.modules.get("llvmlite.binding.common")
    if made is None or common is None:
        return False
    finalizers, test, test_code, flag = made
    finalizer = type(obj).__del__
    return any(finalizer is function and finalizer.__code__ is code for function, code in finalizers) \
        and finalizer.__defaults__ == (test,) and test.__code__ is test_code and test.__defaults__ == (flag,) \
        and common._shutting_down is flag and type(flag) is list and flag[:1] == [True]


def _llvmlite_as_made():
    """What ``_llvmlite_shut_down`` compares with, as the parent's imports left it."""
    common, ffi = sys.modules.get("llvmlite.binding.common"), sys.modules.get("llvmlite.binding.ffi")
    test = getattr(common, "_is_shutting_down", None)
    if ffi is None or type(test) is not types.FunctionType:
        return None
    finalizers = tuple((kind.__dict__["__del__"], kind.__dict__["__del__"].__code__)
                       for kind in (getattr(ffi, "ObjectRef", None), getattr(ffi, "OutputString", None))
                       if isinstance(kind, type) and type(kind.__dict__.get("__del__")) is types.FunctionType)
    return finalizers, test, test.__code__, getattr(common, "_shutting_down", None)


# finalizers of a library's classes that could not be seen at a command's end, with a test of the
# object: (module, class that defines __del__) -> test
_UNSEEN_FINALIZERS = {
    # they release what their object holds in TensorFlow's C++ core and nothing else
    ("tensorflow.python.eager.monitoring", "Metric"): _deletes_its_tf_metric,
    # they do nothing once llvmlite's atexit handler has run
    ("llvmlite.binding.ffi", "ObjectRef"): _llvmlite_shut_down,
    ("llvmlite.binding.ffi", "OutputString"): _llvmlite_shut_down,
}


def _closes_quietly(generator):
    """Whether closing a suspended generator runs none of its code: no handler of its frame (a try,
    except, with or finally) covers the point where it is suspended, so the GeneratorExit raised there
    leaves it at once (numba's ``stream_list``, suspended in ``while True: ... yield``). The handler
    the compiler wraps around every generator's body from Python 3.12 (it turns a StopIteration into a
    RuntimeError and re-raises anything else) is no code of the generator's. One suspended in a
    ``yield from`` closes what it delegates to first (its ``close``: any code)."""
    if generator.gi_yieldfrom is not None or not hasattr(generator.gi_code, "co_exceptiontable"):
        return False  # (before 3.11 handlers were set up as the code ran, not in a table)
    frame, code = generator.gi_frame, generator.gi_code
    targets = [target for start, end, target in _exception_table(code) if start <= frame.f_lasti < end]
    if not targets:
        return True
    import dis

    at = {instruction.offset: instruction for instruction in dis.get_instructions(code)}
    return all(target in at and at[target].opname == "CALL_INTRINSIC_1"
               and "STOPITERATION_ERROR" in at[target].argrepr for target in targets)


def _exception_table(code):
    """(start, end, target) in bytes of every entry of a code object's exception table (Python 3.11
    and later: each entry four numbers, each in 6-bit groups, most significant first, 64 marking that
    another group follows, 128 the first byte of an entry; offsets in 2-byte code units)."""
    numbers, value, entries = [], 0, []
    for byte in code.co_exceptiontable:
        value = (value << 6) | (byte & 63)
        if not byte & 64:
            numbers.append(value)
            value = 0
    for i in range(0, len(numbers) - 3, 4):
        start, length, target = numbers[i] * 2, numbers[i + 1] * 2, numbers[i + 2] * 2
        entries.append((start, start + length, target))
    return entries


def _left_to_see():
    """What the interpreter's teardown of this command would do that could be seen, or None."""
    if len(sys._current_frames()) != 1:
        return "a thread still runs"
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return "a trace or profile function is set"
    if gc.callbacks or gc.get_debug():
        return "the collector reports"
    if _Ending.hooked:
        return "an audit hook was added"
    if _Ending.finalizers is not None and not _Ending.finalizers._shutdown:
        return "the libraries' weakref.finalize objects were not called at exit"
    if _WRITING_MODULES & sys.modules.keys():
        return "sqlite3 or dbm is imported"
    if not _resource_warnings_ignored():
        return "ResourceWarning is shown"
    new_code = _new_code()
    if new_code is not None:
        return new_code
    for ref, idle in _Ending.watched:
        obj = ref()
        if obj is not None and not idle(obj):
            return f"the libraries' {type(obj).__qualname__} would finalize"
    objects, codes = gc.get_objects(), _dropping_codes()
    # each kind judged once; the objects of the kinds that need a look, picked out without a loop of
    # Python code over them all (a command leaves thousands)
    tests = {}
    for kind in set(map(type, objects)):
        verdict = _verdict(kind, codes)
        if isinstance(verdict, str):
            return verdict
        if verdict is not None:
            tests[kind] = verdict
    for obj in itertools.compress(objects, map(tests.__contains__, map(type, objects))) if tests else ():
        if not tests[type(obj)](obj):
            return f"a {type(obj).__qualname__} would finalize"
    return None


def _verdict(kind, codes):
    """For an object the command made: None (freeing it is unseen), a test, or why it could be seen."""
    if _is_weak(kind):
        return lambda ref: _unseen_when_freed(ref, _weak_callback(ref), codes)
    if getattr(kind, "__del__", None) is not None:
        return _finalizer_check(kind)
    tests = []
    for base in kind.__mro__:
        name = base.__module__ if isinstance(base.__module__, str) else ""
        top = name.partition(".")[0]
        if top in _WRITING_MODULES:
            return f"a {base.__qualname__} is alive"
        if name == "builtins" or top in sys.stdlib_module_names or _defined_in_python(base, name):
            continue
        if name.startswith(_FREES_MEMORY_ONLY_IN):
            continue
        if (name, base.__qualname__) not in _FREES_MEMORY_ONLY:
            return f"an object of an extension type ({name}.{base.__qualname__}) is alive"
        test = _FREES_MEMORY_ONLY[name, base.__qualname__]
        if test is not None:
            tests.append(test)
    if not tests:
        return None
    return lambda obj: all(test(obj) for test in tests)


def _defined_in_python(kind, module_name):
    if not kind.__flags__ & _PY_TPFLAGS_HEAPTYPE:
        return False
    path = getattr(sys.modules.get(module_name), "__file__", None)
    return isinstance(path, str) and not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def _resource_warnings_ignored():
    """Whether the warnings filters ignore every ResourceWarning (a socket or scandir iterator left open
    warns when freed)."""
    warnings = sys.modules.get("warnings") or sys.modules.get("_warnings")
    for action, message, category, module, lineno in getattr(warnings, "filters", None) or ():
        if not (isinstance(category, type) and issubclass(ResourceWarning, category)):
            continue
        if action != "ignore":
            return False
        if (message is None or message.pattern in ("", ".*")) and (module is None or module.pattern in ("", ".*")) \
                and not lineno:
            return True
    return False


def _code_files():
    """The executable files mapped into this process."""
    files = set()
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) > 5 and "x" in parts[1] and parts[5].startswith("/"):
                files.add(parts[5].rstrip("\n"))
    return files


# dl_iterate_phdr's callback, made once here (making one maps memory for its trampoline)
_PHDR_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_ADDS_OFFSET = 32  # of dlpi_adds in glibc's struct dl_phdr_info on 64-bit targets


def _first_object(info, size, _data):
    _loading.append(ctypes.c_ulonglong.from_address(info + _ADDS_OFFSET).value if size >= _ADDS_OFFSET + 8 else None)
    return 1  # one object is enough: the counter is the dynamic linker's


_loading = []
_first_object_callback = _PHDR_CALLBACK(_first_object)


def _objects_loaded():
    """How many libraries the dynamic linker has loaded in all (glibc's counter); None if unknown."""
    _loading.clear()
    if ctypes.sizeof(ctypes.c_void_p) != 8 or not hasattr(_LIBC, "dl_iterate_phdr"):
        return None
    _LIBC.dl_iterate_phdr(_first_object_callback, None)
    return _loading[0] if _loading else None


def _no_code_since_the_fork():
    loaded = _objects_loaded()
    if loaded is not None and _Ending.objects_loaded is not None:
        return loaded == _Ending.objects_loaded
    return _code_files() <= _Ending.code_files


def _new_code():
    """Why a library loaded since the parent's imports ended could make the ending visible, or None. One
    installed with the interpreter or the system (as the parent's are; a step cannot write there) is
    taken as the parent's libraries are, unless it registers ``Py_AtExit`` functions; one from anywhere
    else (a step's own build, say) turns the short ending off."""
    if _no_code_since_the_fork():
        return None
    for path in sorted(_code_files() - _Ending.code_files):
        if not any(_under(os.path.realpath(path), tree) for tree in _installed_trees()):
            return f"a library was loaded after the fork from {path}"
        if _registers_at_exit(path):
            return f"{path}, loaded after the fork, registers Py_AtExit functions"
    return None


def _installed_trees():
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return {os.path.realpath(tree) for tree in prefixes} | {"/usr", "/lib", "/lib32", "/lib64"}


def _registers_at_exit(path):
    """Whether a mapped library imports Py_AtExit (its dynamic symbols name it; the interpreter itself
    defines it). What cannot be read as a 64-bit ELF file is searched whole."""
    if "libpython" in os.path.basename(path) or os.path.realpath(path) == os.path.realpath(sys.executable):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                fh.seek(0)
                return b"Py_AtExit\0" in fh.read()
            order = "<" if head[5] == 1 else ">"
            table_at, = struct.unpack_from(order + "Q", head, 0x28)
            entry_size, count = struct.unpack_from(order + "HH", head, 0x3A)
            fh.seek(table_at)
            table = fh.read(entry_size * count)
            # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
            sections = [struct.unpack_from(order + "IIQQQQIIQQ", table, i * entry_size) for i in range(count)]
            for section in sections:
                if section[1] == 11:  # SHT_DYNSYM, whose names are in the section it links to
                    names = sections[section[6]]
                    fh.seek(names[4])
                    return b"\0Py_AtExit\0" in b"\0" + fh.read(names[5])
            return False  # no dynamic symbols: it calls nothing of the interpreter's
    except (OSError, struct.error, IndexError):
        return True


def _main():
    # the children's memory is a copy of this process: no one else may read or trace it
    _prctl(PR_SET_DUMPABLE, 0)
    control = socket.socket(fileno=_CONTROL)
    dispositions, made = _start(control)
    return _serve(control, dispositions, made)


"""The process that becomes the command: what ``/proc`` shows of it (command line, environment,
name), its descriptors, working directory, ``sys.argv`` and ``__main__``; for a step built ahead, the
script compiled before ``go`` and the wait for it.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import ctypes
import io
import signal
import stat


class _MmMap(ctypes.Structure):
    """struct prctl_mm_map (linux/prctl.h)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
        "arg_start", "arg_end", "env_start", "env_end", "auxv")] + [
        ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


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

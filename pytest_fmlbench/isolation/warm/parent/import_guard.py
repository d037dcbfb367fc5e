"""The guard: what importing may do in this process, which runs outside the sandbox. An audit hook
refuses, while the libraries are imported, whatever the step's sandbox would have answered otherwise.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import errno
import types

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


def _real_path(path, real_folders):
    """``os.path.realpath(path)``, each folder resolved once in ``real_folders``: a library's thousands of
    files share a few hundred folders, and resolving each path anew (a system call per component) took most
    of a parent's start (0.3-0.5 s for numpy and pydantic, seconds for torch)."""
    if os.path.islink(path):
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    real = real_folders.get(folder)
    if real is None:
        real = real_folders[folder] = os.path.realpath(folder)
    return os.path.join(real, name) if name not in ("", ".", "..") else os.path.realpath(path)


def _quiet_hook_adders():
    """The code of the functions known to add an audit hook that does nothing at the interpreter's end:
    the task kit's data guard (``seal``; its hook looks at "open" events only), compiled from the
    package's own file beside this one (nothing of the package is imported), as a workspace's
    protected copy of it compiles."""
    # this file is the package's isolation/warm/parent/
    package = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    path = os.path.join(package, "taskkit", "data_guard.py")
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
        self.real_folders = {}
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
        real = _real_path(path, self.real_folders)
        for candidate in {path, real}:
            for folder in self.masked:
                if _under(candidate, folder) and not (candidate != folder and candidate.endswith(_CODE_SUFFIXES)
                                                       and os.path.isdir(folder)):
                    return False
        return any(_under(path, tree) for tree in self.read) and any(_under(real, tree) for tree in self.read)

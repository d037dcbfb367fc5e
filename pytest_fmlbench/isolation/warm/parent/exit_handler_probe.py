"""The C library's exit handlers, probed: a fork of the parent runs them under a seccomp filter that
allows only the calls that release memory; where they do nothing else, a command's short ending may
skip them.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import ctypes
import signal
import time

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

"""Pages copied ahead: a step built ahead makes its own copy of the parent's pages while it waits for
``go`` (``_own_pages``), and first of those a command's ending writes to, which the parent learns once
from a probe of itself under a seccomp filter (``_pages_an_ending_writes``).

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import atexit
import ctypes
import errno
import select
import signal
import struct
import time

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

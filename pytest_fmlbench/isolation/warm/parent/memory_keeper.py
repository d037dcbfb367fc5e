"""The memory keeper: a process made with a command's memory (CLONE_VM) and nothing else, so that the
command's exit is seen before that memory is released.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import ctypes
import signal

_LIBC.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
CLONE_VM, CLONE_PARENT = 0x100, 0x8000
# a command's memory keeper waits in pause(): clone calls it with an argument, which it ignores
_PAUSE = ctypes.cast(_LIBC.pause, ctypes.c_void_p).value if os.uname().machine in ("x86_64", "aarch64") else None
_KEEPER_STACK = 1 << 16


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

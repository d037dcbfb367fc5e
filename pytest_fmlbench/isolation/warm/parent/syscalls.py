"""The kernel's and the C library's calls that every part uses, with their constants: the C library
through ctypes, the namespace flags, the mount and prctl numbers, and ``MechanismError`` (entering a
step failed before any code of the command ran).

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import ctypes

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

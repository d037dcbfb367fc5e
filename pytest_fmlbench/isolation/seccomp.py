"""The agent sandbox's seccomp filter: the calls a container runtime's default profile refuses, refused.

Docker's and podman's default profiles refuse an unprivileged container what reaches beyond its own
processes and files: mounting and namespaces (``mount``, ``unshare``, ``setns``, ``clone`` with a
namespace flag; ``clone3``, whose flags a filter cannot read, answers ENOSYS so that the C library falls
back to ``clone``), the kernel's keyrings, modules, BPF, performance counters, ``userfaultfd``,
``kexec``, swap, the clock, quotas, rebooting, the kernel log, other processes' memory, ``io_uring``,
``socket(AF_VSOCK)`` (no network namespace covers it) and every ``personality`` but the harmless ones.
This filter refuses the same, with EPERM as they do (a caller sees a refusal, nothing is killed), and
``ptrace`` and its relatives too (Docker allows them on kernels from 4.8; no agent needs them). It is a
denylist, not Docker's allowlist: a call newer than the list (``fchmodat2``, ``map_shadow_stack``, ...)
that the C library or a runtime starts using keeps working.

Only x86_64 and aarch64 are covered: a filter needs the machine's call numbers, and those are the
machines this benchmark runs on. Calls of any other ABI on them (32-bit ``int 0x80`` on x86_64, x32,
32-bit ARM) are refused whole: nothing in an agent's sandbox needs them, and a denylist that knew only
the 64-bit numbers would let the same calls through under the other numbers.
"""

from __future__ import annotations

import errno
import struct

# struct seccomp_data: the call's number, its architecture, then six 64-bit arguments
_NR, _ARCH, _ARGS = 0, 4, 16
# classic BPF opcodes (linux/filter.h): load a 32-bit word, compare with a constant, return a constant
_LOAD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000  # x32 calls are x86_64's numbers with this bit set

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# the flags of clone that make a namespace (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
CLONE_NAMESPACE_FLAGS = 0x7E020000
AF_VSOCK = 40
# what personality() may set: the default Linux personality, UNAME26, LINUX32 and both, and the query
HARMLESS_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

# refused whatever the arguments, by purpose; None: the call does not exist on that machine
_REFUSED: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64, aarch64)
    # mounts and namespaces
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_tree_attr": (467, 467), "open_by_handle_at": (304, 265),
    # the kernel's keyrings, shared by every namespace
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    # other processes: tracing, their memory, their file descriptors
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "kcmp": (312, 272), "pidfd_getfd": (438, 438), "process_madvise": (440, 440),
    # kernel code and kernel-side programs
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    # the machine as a whole
    "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225), "syslog": (103, 116),
    "acct": (163, 89), "settimeofday": (164, 170), "clock_settime": (227, 112),
    "sethostname": (170, 161), "setdomainname": (171, 162), "vhangup": (153, 58),
    "quotactl": (179, 60), "quotactl_fd": (443, 443), "lookup_dcookie": (212, 18), "nfsservctl": (180, 42),
    "fanotify_init": (300, 262), "iopl": (172, None), "ioperm": (173, None),
    # memory placement on other nodes and of other processes (Docker: CAP_SYS_NICE only)
    "mbind": (237, 235), "set_mempolicy": (238, 237), "get_mempolicy": (239, 236),
    "migrate_pages": (256, 238), "move_pages": (279, 239), "set_mempolicy_home_node": (450, 450),
    # obsolete calls an old attack surface keeps
    "uselib": (134, None), "ustat": (136, None), "sysfs": (139, None), "_sysctl": (156, None),
    "create_module": (174, None), "get_kernel_syms": (177, None), "query_module": (178, None),
    "getpmsg": (181, None), "putpmsg": (182, None), "afs_syscall": (183, None), "tuxcall": (184, None),
    "security": (185, None), "vserver": (236, None),
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = {"x86_64": 435, "aarch64": 435}
_SOCKET = {"x86_64": 41, "aarch64": 198}
_PERSONALITY = {"x86_64": 135, "aarch64": 92}


def refused_numbers(machine: str) -> dict[str, int]:
    """The calls refused whatever their arguments, by name, on ``machine``."""
    column = 0 if machine == "x86_64" else 1
    return {name: numbers[column] for name, numbers in _REFUSED.items() if numbers[column] is not None}


def call_number(name: str, machine: str) -> int:
    """A call's number on ``machine``, for the calls this filter knows (those it refuses or inspects)."""
    argument_checked = {"clone": _CLONE, "clone3": _CLONE3, "socket": _SOCKET, "personality": _PERSONALITY}
    if name in argument_checked:
        return argument_checked[name][machine]
    return refused_numbers(machine)[name]


def program(machine: str) -> bytes | None:
    """The filter for ``machine`` as the array of ``struct sock_filter`` that bubblewrap's ``--seccomp``
    reads, or None for a machine it does not cover."""
    if machine not in AUDIT_ARCH:
        return None
    refuse, allow = _RET_ERRNO | errno.EPERM, _RET_ALLOW
    code = [(_LOAD, 0, 0, _ARCH), (_JEQ, 1, 0, AUDIT_ARCH[machine]), (_RET, 0, 0, refuse), (_LOAD, 0, 0, _NR)]
    if machine == "x86_64":
        code += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, refuse)]
    for number in sorted(refused_numbers(machine).values()):
        code += [(_JEQ, 0, 1, number), (_RET, 0, 0, refuse)]
    code += [(_JEQ, 0, 1, _CLONE3[machine]), (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    # below, each call's block loads an argument, so it ends in returns: the call's number is gone
    clone = [(_LOAD, 0, 0, _argument(0)), (_JSET, 0, 1, CLONE_NAMESPACE_FLAGS), (_RET, 0, 0, refuse),
             (_RET, 0, 0, allow)]
    socket = [(_LOAD, 0, 0, _argument(0)), (_JEQ, 0, 1, AF_VSOCK), (_RET, 0, 0, refuse), (_RET, 0, 0, allow)]
    personality = [(_LOAD, 0, 0, _argument(0))]
    for i, value in enumerate(HARMLESS_PERSONALITIES):
        personality.append((_JEQ, len(HARMLESS_PERSONALITIES) - i, 0, value))  # to the ALLOW at the end
    personality += [(_RET, 0, 0, refuse), (_RET, 0, 0, allow)]
    for number, block in ((_CLONE[machine], clone), (_SOCKET[machine], socket),
                          (_PERSONALITY[machine], personality)):
        code += [(_JEQ, 0, len(block), number), *block]
    code.append((_RET, 0, 0, allow))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def _argument(index: int) -> int:
    """Where the low 32 bits of a call's argument lie (both machines are little-endian): every argument
    checked here is a 32-bit int or flags that fit in 32 bits."""
    return _ARGS + 8 * index
